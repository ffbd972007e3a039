package aggregator

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// What arrives from the client: one goroutine (readClient) reads its stdin and decides each
// message here.
//
//	before the session        initialize: a legacy session (the SDK's session answers it, and
//	                          nothing more is read until it is answered); server/discover, or
//	                          a request with a modern protocol version in _meta: a modern
//	                          session (startModern); anything else: refused (the SDK's session
//	                          refuses requests before initialize, and takes ping)
//	a request                 the session's side (clientSide.request): routed by name, URI or
//	                          task, fanned out, or answered from the catalog (handlers.go)
//	a notification            the session's side (clientNotifications for a legacy one)
//	an answer                 to the server's request in flight with its ID
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

// clientSession is what the client said of itself: in initialize, or in its first modern
// request. It is set once, when the session begins, and never changes (a client that probes
// and then sends initialize begins a legacy session in its place: legacyAfterModern).
type clientSession struct {
	side    clientSide                 // what the session does in its era (sides.go)
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

// batches reports whether the client may send JSON-RPC batches: in protocol versions before
// 2025-06-18, which removed them (2025-03-26 requires receiving them), once initialized.
func (a *Aggregator) batches() bool {
	cs := a.session.Load()
	return cs != nil && cs.version < "2025-06-18"
}

// readClient reads the client's messages until its stdin ends.
func (a *Aggregator) readClient() {
	defer a.sdk.endInput()
	defer a.client.EndBurst()
	defer a.contain("the reading of the client's messages") // first: before the input ends
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
			if a.panicOn != "" && m.Method == a.panicOn {
				panic("a fault injected for " + m.Method + " (" + faultPanicVar + ")")
			}
			a.clientRequest(m)
			if a.startErr != nil {
				return // no server could start: the session ends
			}
		}
	}
}

func (a *Aggregator) clientRequest(m *jsonrpc.Request) {
	side := a.side()
	if side == nil {
		switch {
		case m.Method == "initialize" && m.IsCall():
			a.initialize(m) // sdk.go
			return
		case m.IsCall() && era.Opens(m.Method, m.Params):
			if !a.startModern(m) {
				return
			}
			side = a.side()
		case m.IsCall() && m.Method != "ping":
			// Neither era's: the modern envelope is missing (the SDK would answer with code 0).
			a.answerClient(m.ID, nil, era.EnvelopeError(era.MetaProtocolVersion, "missing"))
			return
		default:
			a.sdk.deliver(m) // ping, and notifications, before initialize
			return
		}
	}
	if m.IsCall() {
		side.request(m)
	} else if !side.notification(m) {
		a.sdk.deliver(m)
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
			id = stdio.IDJSON(pid)
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
	a.writeClient(stdio.Response(id, nil, rpcError(int64(code), nil, "%s", msg)))
}

// clientCancelled takes the client's cancellation of one of its requests, at whatever stage it
// is: sent, the server gets it under the ID it saw; held for a server that is not serving, it
// is never sent; asking the client for input, the input requests are cancelled at the client;
// a subscriptions/listen stream, it is closed. A cancellation of no request of ours goes to
// the SDK's session.
func (a *Aggregator) clientCancelled(m *jsonrpc.Request) bool {
	id, reason, ok := stdio.ParseCancel(m.Params)
	if !ok {
		return false
	}
	c := a.inflight.cancelled(nil, id)
	if c == nil {
		return false
	}
	a.auditCancelled(c)
	switch {
	case c.stage == held:
		a.log.Debug("the client cancelled a call held for its server: it is not sent", "method", c.method, "server", c.key)
	case c.stage == asking:
		c.chain.stop()
	case c.stage == fanning:
		c.stop(cancelReason(reason))
	case c.stream != nil:
		a.unlisten(c)
	case c.to != nil:
		c.to.conn.Send(nil, stdio.Cancelled(c.toID, reason)...)
	}
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
	c.from.conn.Send(nil, stdio.Notification(m.Method, params)...)
	return true
}

// broadcast sends the client's notification to every server that is up.
func (a *Aggregator) broadcast(m *jsonrpc.Request) bool {
	for _, s := range a.servingServers() {
		s.conn.Send(nil, stdio.Notification(m.Method, m.Params)...)
	}
	return true
}
