package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// badClientLine answers a line from the client that is not a JSON-RPC message with the
// JSON-RPC error for it, and the session goes on.
func (a *Aggregator) badClientLine(c *stdio.Conn, line []byte, err error) jsonrpc.Message {
	code, msg := jsonrpc.CodeInvalidRequest, "Invalid Request: "+err.Error()
	id := json.RawMessage("null")
	switch {
	case errors.Is(err, stdio.ErrTooLarge):
		msg = fmt.Sprintf("Invalid Request: message larger than %d bytes (see --max-message-size)", a.opts.MaxMessageSize)
		if pid, ok := stdio.TooLargeID(err); ok {
			id, _ = json.Marshal(pid.Raw())
		}
	case !json.Valid(line):
		code, msg = jsonrpc.CodeParseError, "Parse error: the line is not valid JSON"
	case strings.HasPrefix(string(line), "["):
		// Batches are taken apart by the connection when the session allows them.
		if version := a.clientVersion(); version == "" {
			msg = "Invalid Request: a JSON-RPC batch before initialize (initialize must be sent on its own)"
		} else {
			msg = fmt.Sprintf("Invalid Request: JSON-RPC batches are not part of protocol version %s (they were removed in 2025-06-18)", version)
		}
	default:
		id = stdio.RequestID(line)
	}
	a.log.Warn("answered a malformed message from the client with an error", "code", code, "line", excerpt(line))
	resp, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   jsonrpc.Error   `json:"error"`
	}{"2.0", id, jsonrpc.Error{Code: int64(code), Message: msg}})
	_ = c.WriteRaw(resp)
	return nil
}

// initialized warns, once, when the client is one known to reject some of the tool names.
func (a *Aggregator) initialized(_ context.Context, req *mcp.InitializedRequest) {
	params := req.Session.InitializeParams()
	if params == nil || params.ClientInfo == nil {
		return
	}
	a.log.Debug("client initialized", "client", params.ClientInfo.Name, "version", params.ClientInfo.Version, "protocol", params.ProtocolVersion)
	client := strictClient(params.ClientInfo.Name)
	if client == "" {
		return
	}
	if bad := a.catalog.Load().rejectedNames(); len(bad) > 0 {
		a.log.Warn(fmt.Sprintf("the client is %s (%q), which rejects %d of the tool names (%s); restart with --separator __ to avoid it",
			client, params.ClientInfo.Name, len(bad), quoteList(bad[:min(3, len(bad))])))
	}
}

// strictClient names the client when it is one known to accept only tool names of letters,
// digits, _ and - (see docs/clients.md).
func strictClient(name string) string {
	n := strings.ToLower(name)
	for _, c := range []struct{ match, name string }{
		{"claude-ai", "Claude Desktop"},
		{"claude desktop", "Claude Desktop"},
		{"cursor", "Cursor"},
		{"openai", "an OpenAI client"},
		{"chatgpt", "ChatGPT"},
		{"anthropic", "an Anthropic API client"},
	} {
		if strings.Contains(n, c.match) {
			return c.name
		}
	}
	return ""
}
