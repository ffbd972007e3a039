package aggregator

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
)

// The two protocol eras (internal/era) meet here. The routing core never branches on a peer's
// era: it asks the client's side (one per session) or a server's side (one per process), and
// each era answers in its own file. What is pure (envelopes, translations, codecs) is in
// internal/era; what holds state of a peer's era is behind these two interfaces.
//
//	clientSide   legacyClient (clientlegacy.go), modernClient (clientmodern.go)
//	serverSide   legacyServer (serverlegacy.go), modernServer (servermodern.go)
//
// Answers need neither: era.Translate turns an answer of one era into the other's, and
// answerClient calls it with the era of who answered and the client's.

// clientSink is the aggregator's one way to the client's session (*session, fromclient.go):
// what the roster, the dispatcher of the servers' messages (fromserver.go) and the requests'
// path to the servers (toserver.go) have to tell the client or ask of its session.
type clientSink interface {
	// side is the session's era (nil before the session begins), which decides what of a
	// server's message reaches the client (clientSide).
	side() clientSide
	// clientRequest routes a request of the client's again, as if it had just come: one held
	// for a key that came back, or for what it waited for.
	clientRequest(req *jsonrpc.Request)
	// answerClient answers a request of the client's that the aggregator answers itself
	// (refused, unknown, fanned out); answerCall a relayed call, with its server's answer or
	// with an error when it ends without one.
	answerClient(id jsonrpc.ID, result, errObj json.RawMessage)
	answerCall(c *call, result, errObj json.RawMessage)
	// fulfil carries a modern server's input_required for a legacy client's call c (fulfil.go).
	fulfil(c *call, s *server, result json.RawMessage)
	// toClientRequest takes a server's request for the client; toClient a message for it (a
	// server's notification, a cancellation), which waits until the client is ready.
	toClientRequest(s *server, m *jsonrpc.Request)
	toClient(msg [][]byte)
	// clientLog tells the client a line of the aggregator's own (a server down, a definition
	// withheld), where its era allows.
	clientLog(level, text string)
	// listChanged tells the client, debounced, that a list of the aggregator's changed.
	listChanged(method string)
	// clientName names the client for the audit log.
	clientName() string
}

// clientSide is what a session does in its era.
type clientSide interface {
	era() era.Era
	// request takes a request of the session (a session's first request made it: see
	// clientRequest).
	request(m *jsonrpc.Request)
	// notification takes a notification of the client; false passes it to the SDK's session.
	notification(m *jsonrpc.Request) bool
	// serverRequest takes a server's request for the client's input (sampling, elicitation,
	// roots), made once the session is ready (what comes before waits in the queue).
	serverRequest(s *server, m *jsonrpc.Request)
	// ready flushes what waited for the client (the queue) once it can be told.
	ready()
	// listChanged tells the client that a list of the aggregator's changed (the
	// list_changed method); resourceUpdated that a resource changed.
	listChanged(method string)
	resourceUpdated(params json.RawMessage)
	// serverLog reports whether a server's log message (its params) reaches the client.
	serverLog(s *server, params json.RawMessage) bool
	// log sends a log line of the aggregator's own, where the era allows.
	log(level, text string)
	// relay notes what the client's request c asks of the way it is relayed (a modern
	// request's envelope and log level).
	relay(c *call)
	// progress reports whether the progress of c, a relayed call, reaches the client.
	progress(c *call) bool
	// taskStatus reports whether a server's notifications/tasks/status reaches the client.
	taskStatus() bool
	// answered takes a relayed call's answer before it is written (a modern client's tasks,
	// cache hints): the result to write, or done when nothing is to be written now.
	answered(c *call, result, errObj json.RawMessage) (json.RawMessage, json.RawMessage, bool)
	// end answers what waits for the client when the session ends.
	end()
}

// serverSide is what a server process is in its era, set when its probe settles it.
type serverSide interface {
	era() era.Era
	// handshake completes the server's start after the probe: initialize for a legacy
	// server, the listen of a modern one.
	handshake(ctx context.Context, s *server, params json.RawMessage) (stage string, err error)
	// params are the params of c as s gets them (c.params: the client's request's, or the
	// aggregator's own).
	params(c *call, params [][]byte) [][]byte
	// awaits is what the client's call c must wait for before it is sent: a legacy server's
	// log level, set lower for a modern client's request that asks for it (nil: nothing).
	awaits(c *call) <-chan struct{}
	// health is the request the health probe sends (ping; server/discover in the modern era,
	// which has no ping).
	health() (method, doing string)
	// subscribeFor takes the client's own resources/subscribe or unsubscribe of uri (noted in
	// the client's setup already): true when it is answered here, false when it is relayed.
	subscribeFor(req *jsonrpc.Request, s *server, uri string) bool
	// subscribe makes s carry (or stop carrying) a subscription of the client's to uri made
	// by the aggregator (a modern client's listen stream; method: resources/subscribe or
	// unsubscribe); errObj says why it did not.
	subscribe(ctx context.Context, s *server, method, uri string) (errObj json.RawMessage)
	// setsLevel reports whether s takes logging/setLevel (a modern server takes the level per
	// request).
	setsLevel() bool
	// replay sets up on a new process of the key what the client set up on the key before.
	replay(ctx context.Context, s *server)
	// notification looks at a notification of s before its dispatch: true when it ends here
	// (a listen's acknowledgement); it may change the params it goes on with.
	notification(s *server, m *jsonrpc.Request) bool
	// carry takes an answer of s that is not final for the client (a modern server's
	// input_required for a legacy client): true when it is carried on elsewhere.
	carry(c *call, s *server, result json.RawMessage) bool
}
