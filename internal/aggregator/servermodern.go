package aggregator

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// A server of the modern era (2026-07-28), as its probe found it (probe.go): it never gets
// initialize; every request carries the envelope; one subscriptions/listen carries its list
// changes and the client's resource subscriptions; server/discover is its health probe; and
// its input_required answers reach a legacy client as ordinary requests (fulfil.go).

// modernServer is the serverSide of a modern server.
type modernServer struct {
	a *Aggregator
	// envelope is the request _meta members every request to it carries (era.BuildEnvelope),
	// made from the servers' initialize (serverInit) with the version it chose.
	envelope string
}

func (*modernServer) era() era.Era { return era.Modern }

// handshake opens the server's listen, when there is a client (check has none): its list
// changes and the client's subscriptions.
func (m *modernServer) handshake(ctx context.Context, s *server, _ json.RawMessage) (string, error) {
	if m.a.roster.isStarted() {
		if _, err := m.listenAt(ctx, s); err != nil {
			s.log.Warn("the server's list changes are not followed: "+err.Error(), "protocol", s.protocol)
		}
	}
	return "", nil
}

// params: every request carries the envelope. A request that has one already (a modern
// client's, or a retry of fulfil's) passes byte for byte; any other (a legacy client's, or the
// aggregator's own: lists, pager, probe, health) gets it, with the level of the client's last
// logging/setLevel on the client's requests ("If absent, the server MUST NOT send any
// notifications/message ... for this request", schema.ts RequestMetaObject). A legacy client's
// request that may be answered input_required gets the chain its legs share (fulfil.go).
// awaits nothing: a modern request carries its own log level.
func (m *modernServer) awaits(*call) <-chan struct{} { return nil }

func (m *modernServer) params(c *call, params [][]byte) [][]byte {
	if c.enveloped {
		return params
	}
	env := m.envelope
	if c.req != nil {
		env = era.WithLogLevel(env, m.a.setup.logLevel())
	}
	p := era.Envelop(slices.Concat(params...), env)
	if c.req != nil && c.chain == nil && era.InputMethods[c.method] {
		c.chain = &inputChain{params: p, cancel: make(chan struct{})}
	}
	return [][]byte{p}
}

// health: the modern era has no ping. SEP-2575 (seps/2575-stateless-mcp.md): "ping: Removed in
// both directions. ... Client-to-server ping is also removed because any normal RPC call
// already proves server liveness, and transport-layer mechanisms (HTTP keep-alives, SSE
// comments, STDIO process status) handle connection-health checks more appropriately." The
// process status is watched (watch); a hung process answers nothing, so a modern server is
// asked server/discover, which every modern server MUST implement, and which changes nothing
// (docs/protocol-eras.md §7). The envelope is added on the way (params).
func (*modernServer) health() (method, doing string) {
	return "server/discover", "answering server/discover (the health probe)"
}

// subscribeFor answers the client's resources/subscribe or unsubscribe of uri, which a modern
// server has no request for: its listen is opened again with the client's subscriptions,
// within the start-up timeout. The request is in the in-flight table meanwhile (fanOut, to
// one server).
func (m *modernServer) subscribeFor(req *jsonrpc.Request, s *server, uri string) bool {
	var errObj json.RawMessage
	m.a.fanOut(req, []*server{s}, "subscribing at a modern server", func(int, *server) func(context.Context) {
		return func(ctx context.Context) {
			ctx, cancel := context.WithTimeout(ctx, m.a.opts.StartupTimeout)
			defer cancel()
			errObj = m.subscribe(ctx, s, req.Method, uri)
		}
	}, func() (json.RawMessage, json.RawMessage) {
		if errObj != nil {
			return nil, errObj
		}
		return json.RawMessage(`{}`), nil
	})
	return true
}

