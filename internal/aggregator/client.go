package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// What arrives from the client: one goroutine (readClient) reads its stdin and decides each
// message here.
//
//	before the initialize answer   initialize: to the SDK's session, and nothing more is read
//	                               until it is answered; anything else: to the SDK's session,
//	                               which refuses requests before initialize
//	a request (clientRequests)     routed by name, URI or task, fanned out, or answered from
//	                               the catalog (handlers.go)
//	a notification                 clientNotifications
//	an answer                      to the server's request in flight with its ID
//	anything else                  the SDK's session: the handshake, ping, unknown methods
//	a line that is not a message   a JSON-RPC error, and the session goes on

// clientRequests are the client's requests the aggregator handles itself; the list methods
// are added from the list kinds (catalog.go). Filled in init: a request held during a reload is
// dispatched again through it.
var clientRequests map[string]func(a *Aggregator, req *jsonrpc.Request)

func init() {
	clientRequests = map[string]func(a *Aggregator, req *jsonrpc.Request){
		"tools/call":            func(a *Aggregator, req *jsonrpc.Request) { a.callNamed(req, kindTools) },
		"prompts/get":           func(a *Aggregator, req *jsonrpc.Request) { a.callNamed(req, kindPrompts) },
		"resources/read":        (*Aggregator).callResource,
		"resources/subscribe":   (*Aggregator).callResource,
		"resources/unsubscribe": (*Aggregator).callResource,
		"completion/complete":   (*Aggregator).callCompletion,
		"logging/setLevel":      (*Aggregator).setLevel,
		"tasks/get":             (*Aggregator).callTask,
		"tasks/result":          (*Aggregator).callTask,
		"tasks/cancel":          (*Aggregator).callTask,
		"tasks/list":            (*Aggregator).listTasks,
	}
	for k := range numKinds {
		clientRequests[kinds[k].method] = (*Aggregator).answerList
	}
}

// clientNotifications handle the client's notifications; a handler that returns false passes
// the notification on to the SDK's session.
var clientNotifications = map[string]func(a *Aggregator, m *jsonrpc.Request) bool{
	"notifications/initialized":        (*Aggregator).clientReady,
	"notifications/cancelled":          (*Aggregator).clientCancelled,
	"notifications/progress":           (*Aggregator).clientProgress,
	"notifications/roots/list_changed": (*Aggregator).broadcast,
}

// clientSession is what the client said in initialize. It is set once, when the answer to
// initialize is written, and never changes.
type clientSession struct {
	version string                     // the protocol version of the session
	caps    map[string]json.RawMessage // the client's capabilities, raw
	info    json.RawMessage            // clientInfo, as the client sent it
	name    string                     // clientInfo.name
	// clientVersion is clientInfo.version, for the debug log.
	clientVersion string
}

// label names the client in messages.
func (cs *clientSession) label() string {
	if cs.name == "" {
		return "the client"
	}
	return fmt.Sprintf("the client (%s)", cs.name)
}

// protocolVersions are the versions the aggregator speaks with its client, latest first.
var protocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// batches reports whether the client may send JSON-RPC batches: in protocol versions before
// 2025-06-18, which removed them (2025-03-26 requires receiving them), once initialized.
func (a *Aggregator) batches() bool {
	cs := a.session.Load()
	return cs != nil && cs.version < "2025-06-18"
}

// readClient reads the client's messages until its stdin ends.
func (a *Aggregator) readClient() {
	defer a.sdk.endInput()
	for {
		msg, err := a.client.Read()
		var bad *stdio.BadLineError
		if errors.As(err, &bad) {
			a.badClientLine(bad)
			continue
		}
		if err != nil {
			return
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			a.clientAnswer(m)
		case *jsonrpc.Request:
			a.clientRequest(m)
			if a.startErr != nil {
				return // no server could start: the session ends
			}
		}
	}
}

func (a *Aggregator) clientRequest(m *jsonrpc.Request) {
	if a.session.Load() == nil {
		if m.Method == "initialize" && m.IsCall() {
			a.initialize(m)
			return
		}
		a.sdk.deliver(m)
		return
	}
	if m.IsCall() {
		if h := clientRequests[m.Method]; h != nil {
			h(a, m)
			return
		}
	} else if h := clientNotifications[m.Method]; h != nil && h(a, m) {
		return
	}
	a.sdk.deliver(m)
}

