package stdio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Decoding a line into a JSON-RPC message: a fast path for the common shapes, whose params
// and results point into the line read, and the SDK's decoder for the rest.

// wireMessage is a JSON-RPC message as it is on the wire.
type wireMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
}

// decodeMessage decodes one message by the rules of the SDK's jsonrpc.DecodeMessage (version
// "2.0"; a "method" makes a request, even an empty one; a response needs an ID). It exists
// because the SDK's decoder allocates a large buffer for every message, which made garbage
// collection the aggregator's main cost (see BENCHMARKS.md). owned says that line belongs to
// the message: its params or result then point into it instead of being copied (an 8 MiB
// result is not held twice).
func decodeMessage(line []byte, owned bool) (jsonrpc.Message, error) {
	var (
		version, id, method, params, result, errObj []byte
	)
	// One pass checks the line as json.Valid would and finds its members; a line it refuses
	// (malformed: decodeSlow says how) or stops at goes to encoding/json.
	ok := rawjson.Members(line, func(key []byte, start, end int) bool {
		v := line[start:end]
		switch string(key) {
		case "jsonrpc":
			version = v
		case "id":
			id = v
		case "method":
			method = v
		case "params":
			params = v
		case "result":
			result = v
		case "error":
			errObj = v
		default:
			// encoding/json matches keys without regard to case: leave such oddities to it.
			for _, k := range wireKeys {
				if bytes.EqualFold(key, []byte(k)) {
					return false
				}
			}
		}
		return true
	})
	if !ok {
		return decodeSlow(line)
	}
	if string(version) != `"2.0"` {
		return decodeSlow(line)
	}
	msgID, fast := fastID(id)
	if !fast {
		return decodeSlow(line)
	}
	keep := func(v []byte) json.RawMessage {
		if v == nil || owned {
			return v
		}
		return bytes.Clone(v)
	}
	if method != nil && string(method) != "null" {
		name, ok := rawjson.String(method)
		if !ok {
			return decodeSlow(line)
		}
		return &jsonrpc.Request{ID: msgID, Method: methodName(name), Params: keep(params)}, nil
	}
	if !msgID.IsValid() {
		return nil, errors.New("invalid request: a response without an id")
	}
	resp := &jsonrpc.Response{ID: msgID, Result: keep(result)}
	if errObj != nil && string(errObj) != "null" {
		var e jsonrpc.Error
		if err := json.Unmarshal(errObj, &e); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		resp.Error = &e
	}
	return resp, nil
}

// MethodName is the JSON string v (a method's name as written) decoded, as rawjson.Decode
// does; the common methods' names without allocating.
func MethodName(v []byte) (string, bool) {
	if name, ok := rawjson.String(v); ok {
		return methodName(name), true
	}
	return rawjson.Decode(v)
}

// methodName is name as a string: for the methods every session sends and receives, the one
// string of the program's (a switch on string(name) does not allocate), not a new one per
// message.
func methodName(name []byte) string {
	switch string(name) {
	case "tools/call":
		return "tools/call"
	case "tools/list":
		return "tools/list"
	case "prompts/get":
		return "prompts/get"
	case "prompts/list":
		return "prompts/list"
	case "resources/read":
		return "resources/read"
	case "resources/list":
		return "resources/list"
	case "resources/templates/list":
		return "resources/templates/list"
	case "completion/complete":
		return "completion/complete"
	case "ping":
		return "ping"
	case "notifications/progress":
		return "notifications/progress"
	case "notifications/cancelled":
		return "notifications/cancelled"
	case "notifications/message":
		return "notifications/message"
	}
	return string(name)
}

var wireKeys = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// fastID decodes the common IDs, absent, null, small integers and strings without escapes,
// exactly as decodeSlow would; fast is false for the others.
func fastID(v []byte) (id jsonrpc.ID, fast bool) {
	if v == nil || string(v) == "null" {
		return jsonrpc.ID{}, true
	}
	if s, ok := rawjson.String(v); ok {
		return idOf(string(s)), true
	}
	// Integers of up to 15 digits survive decodeSlow's float64 unchanged.
	if len(v) <= 15 {
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return idOf(n), true
		}
	}
	return jsonrpc.ID{}, false
}

// decodeSlow decodes a message with encoding/json: messages with unusual IDs, escaped method
// names, keys in other cases, and invalid ones.
func decodeSlow(line []byte) (jsonrpc.Message, error) {
	var w wireMessage
	if err := json.Unmarshal(line, &w); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if w.JSONRPC != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected \"2.0\"", w.JSONRPC)
	}
	var id jsonrpc.ID
	if len(w.ID) > 0 && string(w.ID) != "null" {
		var raw any
		if err := json.Unmarshal(w.ID, &raw); err != nil {
			return nil, err
		}
		var err error
		if id, err = jsonrpc.MakeID(raw); err != nil {
			return nil, err
		}
	}
	if w.Method != nil {
		return &jsonrpc.Request{ID: id, Method: *w.Method, Params: w.Params}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("invalid request: a response without an id")
	}
	resp := &jsonrpc.Response{ID: id, Result: w.Result}
	if w.Error != nil {
		resp.Error = w.Error
	}
	return resp, nil
}
