// Package schema holds the JSON Schema of the configuration file, the single place where the
// rules of the format live. The Go types in gen/config are generated from it and
// internal/config validates every configuration against it before anything is started.
package schema

import _ "embed"

// ConfigURL is the $id of the configuration schema.
const ConfigURL = "https://github.com/mcp-simple-aggregator/mcp-simple-aggregator/schema/config.schema.json"

// Config is the configuration schema (draft 2020-12), as checked in.
//
//go:embed config.schema.json
var Config []byte
