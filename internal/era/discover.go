package era

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// The server/discover probe: how a client learns the era of a server it starts
// (basic/transports/stdio.mdx, "Backward Compatibility"): "The server returns a
// DiscoverResult: the server is modern. Select a mutually supported version from
// supportedVersions and continue. - The server returns a recognized modern JSON-RPC error such
// as UnsupportedProtocolVersionError: the server is modern but does not support the requested
// version. Use one of the versions in its advertised supported list. Do not fall back to
// initialize. - The server returns any other error, or does not respond within a reasonable
// timeout: the server is legacy. Fall back to the initialize handshake. The fallback MUST NOT
// be keyed to one specific error code".

// Discovered is what a server said of itself in its DiscoverResult.
type Discovered struct {
	Version      string // the version chosen: the newest both speak
	Name         string // its serverInfo.name
	Caps         map[string]json.RawMessage
	Instructions string
}

// ReadDiscover reads a server's DiscoverResult; why says what makes it legacy when it offers
// no modern version the aggregator speaks ("" for a modern one).
func ReadDiscover(result json.RawMessage) (d Discovered, why string) {
	var r struct {
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      map[string]json.RawMessage `json:"capabilities"`
		Instructions      string                     `json:"instructions"`
		Meta              map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return d, "its answer to server/discover is not a DiscoverResult: " + err.Error()
	}
	for _, v := range VersionsOf(Modern) {
		if slices.Contains(r.SupportedVersions, v) {
			d.Version = v
			break
		}
	}
	if d.Version == "" {
		return d, fmt.Sprintf("its DiscoverResult lists the versions %v, none of them modern", r.SupportedVersions)
	}
	var info struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(r.Meta[MetaServerInfo], &info)
	d.Name, d.Caps, d.Instructions = info.Name, r.Capabilities, r.Instructions
	if d.Caps == nil {
		d.Caps = map[string]json.RawMessage{}
	}
	return d, ""
}

// ProbeError is what the error answer e to the probe means: retry names a modern version to
// probe again with (once: a recognized modern error naming a version the aggregator speaks);
// fail is an error when the server speaks only modern versions the aggregator does not (it must
// not be initialized); otherwise the server is legacy. An UnsupportedProtocolVersionError whose
// supported list has a legacy version (the go-sdk restricted to legacy versions answers so, as
// do aggregators before 2026-07-28) means legacy, as both SDK clients read it.
func ProbeError(e *jsonrpc.Error) (retry string, fail error) {
	if e.Code != CodeUnsupportedVersion {
		return "", nil
	}
	var data struct {
		Supported []string `json:"supported"`
	}
	_ = json.Unmarshal(e.Data, &data)
	for _, v := range VersionsOf(Modern) {
		if slices.Contains(data.Supported, v) {
			return v, nil
		}
	}
	if len(data.Supported) > 0 && !hasAny(data.Supported, VersionsOf(Legacy)) {
		return "", fmt.Errorf("it speaks only the protocol versions %s, and mcp-simple-aggregator speaks %s", strings.Join(data.Supported, ", "), strings.Join(Versions, ", "))
	}
	return "", nil
}

// DiscoverResult is the aggregator's answer to server/discover (server/discover.mdx): every
// version it serves, what it offers, its instructions, and its serverInfo in _meta, private and
// stale at once (instructions change with a reload).
func DiscoverResult(caps map[string]json.RawMessage, instructions string, serverInfo json.RawMessage) json.RawMessage {
	return rawjson.Marshal(struct {
		ResultType        string                     `json:"resultType"`
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      map[string]json.RawMessage `json:"capabilities"`
		Instructions      string                     `json:"instructions,omitempty"`
		TTL               int64                      `json:"ttlMs"`
		CacheScope        string                     `json:"cacheScope"`
		Meta              map[string]json.RawMessage `json:"_meta"`
	}{"complete", Versions, caps, instructions, 0, "private", map[string]json.RawMessage{MetaServerInfo: serverInfo}})
}
