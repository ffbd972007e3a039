package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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

// session is the client's session: the connection to the client, what it said of itself, what
// waits for it, and the handling of its messages. It reaches the servers through its
// aggregator (a); the aggregator reaches it through the clientSink (sides.go).
type session struct {
	a      *Aggregator
	client *stdio.Conn
	// toServers holds what is relayed to the servers while the client's input has more
	// messages buffered, toClientBurst what is relayed to the client while a server's has: each
	// burst is written at once (stdio.Burst).
	toServers, toClientBurst stdio.Burst
	sdk                      *sdkConn
	queue                    clientQueue // what waits for the client to be ready
	notify                   *debouncer
	// streamsMu orders what is written on a modern client's listen streams: a stream's
	// acknowledgement before its notifications (streams.go).
	streamsMu sync.Mutex

	// hello is what the client said of itself (in initialize, or its first modern request),
	// published once it is answered; initializing is the same while the SDK answers it (read
	// by its middleware only).
	hello        atomic.Pointer[clientSession]
	initializing *clientSession
	// discover is the answer to a modern client's server/discover (clientmodern.go).
	discover json.RawMessage
	stateKey [32]byte // the HMAC key of the requestStates the session mints (suspend.go)
}

func newSession(a *Aggregator) *session {
	se := &session{a: a, stateKey: newStateKey()}
	// Created before any watcher can trigger it; it sends only once the client has said it
	// is initialized (the queue is flushed after Serve has connected the client).
	se.notify = newDebouncer(10*time.Millisecond, func(method string) {
		if side := se.side(); side != nil && se.queue.isReady() {
			side.listChanged(method)
		}
	})
	return se
}

// drainOnEOF is how long, after the client closed its input, the answers to its last requests
// are still awaited before shutting down.
const drainOnEOF = 5 * time.Second

// serve serves the catalog to the client over in and out until in ends, ctx is cancelled or
// the connection fails.
func (se *session) serve(ctx context.Context, in io.Reader, out io.Writer) error {
	se.client = stdio.New(in, out, &stdio.Options{
		MaxMessageSize: se.a.opts.MaxMessageSize,
		DrainOnEOF:     drainOnEOF,
		Batches:        se.batches,
		Burst:          &se.toServers,
		HeldBy:         &se.toClientBurst,
		NeverWait:      se.a.opts.Hosted,
	})
	se.sdk = newSDKConn(se.client)
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcp-simple-aggregator", Version: se.a.opts.Version}, &mcp.ServerOptions{
		SupportedProtocolVersions: era.VersionsOf(era.Legacy),
		Logger:                    slog.New(slog.DiscardHandler),
	})
	srv.AddReceivingMiddleware(se.initializeMiddleware)
	ss, err := srv.Connect(ctx, se.sdk, nil)
	if err != nil {
		return err
	}
	go se.readClient()
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err = <-done:
	case err = <-se.a.fault:
	case <-ctx.Done():
		// Not ss.Close: it waits for the reader, and a read of stdin cannot be
		// interrupted. The program exits once the servers are stopped.
		err = ctx.Err()
	}
	select {
	case fault := <-se.a.fault: // the end of input it caused came first
		err = fault
	default:
	}
	if side := se.side(); side != nil {
		side.end() // what waits for the client is answered: it will not be
	}
	if se.a.opts.Hosted {
		// What was written to the client reaches it before the shared process lets go of
		// its pipe (a background writer may still be writing: NeverWait).
		_ = se.client.Close()
	}
	if se.a.startErr != nil {
		return se.a.startErr
	}
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// clientRequests are the client's requests the aggregator handles itself; the list methods
// are added from the list kinds (catalog.go). Filled in init: a request held during a reload is
// dispatched again through it.
var clientRequests map[string]func(se *session, req *jsonrpc.Request)

func init() {
	clientRequests = map[string]func(se *session, req *jsonrpc.Request){
		"tools/call":            func(se *session, req *jsonrpc.Request) { se.callNamed(req, kindTools) },
		"prompts/get":           func(se *session, req *jsonrpc.Request) { se.callNamed(req, kindPrompts) },
		"resources/read":        (*session).callResource,
		"resources/subscribe":   (*session).callResource,
		"resources/unsubscribe": (*session).callResource,
		"completion/complete":   (*session).callCompletion,
		"logging/setLevel":      (*session).setLevel,
		"tasks/get":             (*session).callTask,
		"tasks/result":          (*session).callTask,
		"tasks/cancel":          (*session).callTask,
		"tasks/list":            (*session).listTasks,
	}
	for k := range numKinds {
		clientRequests[kinds[k].method] = (*session).answerList
	}
}

