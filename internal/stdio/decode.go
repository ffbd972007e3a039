package stdio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unsafe"

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
	kind, idText, idNum := readID(id)
	if kind == otherID {
		return decodeSlow(line)
	}
	if method != nil && string(method) != "null" {
		name, ok := rawjson.String(method)
		if !ok {
			return decodeSlow(line)
		}
		var req *jsonrpc.Request
		var room []byte
		if fitsBox(params, idText, owned, requestRoom) {
			box := new(requestBox)
			req, room = &box.req, box.room[:0]
		} else {
			req = new(jsonrpc.Request)
		}
		req.Method = methodName(name)
		req.Params, room = keep(params, room, owned)
		req.ID = makeID(kind, idText, idNum, room)
		return req, nil
	}
	if kind == noID {
		return nil, errors.New("invalid request: a response without an id")
	}
	var resp *jsonrpc.Response
	var room []byte
	if fitsBox(result, idText, owned, responseRoom) {
		box := new(responseBox)
		resp, room = &box.resp, box.room[:0]
	} else {
		resp = new(jsonrpc.Response)
	}
	resp.Result, room = keep(result, room, owned)
	resp.ID = makeID(kind, idText, idNum, room)
	if errObj != nil && string(errObj) != "null" {
		var e jsonrpc.Error
		if err := json.Unmarshal(errObj, &e); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		resp.Error = &e
	}
	return resp, nil
}

// A message read is kept beyond the line it was read from, whose buffer the reader reuses:
// its params or result, and its ID's bytes, are copied. Most messages are small, and for them
// the copies go in the allocation of the message itself (a box): one allocation where there
// were three (the message, its params or result, its ID's bytes), for every message read,
// which were most of the aggregator's allocations a call. A box is 256 bytes, one of the
// allocator's sizes: the message, and room beside it.
const (
	boxSize      = 256
	requestRoom  = boxSize - int(unsafe.Sizeof(jsonrpc.Request{}))
	responseRoom = boxSize - int(unsafe.Sizeof(jsonrpc.Response{}))
)

type requestBox struct {
	req  jsonrpc.Request
	room [requestRoom]byte
}

type responseBox struct {
	resp jsonrpc.Response
	room [responseRoom]byte
}

// fitsBox says whether a message whose params or result are payload, and whose ID's bytes
// are idText, read from a line that is not owned, is kept in a box of room bytes: it has
// something to copy, and room for it.
func fitsBox(payload, idText []byte, owned bool, room int) bool {
	n := len(payload) + len(idText)
	return !owned && n > 0 && n <= room
}

// keep is v (params or a result) as the message keeps it: v itself when the line is owned (or
// v is nil), else a copy, in room when it has room for it (its capacity, after its length),
// with room grown by it; a copy of its own otherwise. A copy in room ends there (its capacity
// is its length), so that an append to it does not write over what follows.
func keep(v, room []byte, owned bool) (json.RawMessage, []byte) {
	switch {
	case v == nil || owned:
		return v, room
	case cap(room)-len(room) < len(v):
		return bytes.Clone(v), room
	}
	at := len(room)
	room = append(room, v...)
	return room[at:len(room):len(room)], room
}

// The kinds of IDs readID reads.
type idKind int

const (
	noID     idKind = iota // absent, or null
	stringID               // a string without escapes
	intID                  // an integer of up to 15 digits
	otherID                // any other: decodeSlow decodes it
)

// readID reads the common IDs, absent, null, small integers and strings without escapes, as
// decodeSlow would: a string's bytes (in v), an integer's value; otherID for the others.
func readID(v []byte) (kind idKind, text []byte, n int64) {
	if v == nil || string(v) == "null" {
		return noID, nil, 0
	}
	if s, ok := rawjson.String(v); ok {
		return stringID, s, 0
	}
	// Integers of up to 15 digits survive decodeSlow's float64 unchanged.
	if len(v) <= 15 {
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return intID, nil, n
		}
	}
	return otherID, nil, 0
}

// makeID is the ID readID read: a string's bytes copied into room when it has room for them (a
// box's, whose bytes are never written again, so that the ID's string may be them), else into
// a string of their own.
func makeID(kind idKind, text []byte, n int64, room []byte) jsonrpc.ID {
	switch kind {
	case intID:
		return idOf(n)
	case stringID:
		if len(text) == 0 || cap(room)-len(room) < len(text) {
			return idOf(string(text))
		}
		at := len(room)
		room = append(room, text...)
		return idOf(unsafe.String(&room[at], len(text)))
	}
	return jsonrpc.ID{}
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
