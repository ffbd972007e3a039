package aggregator

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// A child's requests to the client (sampling/createMessage, elicitation/create, roots/list)
// go to the client under an ID of the aggregator's, and the client's answer goes back to that
// child under the child's ID, both as raw JSON-RPC. The children were told the client side
// can do all three; when the real client did not declare the capability, the child gets a
// JSON-RPC error instead. Requests that arrive before the client is initialized wait for it.

// reversePrefix starts the IDs of the children's requests as the client sees them.
const reversePrefix = "agg-r-"

// reverseTokenPrefix starts the progress tokens the aggregator gives a child's request when
// another child's request waiting at the client already uses the child's token.
const reverseTokenPrefix = "agg-p-"

// clientCapability is the capability a client must declare for each request of a child.
var clientCapability = map[string]string{
	"sampling/createMessage": "sampling",
	"elicitation/create":     "elicitation",
	"roots/list":             "roots",
}

// reverseCall is a child's request waiting for the client's answer.
type reverseCall struct {
	server  *server
	childID jsonrpc.ID
	upID    string
	token   string // the key of the progress token as the client sees it; "" when none
	// childToken is the child's own progress token, when the client was given another one
	// (two children used the same token at once); nil when the token passes unchanged.
	childToken []byte
}

type reverseTable struct {
	seq     uint64
	mu      sync.Mutex
	byUp    map[string]*reverseCall
	byToken map[string]*reverseCall
	waiting []reverseWait // requests that arrived before the client was initialized
}

type reverseWait struct {
	server *server
	req    *jsonrpc.Request
}

func newReverseTable() *reverseTable {
	return &reverseTable{byUp: map[string]*reverseCall{}, byToken: map[string]*reverseCall{}}
}

func (t *reverseTable) removeLocked(c *reverseCall) {
	delete(t.byUp, c.upID)
	if c.token != "" && t.byToken[c.token] == c {
		delete(t.byToken, c.token)
	}
}

// clientInitialize notes the capabilities the client declares, and that the session has
// begun: from now on the aggregator takes the requests it handles (the SDK refuses requests
// before initialize).
func (a *Aggregator) clientInitialize(req *jsonrpc.Request) {
	caps := map[string]json.RawMessage{}
	var p struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
		ClientInfo      struct {
			Name string `json:"name"`
		} `json:"clientInfo"`
	}
	if json.Unmarshal(req.Params, &p) == nil && p.Capabilities != nil {
		caps = p.Capabilities
	}
	a.reverse.mu.Lock()
	a.clientCaps, a.clientName = caps, p.ClientInfo.Name
	a.reverse.mu.Unlock()
	// The version the session will speak: the client's when the aggregator supports it (the
	// SDK then agrees to it), else the latest.
	version := p.ProtocolVersion
	if !slices.Contains(protocolVersions, version) {
		version = protocolVersions[0]
	}
	a.version.Store(&version)
	id := req.ID
	a.initID.Store(&id)
	a.started.Store(true)
}

// clientReady sends the children's requests that waited for the client to be initialized.
func (a *Aggregator) clientReady() {
	a.reverse.mu.Lock()
	waiting := a.reverse.waiting
	a.reverse.waiting = nil
	a.reverse.mu.Unlock()
	for _, w := range waiting {
		a.reverseRequest(w.server, w.req)
	}
}

// reverseRequest sends a child's request to the client, or answers the child with an error
// when the client cannot take it.
func (a *Aggregator) reverseRequest(s *server, req *jsonrpc.Request) {
	capability := clientCapability[req.Method]
	t := a.reverse
	t.mu.Lock()
	if !a.ready.Load() {
		t.waiting = append(t.waiting, reverseWait{s, req})
		t.mu.Unlock()
		return
	}
	declared, ok := a.clientCaps[capability]
	if !ok {
		name := a.clientLabel()
		t.mu.Unlock()
		a.answerChildError(s, req.ID, jsonrpc.CodeMethodNotFound,
			fmt.Sprintf("Method not found: %s does not support %s (it did not declare the %q capability); the request came through mcp-simple-aggregator", name, req.Method, capability))
		return
	}
	if req.Method == "elicitation/create" && urlMode(req.Params) && !hasMember(declared, "url") {
		// The children were told the client does URL elicitation too; this one does only forms.
		name := a.clientLabel()
		t.mu.Unlock()
		a.answerChildError(s, req.ID, jsonrpc.CodeInvalidParams,
			fmt.Sprintf("Invalid params: %s does not support URL elicitation (its \"elicitation\" capability has no \"url\"); the request came through mcp-simple-aggregator", name))
		return
	}
	t.seq++
	c := &reverseCall{server: s, childID: req.ID, upID: reversePrefix + strconv.FormatUint(t.seq, 10)}
	params := req.Params
	if ms, me, ok := rawjson.Member(params, "_meta"); ok {
		if ts, te, ok := rawjson.Member(params[ms:me], "progressToken"); ok {
			ts, te = ms+ts, ms+te
			c.token = tokenKey(params[ts:te])
			if c.token != "" && t.byToken[c.token] != nil {
				// Another child's request waits with the same token: the client gets a token of
				// the aggregator's, and the child its own back on every progress notification.
				up := strconv.Quote(reverseTokenPrefix + strconv.FormatUint(t.seq, 10))
				c.childToken = slices.Clone(params[ts:te])
				c.token = tokenKey([]byte(up))
				params = slices.Concat(params[:ts], []byte(up), params[te:])
			}
		}
	}
	t.byUp[c.upID] = c
	if c.token != "" {
		t.byToken[c.token] = c
	}
	t.mu.Unlock()
	head := []byte(`{"jsonrpc":"2.0","id":"` + c.upID + `","method":` + strconv.Quote(req.Method))
	if len(params) == 0 {
		a.toClient(head, []byte("}\n"))
		return
	}
	a.toClient(head, []byte(`,"params":`), params, []byte("}\n"))
}

