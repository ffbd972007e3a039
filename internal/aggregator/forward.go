package aggregator

import (
	"encoding/json"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// Requests of the client that a child answers (tools/call, prompts/get, resources/read,
// resources/subscribe and unsubscribe, completion/complete, logging/setLevel) are forwarded as
// raw JSON-RPC: the request goes to the child with only its ID changed, and the tool or
// prompt name where there is one; the child's answer goes back with only the ID changed. The
// SDK's sessions never see these messages: decoding and encoding them through the SDK cost
// twice what the client itself spends per call (BENCHMARKS.md), and lose what the SDK does
// not know. The SDK's server session does the handshake and ping; the client's other
// requests are answered from the catalog.

// fastPrefix starts the IDs of forwarded requests: strings, so they never meet the SDK's
// numeric IDs on the same connection.
const fastPrefix = "agg-"

// bigAnswer is the size of an answer after which the aggregator collects its garbage at once.
const bigAnswer = 4 << 20

// forwarded is a request sent to a child, waiting for the child's answer.
type forwarded struct {
	upID    jsonrpc.ID // the client's request ID (when up)
	up      bool       // the client waits for the answer; otherwise done does
	childID string
	server  *server
	method  string
	doing   string // what the request does, for messages, with %q for subject: `calling tool %q`
	subject string
	label   string // for the debug log: "tool", "prompt" or "uri", and its value
	value   string
	token   string // the key of the client's progress token; "" when none
	task    bool   // a tools/call that asked for a task
	start   time.Time
	args    int // size of the arguments (or params), for the debug log
	// done, when set, takes the answer instead of the client (a request the aggregator
	// sends to several children). It gets a JSON-RPC error object when the child went away.
	done func(result, errObj json.RawMessage)
}

// pendingTable holds the forwarded requests in flight: by child request ID, by client request
// ID and by progress token.
type pendingTable struct {
	seq     atomic.Uint64
	mu      sync.Mutex
	byChild map[string]*forwarded
	byUp    map[jsonrpc.ID]*forwarded
	byToken map[string]*forwarded
}

func newPendingTable() *pendingTable {
	return &pendingTable{byChild: map[string]*forwarded{}, byUp: map[jsonrpc.ID]*forwarded{}, byToken: map[string]*forwarded{}}
}

// add records f; it reports false, recording nothing, when f's server is down (serverDown
// marks it down before it takes the server's requests, so none is left behind).
func (t *pendingTable) add(f *forwarded) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-f.server.down:
		return false
	default:
	}
	t.byChild[f.childID] = f
	if f.up {
		t.byUp[f.upID] = f
	}
	if f.token != "" {
		t.byToken[f.token] = f
	}
	return true
}

func (t *pendingTable) removeLocked(f *forwarded) {
	delete(t.byChild, f.childID)
	if f.up && t.byUp[f.upID] == f {
		delete(t.byUp, f.upID)
	}
	if f.token != "" && t.byToken[f.token] == f {
		delete(t.byToken, f.token)
	}
}

// takeChild removes and returns the request s was sent as childID; nil when there is none. A
// child's answer only ever completes a request sent to that child: an ID made up or copied by
// another child matches nothing.
func (t *pendingTable) takeChild(s *server, childID string) *forwarded {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.byChild[childID]
	if f == nil || f.server != s {
		return nil
	}
	t.removeLocked(f)
	return f
}

func (t *pendingTable) takeUp(id jsonrpc.ID) *forwarded {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.byUp[id]
	if f != nil {
		t.removeLocked(f)
	}
	return f
}

// tokenOwner reports whether token belongs to a request in flight to s.
func (t *pendingTable) tokenOwner(s *server, token string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.byToken[token]
	return f != nil && f.server == s
}

// takeServer removes and returns the requests in flight to s.
func (t *pendingTable) takeServer(s *server) []*forwarded {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*forwarded
	for _, f := range t.byChild {
		if f.server == s {
			out = append(out, f)
			t.removeLocked(f)
		}
	}
	return out
}

