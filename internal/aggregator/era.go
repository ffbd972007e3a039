package aggregator

import "github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/mcpschema"

// The protocol eras. MCP 2026-07-28 removed the initialize handshake: every request carries
// its protocol version, the client's capabilities and clientInfo in _meta
// (basic/index.mdx, "Request _meta"). The aggregator speaks both eras with its client and with
// each child; the era of each peer is decided once (the client's by its first request, a
// child's by its probe) and the envelope of every message is written for that era.

// era is a peer's protocol era.
type era uint8

const (
	// legacy is the initialize era: protocol versions up to 2025-11-25.
	legacy era = iota
	// modern is the per-request era: 2026-07-28 and later.
	modern
)

func (e era) String() string {
	if e == modern {
		return "modern"
	}
	return "legacy"
}

// schema is the era of the MCP schema that definitions for a client of era e are checked
// against (withheld.go).
func (e era) schema() mcpschema.Era {
	if e == modern {
		return mcpschema.Modern
	}
	return mcpschema.Legacy
}

// modernVersions are the modern protocol versions the aggregator speaks, latest first.
var modernVersions = []string{"2026-07-28"}

// The request _meta keys of the modern era (basic/index.mdx, schema.ts RequestMetaObject).
const (
	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	metaCapabilities    = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo      = "io.modelcontextprotocol/clientInfo"
	metaLogLevel        = "io.modelcontextprotocol/logLevel"
	metaServerInfo      = "io.modelcontextprotocol/serverInfo"
	metaSubscriptionID  = "io.modelcontextprotocol/subscriptionId"
)

// cacheHint is the ttlMs and cacheScope of a cacheable result (server/utilities/caching.mdx).
// The zero value is what a legacy server's result stands for: stale at once (ttlMs 0), and
// private, since nothing says its data is the same for every user.
type cacheHint struct {
	ttlMs  int64
	public bool
}
