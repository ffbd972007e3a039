//go:build tools

// This file pins the versions of the code generators in go.mod; it is never built.
package tools

import (
	_ "github.com/atombender/go-jsonschema"
)