// interceptClient takes the client's messages that the aggregator handles itself, once the
// client has sent initialize; it declines (false) what the SDK's session handles: the
// handshake, ping, requests before initialize (which the SDK refuses), unknown methods.
func (a *Aggregator) interceptClient(msg jsonrpc.Message) bool {
	switch m := msg.(type) {
	case *jsonrpc.Response:
		return a.reverseAnswer(m)
	case *jsonrpc.Request:
		if m.Method == "initialize" {
			a.clientInitialize(m)
			return false
		}
		if !a.started.Load() {
			return false
		}
		if !m.IsCall() {
			switch m.Method {
			case "notifications/cancelled":
				return a.forwardCancel(m)
			case "notifications/progress":
				return a.reverseProgress(m)
			case "notifications/roots/list_changed":
				a.broadcast(m)
				return true
			}
			return false
		}
		switch m.Method {
		case "tools/call":
			a.callNamed(m, kindTools)
		case "prompts/get":
			a.callNamed(m, kindPrompts)
		case "resources/read", "resources/subscribe", "resources/unsubscribe":
			a.callResource(m)
		case "completion/complete":
			a.complete(m)
		case "logging/setLevel":
			a.setLevel(m)
		case "tools/list", "prompts/list", "resources/list", "resources/templates/list":
			a.answerList(m)
		case "tasks/get", "tasks/result", "tasks/cancel":
			a.callTask(m)
		case "tasks/list":
			a.listTasks(m)
		default:
			return false
		}
		return true
	}
	return false
}

// params scans the params of a request for the members the aggregator reads: key (the name
// or URI) and _meta. It reports false when params is not an object.
func scanParams(params json.RawMessage, key string) (keyStart, keyEnd, metaStart, metaEnd int, ok bool) {
	keyStart, metaStart = -1, -1
	ok = len(params) > 0 && rawjson.Object(params, func(k []byte, start, end int) bool {
		switch string(k) {
		case key:
			keyStart, keyEnd = start, end
		case "_meta":
			metaStart, metaEnd = start, end
		}
		return true
	})
	return
}