// subscribe makes the listen of s carry the client's subscriptions after method
// (resources/subscribe or unsubscribe) of uri was noted in the client's setup: the listen is
// opened again with the new set of URIs, and the lists are read again for changes while none
// was open. A subscription the server did not acknowledge is taken back, and the error says
// why.
func (m *modernServer) subscribe(ctx context.Context, s *server, method, uri string) json.RawMessage {
	m.a.setup.subscribed(method, uri, s.key)
	accepted, err := m.listenAt(ctx, s)
	go m.a.refresh(s, allKinds...) // changes while no listen was open
	switch {
	case err != nil:
		if method == "resources/subscribe" {
			m.a.setup.subscribed("resources/unsubscribe", uri, s.key)
		}
		return rpcError(jsonrpc.CodeInternalError, nil, "Internal error: server %q (protocol %s) could not take the subscription: %v", s.key, s.protocol, err)
	case method == "resources/subscribe" && !slices.Contains(accepted, uri):
		m.a.setup.subscribed("resources/unsubscribe", uri, s.key)
		return invalidParams("server %q did not accept the subscription to %q (its acknowledgement of subscriptions/listen does not list it; does it offer resources.subscribe?)", s.key, uri)
	}
	return nil
}

func (*modernServer) setsLevel() bool { return false }

// replay does nothing: its listen has the client's subscriptions, and every request the level.
func (*modernServer) replay(context.Context, *server) {}

// carry takes a leg's input_required for a legacy client: the rounds go on in fulfil.
func (m *modernServer) carry(c *call, s *server, result json.RawMessage) bool {
	if c.chain == nil || era.ResultType(result) != "input_required" {
		return false
	}
	go m.a.client.fulfil(c, s, result)
	return true
}

// The listen of a modern server. "The server MUST NOT send notification types the client has
// not explicitly requested" (basic/patterns/subscriptions.mdx): the aggregator asks each modern
// server for the list changes its capabilities announce, and for the resources the client
// subscribed to, on one subscriptions/listen, a request that stays open. It is the process's
// (ProcessSessions.listen, processlisten.go): one listen for every session of a shared process, and
// the same for a process of the session's own, whose setup has one member. What arrives tagged
// with its ID enters the legacy path (readServer), untagged: the core takes a modern server's
// notifications/tools/list_changed as it takes a legacy one's.
//
// A change of the client's subscriptions re-opens the listen with the new set. The go-sdk's
// server ends the list subscriptions of every listen of a connection when any one of them
// ends (docs/protocol-eras.md §6), so the old listen is ended first, and its end awaited,
// before the new one is opened; the lists are read again after, for changes meanwhile.

// listenAt (re-)opens the listen of the process of s for its list changes and the URIs the
// client subscribed to on its key (with what the other sessions of a shared process ask), and
// waits for its acknowledgement; it returns the URIs the server accepted.
func (m *modernServer) listenAt(ctx context.Context, s *server) ([]string, error) {
	a := m.a
	ps, me := s.listenSetup()
	_, uris := a.setup.of(s.key)
	grace := min(a.opts.ProbeTimeout, a.opts.StartupTimeout)
	return ps.listen(ctx, s.readDone, me, m.envelope, era.ListenFilter(s.caps, uris), grace, a.opts.StartupTimeout, func() { go a.refresh(s, allKinds...) })
}

// notification looks at a notification of s: one tagged with the ID of the process's listen
// that its filter asks for loses the tag and goes on to the legacy path (false); the
// acknowledgement of the listen, and anything else of a listen, end here (true). A shared
// process's are routed untagged (ProcessSessions.Route, ListenNotification).
func (m *modernServer) notification(s *server, n *jsonrpc.Request) bool {
	rawID, rest, tagged := era.Untag(n.Params)
	if !tagged {
		return false
	}
	id, _ := rawjson.Decode(rawID)
	// Tagged, it is of a process of the session's own: a shared process's routing hands
	// them over untagged. Read on the process's reader, after its setup was made.
	if s.own == nil {
		return true
	}
	if slices.Contains(s.own.ListenNotification(id, n.Method, rest), any(s)) {
		n.Params = rest
		return false
	}
	return true
}