// initialize hands the client's initialize to the SDK's session and waits until it is
// answered: requests the client sends right behind it (pipelined) are answered after it.
func (a *Aggregator) initialize(m *jsonrpc.Request) {
	var p struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
		ClientInfo   json.RawMessage            `json:"clientInfo"`
	}
	_ = json.Unmarshal(m.Params, &p) // the SDK answers malformed params
	if p.Capabilities == nil {
		p.Capabilities = map[string]json.RawMessage{}
	}
	var info struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	_ = json.Unmarshal(p.ClientInfo, &info)
	a.initializing = &clientSession{caps: p.Capabilities, info: p.ClientInfo, name: info.Name, clientVersion: info.Version}
	answered := a.sdk.await(m.ID)
	a.sdk.deliver(m)
	<-answered
}

// initializeMiddleware completes the SDK's answer to initialize: the servers are initialized
// now, with what the client said of itself (startup), and the answer carries the union of
// their capabilities (with tasks, which the SDK's types cannot carry) and their combined
// instructions. Then the client's session is published.
func (a *Aggregator) initializeMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "initialize" {
			return next(ctx, method, req)
		}
		res, err := next(ctx, method, req)
		ir, ok := res.(*mcp.InitializeResult)
		if err != nil || !ok || a.initializing == nil {
			return res, err
		}
		cs := a.initializing
		cs.version = ir.ProtocolVersion
		a.log.Debug("client initialized", "client", cs.name, "version", cs.clientVersion, "protocol", cs.version)
		instructions, err := a.startup(context.Background(), cs)
		if err != nil {
			a.startErr = err
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error: " + err.Error()}
		}
		ir.Instructions = instructions
		return &rawResult{raw: a.initializeResult(ir)}, nil
	}
}

// initializeResult is the aggregator's answer to initialize.
func (a *Aggregator) initializeResult(ir *mcp.InitializeResult) json.RawMessage {
	return marshal(struct {
		Capabilities    json.RawMessage     `json:"capabilities"`
		ProtocolVersion string              `json:"protocolVersion"`
		ServerInfo      *mcp.Implementation `json:"serverInfo"`
		Instructions    string              `json:"instructions,omitempty"`
	}{a.caps, ir.ProtocolVersion, ir.ServerInfo, ir.Instructions})
}

