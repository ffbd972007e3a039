package aggregator

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// Every JSON-RPC message the aggregator writes itself is built here, or by internal/stdio's
// builders (Request, Notification, Cancelled, Response), as the parts of one line for
// stdio.Conn (values that pass through, params and results, are parts of their own and are
// never copied or re-encoded).

// logNotification is a notifications/message of the aggregator's own.
func logNotification(level, text string) [][]byte {
	params, _ := json.Marshal(struct {
		Level  string `json:"level"`
		Logger string `json:"logger"`
		Data   string `json:"data"`
	}{level, "mcp-simple-aggregator", text})
	return stdio.Notification("notifications/message", params)
}

// marshal encodes v as JSON without escaping <, > and & (encoding/json's default, for HTML):
// the texts the aggregator writes (instructions) are read by people and models.
func marshal(v any) json.RawMessage { return rawjson.Marshal(v) }

// The aggregator's own error answers. Every message has one form: the meaning of the code as
// the MCP SDKs write it ("Invalid params", "Method not found", "Unknown tool", ...), a colon,
// and what went wrong in this case, with what to do where the user can do something.

// rpcError encodes a JSON-RPC error object.
func rpcError(code int64, data json.RawMessage, format string, args ...any) json.RawMessage {
	return stdio.ErrorObject(code, data, fmt.Sprintf(format, args...))
}

func invalidParams(format string, args ...any) json.RawMessage {
	return rpcError(jsonrpc.CodeInvalidParams, nil, "Invalid params: "+format, args...)
}

func methodNotFound(format string, args ...any) json.RawMessage {
	return rpcError(jsonrpc.CodeMethodNotFound, nil, "Method not found: "+format, args...)
}

// unknownName is the answer for a tool or prompt name that is not listed.
func unknownName(what, name string) json.RawMessage {
	return rpcError(jsonrpc.CodeInvalidParams, nil, "Unknown %s: %s", what, name)
}

// resourceNotFound is the error the specification gives for an unknown resource (-32002,
// with the URI in data), saying why no server was chosen.
func resourceNotFound(uri, why string) json.RawMessage {
	data, _ := json.Marshal(map[string]string{"uri": uri})
	return rpcError(era.CodeResourceNotFound, data, "Resource not found: %s: %s", uri, why)
}

// serverGone is the answer to a request whose server went down or cannot be written to; then
// says what follows for the server ("; it is restarted in 1s").
func serverGone(c *call, key, why, then string) json.RawMessage {
	return rpcError(jsonrpc.CodeInternalError, nil, "Server unavailable: server %q %s while %s%s", key, why, c.what(), then)
}
