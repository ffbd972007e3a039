package aggregator

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The fast path forwards tools/call as raw JSON-RPC: the client's request goes to the child
// with only the tool's name and the request ID changed, and the child's answer goes back with
// only the ID changed. The SDK's sessions never see these messages; profiling showed that
// decoding and encoding them through the SDK on both sides cost the aggregator twice what the
// client itself spends per call (BENCHMARKS.md). Everything else (initialize, tools/list,
// ping, every request the fast path declines) stays with the SDK.

// fastPrefix starts the IDs of forwarded requests: strings, so they never meet the SDK's
// numeric IDs on the same connection.
const fastPrefix = "agg-"

// bigAnswer is the size of an answer after which the aggregator collects its garbage at once.
const bigAnswer = 4 << 20

// fastCall is a forwarded call waiting for the child's answer.
type fastCall struct {
	upID    jsonrpc.ID // the client's request ID
	childID string
	server  *server
	tool    string // exposed name, for the debug log
	orig    string // the child's name, for error messages
	start   time.Time
	args    int // size of the arguments, for the debug log
}

// fastCalls are the forwarded calls in flight, by child request ID and by client request ID.
type fastCalls struct {
	seq     atomic.Uint64
	mu      sync.Mutex
	byChild map[string]*fastCall
	byUp    map[jsonrpc.ID]*fastCall
}

func newFastCalls() *fastCalls {
	return &fastCalls{byChild: map[string]*fastCall{}, byUp: map[jsonrpc.ID]*fastCall{}}
}

func (f *fastCalls) add(c *fastCall) {
	f.mu.Lock()
	f.byChild[c.childID] = c
	f.byUp[c.upID] = c
	f.mu.Unlock()
}

// takeChild removes and returns the call s was sent as childID; nil when there is none. A
// child's answer only ever completes a call sent to that child: an ID made up or copied by
// another child matches nothing.
func (f *fastCalls) takeChild(s *server, childID string) *fastCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.byChild[childID]
	if c == nil || c.server != s {
		return nil
	}
	delete(f.byChild, childID)
	delete(f.byUp, c.upID)
	return c
}

func (f *fastCalls) takeUp(id jsonrpc.ID) *fastCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.byUp[id]
	if c != nil {
		delete(f.byChild, c.childID)
		delete(f.byUp, id)
	}
	return c
}

// takeServer removes and returns the calls in flight to s.
func (f *fastCalls) takeServer(s *server) []*fastCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*fastCall
	for id, c := range f.byChild {
		if c.server == s {
			out = append(out, c)
			delete(f.byChild, id)
			delete(f.byUp, c.upID)
		}
	}
	return out
}

// interceptClient takes a tools/call from the client onto the fast path, and a cancellation
// of such a call; it declines (false) whatever the SDK must handle: anything before the client
// is initialized, unknown tools, servers that are down, malformed params.
func (a *Aggregator) interceptClient(msg jsonrpc.Message) bool {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !a.ready.Load() {
		return false
	}
	switch req.Method {
	case "tools/call":
		return req.IsCall() && a.forwardCall(req)
	case "notifications/cancelled":
		return a.forwardCancel(req)
	}
	return false
}

func (a *Aggregator) forwardCall(req *jsonrpc.Request) bool {
	start, end, err := memberValue(req.Params, "name")
	if err != nil {
		return false
	}
	name, ok := rawjson.String(req.Params[start:end])
	if !ok {
		return false // escaped or not a string: the SDK decodes it
	}
	t, ok := a.catalog.Load().tools[string(name)]
	if !ok {
		return false // the SDK answers with the spec's error
	}
	select {
	case <-t.server.down:
		return false // the SDK path reports why
	default:
	}
	childID := fastPrefix + strconv.FormatUint(a.fast.seq.Add(1), 10)
	c := &fastCall{upID: req.ID, childID: childID, server: t.server, tool: t.exposed, orig: t.original}
	if a.debug {
		c.start = time.Now()
		if s, e, err := memberValue(req.Params, "arguments"); err == nil {
			c.args = e - s
		}
	}
	a.fast.add(c)
	// Send does not keep the client's reader waiting for a child that does not read its stdin.
	t.server.conn.Send(func(err error) {
		if a.fast.takeChild(t.server, childID) != nil {
			a.answerDown(c, "cannot be written to ("+err.Error()+")")
		}
	}, []byte(`{"jsonrpc":"2.0","id":"`+childID+`","method":"tools/call","params":`),
		req.Params[:start], t.quoted, req.Params[end:], []byte("}\n"))
	return true
}

// forwardCancel passes the client's cancellation of a forwarded call to the child.
func (a *Aggregator) forwardCancel(req *jsonrpc.Request) bool {
	var p struct {
		RequestID any    `json:"requestId"`
		Reason    string `json:"reason,omitempty"`
	}
	if json.Unmarshal(req.Params, &p) != nil {
		return false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return false
	}
	c := a.fast.takeUp(id)
	if c == nil {
		return false // not ours: the SDK cancels its own requests
	}
	params, _ := json.Marshal(struct {
		RequestID string `json:"requestId"`
		Reason    string `json:"reason,omitempty"`
	}{c.childID, p.Reason})
	c.server.conn.Send(nil, []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":`), params, []byte("}\n"))
	return true
}

// interceptChild takes the child's answers to forwarded calls and sends them to the client.
func (a *Aggregator) interceptChild(s *server, msg jsonrpc.Message) bool {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok {
		return false
	}
	childID, ok := resp.ID.Raw().(string)
	if !ok || !strings.HasPrefix(childID, fastPrefix) {
		return false
	}
	c := a.fast.takeChild(s, childID)
	if c == nil {
		return true // cancelled, or answered twice: nobody waits for it
	}
	var errObj json.RawMessage
	if resp.Error != nil {
		var err error
		if errObj, err = json.Marshal(resp.Error); err != nil {
			errObj = []byte(`{"code":-32603,"message":"the server's error could not be encoded"}`)
		}
	}
	if err := a.up.WriteResponse(c.upID, resp.Result, errObj); err != nil {
		a.log.Debug("writing an answer to the client", "error", err)
	}
	if len(resp.Result) >= bigAnswer {
		// The answer is garbage now. Left to the pacer, the next big answer is allocated
		// before this one is collected, and the peak memory doubles (BENCHMARKS.md); a
		// collection of the small live heap costs well under a millisecond here.
		runtime.GC()
	}
	if a.debug {
		a.log.Debug("tools/call", "tool", c.tool, "server", s.key, "duration", time.Since(c.start).Round(time.Microsecond),
			"args_bytes", c.args, "result_bytes", len(resp.Result), "error", string(errObj))
	}
	return true
}

// failFastCalls answers the forwarded calls in flight to a server that went down.
func (a *Aggregator) failFastCalls(s *server, why string) {
	for _, c := range a.fast.takeServer(s) {
		a.answerDown(c, why)
	}
}

func (a *Aggregator) answerDown(c *fastCall, why string) {
	errObj, _ := json.Marshal(&jsonrpc.Error{
		Code:    jsonrpc.CodeInternalError,
		Message: fmt.Sprintf("server %q %s while calling tool %q; its tools are no longer available", c.server.key, why, c.orig),
	})
	_ = a.up.WriteResponse(c.upID, nil, errObj)
}