// rawResult is a result the SDK writes as it is.
type rawResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (r *rawResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// clientReady flushes what waited for the client once it says it is initialized, and warns
// when it is a client known to reject some of the tool names. The SDK's session sees the
// notification too.
func (a *Aggregator) clientReady(*jsonrpc.Request) bool {
	if a.queue.isReady() {
		return false
	}
	dropped := a.queue.flush(a.writeQueued)
	if dropped > 0 {
		a.log.Warn(droppedWarning(dropped))
	}
	cs := a.session.Load()
	if client := strictClient(cs.name); client != "" {
		if bad := a.catalog.Load().rejectedNames(); len(bad) > 0 {
			a.log.Warn(fmt.Sprintf("the client is %s (%q), which rejects %d of the tool names (%s); restart with --separator __ to avoid it",
				client, cs.name, len(bad), quoteList(bad[:min(3, len(bad))])))
		}
	}
	return false
}

// writeQueued writes one message that waited for the client; a server's request is checked
// against the client's capabilities now that they are known.
func (a *Aggregator) writeQueued(it queued) {
	if it.call == nil {
		a.writeClient([][]byte{it.msg})
		return
	}
	c := it.call
	if errObj := a.clientRefuses(c.method, it.msg); errObj != nil {
		if a.inflight.take(c) {
			c.from.conn.Send(nil, response(encodeID(c.fromID), nil, errObj)...)
		}
		return
	}
	if a.inflight.deliver(c) {
		a.writeClient(request(c.toID, c.method, it.msg))
	}
}

// strictClient names the client when it is one known to accept only tool names of letters,
// digits, _ and - (see the README's table of clients).
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

// badClientLine answers a line from the client that is not a JSON-RPC message with the
// JSON-RPC error for it, and the session goes on.
func (a *Aggregator) badClientLine(bad *stdio.BadLineError) {
	line := bad.Line
	code, msg := jsonrpc.CodeInvalidRequest, "Invalid Request: "+bad.Err.Error()
	id := json.RawMessage("null")
	switch {
	case errors.Is(bad, stdio.ErrTooLarge):
		msg = fmt.Sprintf("Invalid Request: message larger than %d bytes (see --max-message-size)", a.opts.MaxMessageSize)
		if pid, ok := stdio.TooLargeID(bad); ok {
			id = encodeID(pid)
		}
	case !json.Valid(line):
		code, msg = jsonrpc.CodeParseError, "Parse error: the line is not valid JSON"
	case strings.HasPrefix(string(line), "["):
		// Batches are taken apart by the connection when the session allows them.
		if cs := a.session.Load(); cs == nil {
			msg = "Invalid Request: a JSON-RPC batch before initialize (initialize must be sent on its own)"
		} else {
			msg = fmt.Sprintf("Invalid Request: JSON-RPC batches are not part of protocol version %s (they were removed in 2025-06-18)", cs.version)
		}
	default:
		id = stdio.RequestID(line)
	}
	a.log.Warn("answered a malformed message from the client with an error", "code", code, "line", excerpt(line))
	a.writeClient(response(id, nil, rpcError(int64(code), nil, "%s", msg)))
}

// clientAnswer takes the client's answer to a server's request and passes it to that server
// under the server's own ID.
func (a *Aggregator) clientAnswer(resp *jsonrpc.Response) {
	id, _ := resp.ID.Raw().(string)
	c := a.inflight.answered(nil, id)
	if c == nil {
		a.log.Debug("dropped an answer of the client to no request in flight", "id", resp.ID.Raw())
		return
	}
	c.from.conn.Send(nil, response(encodeID(c.fromID), resp.Result, encodeError(resp.Error))...)
}

// clientCancelled passes the client's cancellation of a request to the server it went to,
// under the ID the server saw. A cancellation of no request of ours goes to the SDK's session.
func (a *Aggregator) clientCancelled(m *jsonrpc.Request) bool {
	id, reason, ok := parseCancel(m.Params)
	if !ok {
		return false
	}
	c := a.inflight.cancelled(nil, id)
	if c == nil {
		return false
	}
	c.to.conn.Send(nil, cancelled(c.toID, reason)...)
	return true
}

// clientProgress passes the client's progress notification for a server's request to that
// server, with the server's own token.
func (a *Aggregator) clientProgress(m *jsonrpc.Request) bool {
	start, end, ok := rawjson.Member(m.Params, "progressToken")
	if !ok {
		return false
	}
	c := a.inflight.progress(nil, m.Params[start:end])
	if c == nil {
		return false
	}
	params := m.Params
	if c.fromToken != nil {
		params = rawjson.Replace(params, start, end, c.fromToken)
	}
	c.from.conn.Send(nil, notification(m.Method, params)...)
	return true
}

// broadcast sends the client's notification to every server that is up.
func (a *Aggregator) broadcast(m *jsonrpc.Request) bool {
	for _, s := range a.servingServers() {
		s.conn.Send(nil, notification(m.Method, m.Params)...)
	}
	return true
}

// toClient writes a notification to the client, or queues it until the client is ready.
func (a *Aggregator) toClient(msg [][]byte) {
	if held, _ := a.queue.hold(msg, nil); held {
		return
	}
	a.writeClient(msg)
}

// writeClient writes a message to the client.
func (a *Aggregator) writeClient(msg [][]byte) {
	if err := a.client.WriteParts(msg...); err != nil {
		a.log.Debug("writing to the client", "error", err)
	}
}

// answerClient answers the client's request id.
func (a *Aggregator) answerClient(id jsonrpc.ID, result, errObj json.RawMessage) {
	if err := a.client.WriteResponse(id, result, errObj); err != nil {
		a.log.Debug("writing an answer to the client", "error", err)
	}
}

// toClientRequest sends a server's request to the client under an ID of ours, or answers the
// server with an error when the client cannot take it. Before the client is ready it waits in
// the queue, in the table already (so that its server can cancel it or go down).
func (a *Aggregator) toClientRequest(s *server, m *jsonrpc.Request) {
	c := &call{from: s, fromID: m.ID, to: nil, method: m.Method, doing: m.Method}
	params := m.Params
	var token []byte
	if ms, me, ok := rawjson.Member(params, "_meta"); ok {
		if ts, te, ok := rawjson.Member(params[ms:me], "progressToken"); ok {
			token = params[ms+ts : ms+te]
		}
	}
	if !a.queue.isReady() {
		newToken, res := a.inflight.add(c, token)
		if res != addOK {
			return // its server went down meanwhile: nobody waits for the answer
		}
		params = withToken(params, newToken)
		if held, refused := a.queue.hold([][]byte{params}, c); held {
			if refused && a.inflight.take(c) {
				s.conn.Send(nil, response(encodeID(m.ID), nil, rpcError(jsonrpc.CodeInternalError, nil,
					"Internal error: %s is not connected yet, and too much is waiting for it; the request came through mcp-simple-aggregator", "the client"))...)
			}
			return
		}
		a.writeQueued(queued{msg: params, call: c}) // ready meanwhile
		return
	}
	if errObj := a.clientRefuses(m.Method, params); errObj != nil {
		s.conn.Send(nil, response(encodeID(m.ID), nil, errObj)...)
		return
	}
	c.delivered = true
	newToken, res := a.inflight.add(c, token)
	if res != addOK {
		return // its server went down meanwhile: nobody waits for the answer
	}
	a.writeClient(request(c.toID, c.method, withToken(params, newToken)))
}

// withToken puts the progress token newToken into params' _meta; params unchanged when nil.
func withToken(params, newToken []byte) []byte {
	if newToken == nil {
		return params
	}
	ms, me, _ := rawjson.Member(params, "_meta")
	ts, te, _ := rawjson.Member(params[ms:me], "progressToken")
	return rawjson.Replace(params, ms+ts, ms+te, newToken)
}

// clientRefuses returns the error for a server's request the client cannot take (it did not
// declare the capability); nil when it can.
func (a *Aggregator) clientRefuses(method string, params json.RawMessage) json.RawMessage {
	cs := a.session.Load()
	capability := serverRequests[method]
	declared, ok := cs.caps[capability]
	if !ok {
		return methodNotFound("%s does not support %s (it did not declare the %q capability); the request came through mcp-simple-aggregator", cs.label(), method, capability)
	}
	if method == "elicitation/create" && urlMode(params) && !rawjson.Has(declared, "url") {
		// The servers were told the client does URL elicitation too; this one does only forms.
		return invalidParams("%s does not support URL elicitation (its \"elicitation\" capability has no \"url\"); the request came through mcp-simple-aggregator", cs.label())
	}
	return nil
}

// urlMode reports whether the params of elicitation/create ask for URL mode.
func urlMode(params json.RawMessage) bool {
	mode, ok := rawjson.StringMember(params, "mode")
	return ok && mode == "url"
}

// sdkConn is the mcp.Connection of the SDK's server session: it reads what readClient hands
// it, and writes to the client.
type sdkConn struct {
	client *stdio.Conn
	in     chan jsonrpc.Message
	ended  chan struct{} // closed at the end of the client's input
	closed chan struct{} // closed when the session closes
	once   sync.Once

	mu       sync.Mutex
	awaitID  jsonrpc.ID
	answered chan struct{}
}

func newSDKConn(client *stdio.Conn) *sdkConn {
	return &sdkConn{client: client, in: make(chan jsonrpc.Message, 16), ended: make(chan struct{}), closed: make(chan struct{})}
}

func (c *sdkConn) Connect(context.Context) (mcp.Connection, error) { return c, nil }

// deliver hands a message to the SDK's session.
func (c *sdkConn) deliver(m jsonrpc.Message) {
	select {
	case c.in <- m:
	case <-c.closed:
	}
}

// await returns a channel that is closed once the answer to request id has been written (or
// the session has closed).
func (c *sdkConn) await(id jsonrpc.ID) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.awaitID, c.answered = id, make(chan struct{})
	answered := c.answered
	go func() {
		select {
		case <-answered:
		case <-c.closed:
			c.release(id)
		}
	}()
	return answered
}

func (c *sdkConn) release(id jsonrpc.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answered != nil && c.awaitID == id {
		close(c.answered)
		c.answered = nil
	}
}

// endInput tells the session that the client's input ended.
func (c *sdkConn) endInput() { close(c.ended) }

func (c *sdkConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.in:
		return m, nil
	case <-c.ended:
		select {
		case m := <-c.in:
			return m, nil
		default:
			return nil, io.EOF
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *sdkConn) Write(_ context.Context, m jsonrpc.Message) error {
	err := c.client.Write(m)
	if resp, ok := m.(*jsonrpc.Response); ok {
		c.release(resp.ID)
	}
	return err
}

func (c *sdkConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.client.Close()
}

func (*sdkConn) SessionID() string { return "" }