// clientLabel names the client in messages; call it with a.reverse.mu held.
func (a *Aggregator) clientLabel() string {
	if a.clientName == "" {
		return "the client"
	}
	return fmt.Sprintf("the client (%s)", a.clientName)
}

// urlMode reports whether the params of elicitation/create ask for URL mode.
func urlMode(params json.RawMessage) bool {
	start, end, ok := rawjson.Member(params, "mode")
	if !ok {
		return false
	}
	mode, ok := decodeString(params[start:end])
	return ok && mode == "url"
}

// hasMember reports whether the JSON object obj has the member key.
func hasMember(obj json.RawMessage, key string) bool {
	_, _, ok := rawjson.Member(obj, key)
	return ok
}

// reverseAnswer takes the client's answer to a child's request and sends it to the child.
func (a *Aggregator) reverseAnswer(resp *jsonrpc.Response) bool {
	upID, ok := resp.ID.Raw().(string)
	if !ok || !strings.HasPrefix(upID, reversePrefix) {
		return false
	}
	t := a.reverse
	t.mu.Lock()
	c := t.byUp[upID]
	if c != nil {
		t.removeLocked(c)
	}
	t.mu.Unlock()
	if c == nil {
		return true // cancelled by the child, or its server went down
	}
	id, err := json.Marshal(c.childID.Raw())
	if err != nil {
		return true
	}
	if resp.Error != nil {
		errObj, err := json.Marshal(resp.Error)
		if err != nil {
			errObj = []byte(`{"code":-32603,"message":"the client's error could not be encoded"}`)
		}
		c.server.conn.Send(nil, []byte(`{"jsonrpc":"2.0","id":`), id, []byte(`,"error":`), errObj, []byte("}\n"))
		return true
	}
	result := resp.Result
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	c.server.conn.Send(nil, []byte(`{"jsonrpc":"2.0","id":`), id, []byte(`,"result":`), result, []byte("}\n"))
	return true
}

// reverseCancelled passes a child's cancellation of its request to the client.
func (a *Aggregator) reverseCancelled(s *server, m *jsonrpc.Request) bool {
	id, reason, ok := parseCancel(m.Params)
	if !ok {
		return false
	}
	t := a.reverse
	t.mu.Lock()
	var found *reverseCall
	for _, c := range t.byUp {
		if c.server == s && c.childID == id {
			found = c
			break
		}
	}
	if found != nil {
		t.removeLocked(found)
	} else {
		// Still waiting for the client to be initialized: it never sees the request.
		for i, w := range t.waiting {
			if w.server == s && w.req.ID == id {
				t.waiting = append(t.waiting[:i], t.waiting[i+1:]...)
				break
			}
		}
	}
	t.mu.Unlock()
	if found != nil {
		a.cancelUpstream(found, reason)
	}
	return true
}

// cancelUpstream tells the client that a child's request it was sent is cancelled.
func (a *Aggregator) cancelUpstream(c *reverseCall, reason string) {
	a.toClient(cancelNotification(c.upID, reason)...)
}

// reverseProgress passes the client's progress notification for a child's request to that
// child, with the child's own token.
func (a *Aggregator) reverseProgress(m *jsonrpc.Request) bool {
	start, end, ok := rawjson.Member(m.Params, "progressToken")
	if !ok {
		return false
	}
	key := tokenKey(m.Params[start:end])
	a.reverse.mu.Lock()
	c := a.reverse.byToken[key]
	a.reverse.mu.Unlock()
	if c == nil {
		return false
	}
	params := m.Params
	if c.childToken != nil {
		params = slices.Concat(params[:start], c.childToken, params[end:])
	}
	c.server.conn.Send(nil, notification(m.Method, params)...)
	return true
}

// cancelReverse cancels the requests of a server that went down, at the client.
func (a *Aggregator) cancelReverse(s *server, why string) {
	t := a.reverse
	t.mu.Lock()
	var gone []*reverseCall
	for _, c := range t.byUp {
		if c.server == s {
			gone = append(gone, c)
			t.removeLocked(c)
		}
	}
	kept := t.waiting[:0]
	for _, w := range t.waiting {
		if w.server != s {
			kept = append(kept, w)
		}
	}
	t.waiting = kept
	t.mu.Unlock()
	for _, c := range gone {
		a.cancelUpstream(c, fmt.Sprintf("server %q %s", s.key, why))
	}
}

// answerChildError answers a child's request with an error of the aggregator's own.
func (a *Aggregator) answerChildError(s *server, id jsonrpc.ID, code int64, msg string) {
	idJSON, err := json.Marshal(id.Raw())
	if err != nil {
		return
	}
	errObj, _ := json.Marshal(&jsonrpc.Error{Code: code, Message: msg})
	s.conn.Send(nil, []byte(`{"jsonrpc":"2.0","id":`), idJSON, []byte(`,"error":`), errObj, []byte("}\n"))
}