// decodeString returns the JSON string v: without allocating in the common case.
func decodeString(v []byte) (string, bool) {
	if s, ok := rawjson.String(v); ok {
		return string(s), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// progressToken returns the key of the progress token in a request's _meta; "" when none.
func progressToken(meta []byte) string {
	if len(meta) == 0 {
		return ""
	}
	start, end, ok := rawjson.Member(meta, "progressToken")
	if !ok {
		return ""
	}
	return tokenKey(meta[start:end])
}

// tokenKey is the identity of a progress token (a string or a number) however it is written:
// the child may encode the client's token differently when it echoes it.
func tokenKey(v []byte) string {
	if len(v) == 0 {
		return ""
	}
	if v[0] == '"' {
		if s, ok := decodeString(v); ok {
			return "s" + s
		}
		return ""
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return ""
	}
	return "n" + strconv.FormatFloat(f, 'g', -1, 64)
}

// callNamed forwards tools/call or prompts/get to the owner of the named tool or prompt, with
// the name the child knows it by.
func (a *Aggregator) callNamed(req *jsonrpc.Request, k kind) {
	what, doing := "tool", "calling tool %q"
	if k == kindPrompts {
		what, doing = "prompt", "getting prompt %q"
	}
	ns, ne, ms, me, ok := scanParams(req.Params, "name")
	if !ok || ns < 0 {
		a.answerError(req.ID, jsonrpc.CodeInvalidParams, fmt.Sprintf("%s needs params with the %s's name", req.Method, what))
		return
	}
	cat := a.catalog.Load()
	byName := cat.tools
	if k == kindPrompts {
		byName = cat.prompts
	}
	var e entry
	var name string
	if raw, plain := rawjson.String(req.Params[ns:ne]); plain {
		e, ok = byName[string(raw)] // no allocation on the hot path
		if !ok {
			name = string(raw)
		}
	} else if name, ok = decodeString(req.Params[ns:ne]); ok {
		e, ok = byName[name]
	} else {
		a.answerError(req.ID, jsonrpc.CodeInvalidParams, fmt.Sprintf("the %s name is not a string: %.80s", what, req.Params[ns:ne]))
		return
	}
	if !ok {
		a.answerError(req.ID, jsonrpc.CodeInvalidParams, fmt.Sprintf("Unknown %s: %s", what, name))
		return
	}
	var token string
	if ms >= 0 {
		token = progressToken(req.Params[ms:me])
	}
	// A call that asks for a task is answered with the task: its owner is noted then. The
	// extra scan is made only when some server offers tasks.
	task := k == kindTools && a.tasksCaps != nil && hasMember(req.Params, "task")
	a.forward(req, &forwarded{server: e.server, doing: doing, subject: e.original, token: token, label: what, value: e.exposed, task: task},
		req.Params[:ns], e.quoted, req.Params[ne:])
}

// callResource forwards resources/read, subscribe and unsubscribe to the owner of the URI.
func (a *Aggregator) callResource(req *jsonrpc.Request) {
	uri, token, ok := a.stringParam(req, "uri")
	if !ok {
		return
	}
	s, why := a.catalog.Load().resourceOwner(uri)
	if s == nil {
		a.answerResourceNotFound(req.ID, uri, why)
		return
	}
	a.forward(req, &forwarded{server: s, doing: req.Method + " of %q", subject: uri, token: token, label: "uri", value: uri}, req.Params)
}

// stringParam reads the string member key of a request's params, and the key of the progress
// token in its _meta; when the member is missing or not a string, it answers the request with
// an error and reports false.
func (a *Aggregator) stringParam(req *jsonrpc.Request, key string) (value, token string, ok bool) {
	vs, ve, ms, me, ok := scanParams(req.Params, key)
	if !ok || vs < 0 {
		a.answerError(req.ID, jsonrpc.CodeInvalidParams, req.Method+" needs params with a "+key)
		return "", "", false
	}
	if value, ok = decodeString(req.Params[vs:ve]); !ok {
		a.answerError(req.ID, jsonrpc.CodeInvalidParams, fmt.Sprintf("the %s is not a string: %.80s", key, req.Params[vs:ve]))
		return "", "", false
	}
	if ms >= 0 {
		token = progressToken(req.Params[ms:me])
	}
	return value, token, true
}

// answerResourceNotFound answers with the error the specification gives for an unknown
// resource (-32002, with the URI in data), saying why no server was chosen.
func (a *Aggregator) answerResourceNotFound(id jsonrpc.ID, uri, why string) {
	data, _ := json.Marshal(map[string]string{"uri": uri})
	errObj, _ := json.Marshal(&jsonrpc.Error{Code: codeResourceNotFound, Message: fmt.Sprintf("Resource not found: %s: %s", uri, why), Data: data})
	a.writeAnswer(id, nil, errObj)
}

// codeResourceNotFound is the MCP error code for a resource that does not exist.
const codeResourceNotFound = -32002

// complete forwards completion/complete to the owner of the prompt (renamed) or of the
// resource template.
func (a *Aggregator) complete(req *jsonrpc.Request) {
	rs, re, ms, me, ok := scanParams(req.Params, "ref")
	if !ok || rs < 0 {
		a.answerError(req.ID, jsonrpc.CodeInvalidParams, "completion/complete needs params with a ref")
		return
	}
	ref := req.Params[rs:re]
	typ, _ := stringMember(ref, "type")
	var token string
	if ms >= 0 {
		token = progressToken(req.Params[ms:me])
	}
	cat := a.catalog.Load()
	switch typ {
	case "ref/prompt":
		ns, ne, err := memberValue(ref, "name")
		name, ok := "", false
		if err == nil {
			name, ok = decodeString(ref[ns:ne])
		}
		if !ok {
			a.answerError(req.ID, jsonrpc.CodeInvalidParams, "completion/complete: the ref has no prompt name")
			return
		}
		e, found := cat.prompts[name]
		if !found {
			a.answerError(req.ID, jsonrpc.CodeInvalidParams, "Unknown prompt: "+name)
			return
		}
		a.forward(req, &forwarded{server: e.server, doing: "completing prompt %q", subject: e.original, token: token, label: "prompt", value: name},
			req.Params[:rs], ref[:ns], e.quoted, ref[ne:], req.Params[re:])
	case "ref/resource":
		uri, err := stringMember(ref, "uri")
		if err != nil {
			a.answerError(req.ID, jsonrpc.CodeInvalidParams, "completion/complete: the ref has no uri")
			return
		}
		s, why := cat.templateOwner[uri], ""
		if s == nil {
			s, why = cat.resourceOwner(uri)
		}
		if s == nil {
			a.answerResourceNotFound(req.ID, uri, why)
			return
		}
		a.forward(req, &forwarded{server: s, doing: "completing %q", subject: uri, token: token, label: "uri", value: uri}, req.Params)
	default:
		a.answerError(req.ID, jsonrpc.CodeInvalidParams, fmt.Sprintf("completion/complete: unknown ref type %q", typ))
	}
}

// forward sends the client's request req to f.server with the given params (in parts), under
// a new ID, and arranges for the answer to reach the client.
func (a *Aggregator) forward(req *jsonrpc.Request, f *forwarded, params ...[]byte) {
	f.upID, f.up, f.method = req.ID, true, req.Method
	if a.debug {
		f.start = time.Now()
		f.args = len(req.Params)
		if s, e, err := memberValue(req.Params, "arguments"); err == nil {
			f.args = e - s
		}
	}
	a.send(f, params...)
}

// send writes the request f to its child with a new ID.
func (a *Aggregator) send(f *forwarded, params ...[]byte) {
	f.childID = fastPrefix + strconv.FormatUint(a.pending.seq.Add(1), 10)
	if !a.pending.add(f) {
		// Gone between the catalog snapshot and now.
		a.answerDown(f, f.server.why)
		return
	}
	parts := make([][]byte, 0, len(params)+2)
	parts = append(parts, []byte(`{"jsonrpc":"2.0","id":"`+f.childID+`","method":"`+f.method+`","params":`))
	parts = append(parts, params...)
	parts = append(parts, []byte("}\n"))
	// Send does not keep the client's reader waiting for a child that does not read its stdin.
	f.server.conn.Send(func(err error) {
		if a.pending.takeChild(f.server, f.childID) != nil {
			a.answerDown(f, "cannot be written to ("+err.Error()+")")
		}
	}, parts...)
}

// forwardCancel passes the client's cancellation of a forwarded request to the child.
func (a *Aggregator) forwardCancel(req *jsonrpc.Request) bool {
	id, reason, ok := parseCancel(req.Params)
	if !ok {
		return false
	}
	f := a.pending.takeUp(id)
	if f == nil {
		return false // not ours: the SDK cancels its own requests
	}
	f.server.conn.Send(nil, cancelNotification(f.childID, reason)...)
	return true
}

// parseCancel reads the params of notifications/cancelled.
func parseCancel(params json.RawMessage) (id jsonrpc.ID, reason string, ok bool) {
	var p struct {
		RequestID any    `json:"requestId"`
		Reason    string `json:"reason,omitempty"`
	}
	if json.Unmarshal(params, &p) != nil {
		return id, "", false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	return id, p.Reason, err == nil
}

// cancelNotification is notifications/cancelled for the request id (one of the aggregator's).
func cancelNotification(id, reason string) [][]byte {
	params, _ := json.Marshal(struct {
		RequestID string `json:"requestId"`
		Reason    string `json:"reason,omitempty"`
	}{id, reason})
	return notification("notifications/cancelled", params)
}

// childAnswer takes a child's answer to a forwarded request and sends it to the client.
func (a *Aggregator) childAnswer(s *server, resp *jsonrpc.Response) bool {
	childID, ok := resp.ID.Raw().(string)
	if !ok || !strings.HasPrefix(childID, fastPrefix) {
		return false
	}
	f := a.pending.takeChild(s, childID)
	if f == nil {
		return true // cancelled, or answered twice: nobody waits for it
	}
	var errObj json.RawMessage
	if resp.Error != nil {
		var err error
		if errObj, err = json.Marshal(resp.Error); err != nil {
			errObj = []byte(`{"code":-32603,"message":"the server's error could not be encoded"}`)
		}
	}
	if f.task && resp.Error == nil {
		a.noteCreatedTask(s, resp.Result)
	}
	if f.done != nil {
		f.done(resp.Result, errObj)
	} else {
		a.writeAnswer(f.upID, resp.Result, errObj)
	}
	if len(resp.Result) >= bigAnswer {
		// The answer is garbage now. Left to the pacer, the next big answer is allocated
		// before this one is collected, and the peak memory doubles; a collection alone
		// (runtime.GC) still left the freed line resident, and the next one, which did not fit
		// among the freed read chunks, was placed beside it: the peak was 3.1x or 4.1x the
		// payload by run. Returning the free memory to the OS as well makes it 3.0x every
		// run, for about a millisecond per big answer (BENCHMARKS.md).
		debug.FreeOSMemory()
	}
	if a.debug && f.up {
		a.log.Debug(f.method, f.label, f.value, "server", s.key, "duration", time.Since(f.start).Round(time.Microsecond),
			"args_bytes", f.args, "result_bytes", len(resp.Result), "error", string(errObj))
	}
	return true
}

// failPending answers the forwarded requests in flight to a server that went down.
func (a *Aggregator) failPending(s *server, why string) {
	for _, f := range a.pending.takeServer(s) {
		a.answerDown(f, why)
	}
}

func (a *Aggregator) answerDown(f *forwarded, why string) {
	errObj, _ := json.Marshal(&jsonrpc.Error{
		Code:    jsonrpc.CodeInternalError,
		Message: fmt.Sprintf("server %q %s while %s; its tools, prompts and resources are no longer available", f.server.key, why, fmt.Sprintf(f.doing, f.subject)),
	})
	if f.done != nil {
		f.done(nil, errObj)
		return
	}
	a.writeAnswer(f.upID, nil, errObj)
}

// writeAnswer writes the answer to the client's request id.
func (a *Aggregator) writeAnswer(id jsonrpc.ID, result, errObj json.RawMessage) {
	if err := a.up.WriteResponse(id, result, errObj); err != nil {
		a.log.Debug("writing an answer to the client", "error", err)
	}
}

// answerError answers the client's request id with a JSON-RPC error of the aggregator's own.
func (a *Aggregator) answerError(id jsonrpc.ID, code int64, msg string) {
	errObj, _ := json.Marshal(&jsonrpc.Error{Code: code, Message: msg})
	a.writeAnswer(id, nil, errObj)
}

// answerList answers a list request from the catalog: the whole list is one page.
func (a *Aggregator) answerList(req *jsonrpc.Request) {
	k := kindTools
	for i := range numKinds {
		if kinds[i].method == req.Method {
			k = i
		}
	}
	if !a.advertises(k) {
		a.answerError(req.ID, jsonrpc.CodeMethodNotFound, "Method not found: no server offers "+kinds[k].field)
		return
	}
	if !a.checkNoCursor(req) {
		return
	}
	a.writeAnswer(req.ID, a.catalog.Load().lists[k], nil)
}

// checkNoCursor answers a list request whose params are not an object or carry a cursor with
// an error, and reports whether the request is fine: the aggregator's lists are always one
// page, so it never handed out a cursor.
func (a *Aggregator) checkNoCursor(req *jsonrpc.Request) bool {
	p := req.Params
	if len(p) == 0 || string(p) == "null" {
		return true
	}
	cs, ce, _, _, ok := scanParams(p, "cursor")
	if !ok {
		a.answerError(req.ID, jsonrpc.CodeInvalidParams, fmt.Sprintf("%s: params must be an object", req.Method))
		return false
	}
	if cs >= 0 {
		cursor, ok := decodeString(p[cs:ce])
		if !ok {
			a.answerError(req.ID, jsonrpc.CodeInvalidParams, fmt.Sprintf("%s: the cursor must be a string, not %.80s", req.Method, p[cs:ce]))
			return false
		}
		if cursor != "" {
			a.answerError(req.ID, jsonrpc.CodeInvalidParams, fmt.Sprintf("invalid cursor %q", cursor))
			return false
		}
	}
	return true
}

// setLevel passes logging/setLevel to every server that offers logging and answers once all
// of them have: with the empty result when any accepted it, else with the first error.
func (a *Aggregator) setLevel(req *jsonrpc.Request) {
	var targets []*server
	for _, s := range a.catalog.Load().servers {
		if s.caps.Logging != nil {
			targets = append(targets, s)
		}
	}
	if len(targets) == 0 {
		a.answerError(req.ID, jsonrpc.CodeMethodNotFound, "Method not found: no server offers logging")
		return
	}
	var mu sync.Mutex
	left, accepted := len(targets), false
	var firstErr json.RawMessage
	for _, s := range targets {
		f := &forwarded{server: s, method: req.Method, doing: "setting the log level to %s", subject: string(req.Params)}
		f.done = func(_, errObj json.RawMessage) {
			mu.Lock()
			defer mu.Unlock()
			if errObj == nil {
				accepted = true
			} else if firstErr == nil {
				firstErr = errObj
			}
			if left--; left == 0 {
				if accepted {
					a.writeAnswer(req.ID, json.RawMessage(`{}`), nil)
				} else {
					a.writeAnswer(req.ID, nil, firstErr)
				}
			}
		}
		params := req.Params
		if len(params) == 0 {
			params = json.RawMessage(`{}`)
		}
		a.send(f, params)
	}
}

// broadcast sends the client's notification to every server that is up.
func (a *Aggregator) broadcast(req *jsonrpc.Request) {
	for _, s := range a.catalog.Load().servers {
		s.conn.Send(nil, notification(req.Method, req.Params)...)
	}
}

// notification returns the parts of a notification with raw params (none when empty).
func notification(method string, params json.RawMessage) [][]byte {
	if len(params) == 0 {
		return [][]byte{[]byte(`{"jsonrpc":"2.0","method":` + strconv.Quote(method) + "}\n")}
	}
	return [][]byte{[]byte(`{"jsonrpc":"2.0","method":` + strconv.Quote(method) + `,"params":`), params, []byte("}\n")}
}
