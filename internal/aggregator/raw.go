package aggregator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// The SDK decodes every result into its structs and encodes it again, which loses what it does
// not know (unknown fields vanish, big integers round, key order changes). The aggregator's
// own requests to a child (its lists) go through the SDK's client session, so a sink in the
// request's context catches the raw result of the child's response (the SDK itself is handed
// a small stub to decode). Requests on the client's behalf never meet the SDK (forward.go).

// sink receives the raw answer to one request sent to a child.
type sink struct {
	stub json.RawMessage // what the SDK decodes instead of the real result

	mu     sync.Mutex // a cancelled call returns while the answer may still arrive
	result json.RawMessage
	err    *jsonrpc.Error
	got    bool
}

// answer returns what the child answered, if it did.
func (s *sink) answer() (result json.RawMessage, err *jsonrpc.Error, got bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.result, s.err, s.got
}

type sinkKey struct{}

func withSink(ctx context.Context, s *sink) context.Context {
	return context.WithValue(ctx, sinkKey{}, s)
}

// stubList is what the SDK decodes instead of a list result.
var stubList = json.RawMessage(`{}`)

// childConn is a child's connection that fills the sinks of the requests written with one.
type childConn struct {
	*stdio.Conn
	pending sync.Map // jsonrpc.ID -> *sink
	// tasks is the child's tasks capability, raw, from its answer to initialize (the first
	// answer it sends): the SDK's types have no field for it. Set by the reading goroutine
	// before the SDK sees the answer.
	tasks   json.RawMessage
	sniffed bool
}

func (c *childConn) Connect(context.Context) (mcp.Connection, error) { return c, nil }

// Close, called by the SDK when the session ends, stops reading but leaves the child's stdin
// open: when the child closed its stdout, closing its stdin would make it exit and hide what
// happened. server.stop closes everything.
func (c *childConn) Close() error { return c.Conn.CloseRead() }

func (c *childConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		if s, ok := ctx.Value(sinkKey{}).(*sink); ok {
			c.pending.Store(req.ID, s)
			if err := c.Conn.Write(ctx, msg); err != nil {
				c.pending.Delete(req.ID)
				return err
			}
			return nil
		}
	}
	return c.Conn.Write(ctx, msg)
}

func (c *childConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Conn.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && !c.sniffed {
		c.sniffed = true
		if cs, ce, ok := rawjson.Member(resp.Result, "capabilities"); ok {
			if ts, te, ok := rawjson.Member(resp.Result[cs:ce], "tasks"); ok {
				c.tasks = bytes.Clone(resp.Result[cs+ts : cs+te])
			}
		}
	}
	if resp, ok := msg.(*jsonrpc.Response); ok {
		if v, ok := c.pending.LoadAndDelete(resp.ID); ok {
			s := v.(*sink)
			s.mu.Lock()
			s.got = true
			if resp.Error != nil {
				s.err, _ = resp.Error.(*jsonrpc.Error)
				if s.err == nil {
					s.err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: resp.Error.Error()}
				}
			} else {
				s.result = resp.Result
				resp.Result = s.stub
			}
			s.mu.Unlock()
		}
	}
	return msg, err
}

// renameTool returns the tool definition obj (a JSON object) with its "name" replaced by name,
// and the old name. Everything else is kept byte for byte, in order.
func renameTool(obj json.RawMessage, name string) (json.RawMessage, string, error) {
	start, end, err := memberValue(obj, "name")
	if err != nil {
		return nil, "", err
	}
	var old string
	if err := json.Unmarshal(obj[start:end], &old); err != nil {
		return nil, "", fmt.Errorf("its name is not a string: %s", obj[start:end])
	}
	quoted, _ := json.Marshal(name) // a string always encodes
	out := make([]byte, 0, len(obj)-(end-start)+len(quoted))
	out = append(out, obj[:start]...)
	out = append(out, quoted...)
	out = append(out, obj[end:]...)
	return out, old, nil
}

// memberValue finds the byte range of the value of the top-level member key in the JSON object
// obj; when key occurs more than once, the last one, which is what the child's JSON decoder
// uses too.
func memberValue(obj json.RawMessage, key string) (start, end int, err error) {
	if start, end, ok := rawjson.Member(obj, key); ok {
		return start, end, nil
	}
	if !rawjson.Object(obj, func([]byte, int, int) bool { return true }) || !json.Valid(obj) {
		return 0, 0, fmt.Errorf("not a JSON object: %.80s", obj)
	}
	return 0, 0, fmt.Errorf("it has no %q", key)
}

// encodeList encodes {"<field>":[...]} from raw definitions.
func encodeList(field string, defs []json.RawMessage) json.RawMessage {
	n := len(`{"":[]}`) + len(field)
	for _, d := range defs {
		n += len(d) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"`+field+`":[`...)
	for i, d := range defs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, d...)
	}
	return append(b, "]}"...)
}
