//go:build !unix

package stdio

import "io"

// tryWriter is nil where pipes cannot be written without waiting: Send leaves every message
// to its background writer.
func tryWriter(io.Writer) func([]byte) (int, error) { return nil }