// clientNotifications handle the client's notifications; a handler that returns false passes
// the notification on to the SDK's session.
var clientNotifications = map[string]func(se *session, m *jsonrpc.Request) bool{
	"notifications/initialized":        (*session).clientReady,
	"notifications/cancelled":          (*session).clientCancelled,
	"notifications/progress":           (*session).clientProgress,
	"notifications/roots/list_changed": (*session).broadcast,
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
func (se *session) batches() bool {
	cs := se.hello.Load()
	return cs != nil && era.Batches(cs.version)
}

// readClient reads the client's messages until its stdin ends.
func (se *session) readClient() {
	defer se.sdk.endInput()
	defer se.client.EndBurst()
	defer se.a.contain("the reading of the client's messages") // first: before the input ends
	for {
		msg, err := se.client.Read()
		if err != nil {
			if bad := stdio.BadLine(err); bad != nil {
				se.badClientLine(bad)
				continue
			}
			return
		}
		switch m := msg.(type) {
		case *jsonrpc.Response:
			se.clientAnswer(m)
		case *jsonrpc.Request:
			if se.a.panicOn != "" && m.Method == se.a.panicOn {
				panic("a fault injected for " + m.Method + " (" + faultPanicVar + ")")
			}
			se.clientRequest(m)
			if se.a.startErr != nil {
				return // no server could start: the session ends
			}
		}
	}
}

func (se *session) clientRequest(m *jsonrpc.Request) {
	side := se.side()
	if side == nil {
		switch {
		case m.Method == "initialize" && m.IsCall():
			se.initialize(m) // sdk.go
			return
		case m.IsCall() && era.Opens(m.Method, m.Params):
			if !se.startModern(m) {
				return
			}
			side = se.side()
		case m.IsCall() && m.Method != "ping":
			// Neither era's: the modern envelope is missing (the SDK would answer with code 0).
			se.answerClient(m.ID, nil, era.EnvelopeError(era.MetaProtocolVersion, "missing"))
			return
		default:
			se.sdk.deliver(m) // ping, and notifications, before initialize
			return
		}
	}
	if m.IsCall() {
		side.request(m)
	} else if !side.notification(m) {
		se.sdk.deliver(m)
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
func (se *session) badClientLine(bad *stdio.BadLineError) {
	line := bad.Line
	code, msg := jsonrpc.CodeInvalidRequest, "Invalid Request: "+bad.Err.Error()
	id := json.RawMessage("null")
	switch {
	case errors.Is(bad, stdio.ErrTooLarge):
		msg = fmt.Sprintf("Invalid Request: message larger than %d bytes (see --max-message-size)", se.a.opts.MaxMessageSize)
		if pid, ok := stdio.TooLargeID(bad); ok {
			id = stdio.IDJSON(pid)
		}
	case !json.Valid(line):
		code, msg = jsonrpc.CodeParseError, "Parse error: the line is not valid JSON"
	case strings.HasPrefix(string(line), "["):
		// Batches are taken apart by the connection when the session allows them.
		if cs := se.hello.Load(); cs == nil {
			msg = "Invalid Request: a JSON-RPC batch before initialize (initialize must be sent on its own)"
		} else {
			msg = fmt.Sprintf("Invalid Request: JSON-RPC batches are not part of protocol version %s (they were removed in 2025-06-18)", cs.version)
		}
	default:
		id = stdio.RequestID(line)
	}
	se.a.log.Warn("answered a malformed message from the client with an error", "code", code, "line", excerpt(line))
	se.writeClient(stdio.Response(id, nil, rpcError(int64(code), nil, "%s", msg)))
}

// clientCancelled takes the client's cancellation of one of its requests, at whatever stage it
// is: sent, the server gets it under the ID it saw (unless the request waits for its turn at a
// shared legacy process, turns.go, and never reached it); held for a server that is not
// serving, it is never sent; asking the client for input, the input requests are cancelled at the client;
// a subscriptions/listen stream, it is closed. A cancellation of no request of ours goes to
// the SDK's session.
func (se *session) clientCancelled(m *jsonrpc.Request) bool {
	id, reason, ok := stdio.ParseCancel(m.Params)
	if !ok {
		return false
	}
	c := se.a.inflight.cancelled(nil, id)
	if c == nil {
		return false
	}
	se.a.auditCancelled(c)
	switch {
	case c.stage == held:
		se.a.log.Debug("the client cancelled a call held for its server: it is not sent", "method", c.method, "server", c.key)
		c.unanswered() // one whose write failed (unwritten) may have set up or taken a turn
	case c.stage == asking:
		c.chain.stop()
	case c.stage == fanning:
		c.stop(cancelReason(reason))
	case c.stream != nil:
		se.unlisten(c)
	case c.to != nil:
		c.cancelAtServer(func() { c.to.conn.Send(nil, stdio.Cancelled(c.toID, reason)...) })
		c.unanswered() // the client does not count on it
	}
	return true
}

// clientProgress passes the client's progress notification for a server's request to that
// server, with the server's own token.
func (se *session) clientProgress(m *jsonrpc.Request) bool {
	start, end, ok := rawjson.Member(m.Params, "progressToken")
	if !ok {
		return false
	}
	c := se.a.inflight.progress(nil, m.Params[start:end])
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
func (se *session) broadcast(m *jsonrpc.Request) bool {
	for _, s := range se.a.servingServers() {
		s.conn.Send(nil, stdio.Notification(m.Method, m.Params)...)
	}
	return true
}
