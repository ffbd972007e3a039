// Package config holds the Go types generated from schema/config.schema.json. They are the
// decoding target of internal/config and go no further: the rest of the program uses the
// domain types of internal/config. Regenerate with `make generate` (or `go generate ./...`).
package config

//go:generate go run github.com/atombender/go-jsonschema --only-models --tags json --package config --schema-root-type https://github.com/mcp-simple-aggregator/mcp-simple-aggregator/schema/config.schema.json=Config --output config.go ../../schema/config.schema.json
