package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
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
	listen   childListen
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
// subscribed to, on one subscriptions/listen, a request that stays open: a standing call in the
// table (a drain does not wait for it, and no timeout applies to it). What arrives tagged with
// its ID enters the legacy path (readServer), untagged: the core takes a modern server's
// notifications/tools/list_changed as it takes a legacy one's.
//
// A change of the client's subscriptions re-opens the listen with the new set. The go-sdk's
// server ends the list subscriptions of every listen of a connection when any one of them
// ends (docs/protocol-eras.md §6), so the old listen is ended first, and its end awaited,
// before the new one is opened; the lists are read again after, for changes meanwhile. A
// shared process's server hears one listen for every session, its setup's, which does the
// same (processlisten.go).

// childListen is the listen of a modern server: one (re-)opening at a time, and the open one.
type childListen struct {
	reopen sync.Mutex
	mu     sync.Mutex
	cur    *listenCall // the open listen; nil when none
}

// listenCall is one subscriptions/listen request.
type listenCall struct {
	c      *call
	ack    chan struct{} // closed by the acknowledgement
	agreed struct {
		ResourceSubscriptions []string `json:"resourceSubscriptions"`
	}
	ended     chan struct{} // closed once it is answered, or its server went down
	endOnce   sync.Once
	endResult json.RawMessage // its error, when it ended with one
}

func (l *listenCall) end(errObj json.RawMessage) {
	l.endOnce.Do(func() { l.endResult = errObj; close(l.ended) })
}

// listenAt (re-)opens the listen of s for its list changes and the URIs the client subscribed
// to on its key, and waits for its acknowledgement; it returns the URIs the server accepted.
// An old listen is ended first (see childListen).
func (m *modernServer) listenAt(ctx context.Context, s *server) ([]string, error) {
	a, l := m.a, &m.listen
	if ps, f := s.sharedSetup(); ps != nil {
		// A shared process hears one listen, its setup's, for every session (processlisten.go).
		_, uris := a.setup.of(s.key)
		filter := era.ListenFilter(s.caps, uris)
		params := era.Envelop(era.ListenParams(filter), m.envelope)
		grace := min(a.opts.ProbeTimeout, a.opts.StartupTimeout)
		return ps.listen(ctx, s.readDone, f, params, filter, grace, a.opts.StartupTimeout, func() { go a.refresh(s, allKinds...) })
	}
	l.reopen.Lock()
	defer l.reopen.Unlock()
	l.mu.Lock()
	old := l.cur
	l.cur = nil
	l.mu.Unlock()
	var late *listenCall // the old listen, when its end was not seen
	if old != nil {
		s.conn.Send(nil, stdio.Cancelled(old.c.toID, "mcp-simple-aggregator listens again with other subscriptions")...)
		wait, cancel := context.WithTimeout(ctx, min(a.opts.ProbeTimeout, a.opts.StartupTimeout))
		select {
		case <-old.ended: // the go-sdk answers a cancelled listen once it let go of it
			a.inflight.take(old.c)
		case <-wait.Done(): // others say nothing more (basic/patterns/subscriptions.mdx)
			late = old // still in flight a while: endedLate
		}
		cancel()
	}
	_, uris := a.setup.of(s.key)
	f := era.ListenFilter(s.caps, uris)
	if f.Empty() {
		return nil, nil
	}
	lc := &listenCall{ack: make(chan struct{}), ended: make(chan struct{})}
	lc.c = &call{to: s, method: "subscriptions/listen", doing: "listening for changes", stage: standing,
		done: func(_, errObj json.RawMessage) { lc.end(errObj) }}
	// Held across the send: the acknowledgement, read on another goroutine, finds it.
	l.mu.Lock()
	res := a.sendToServer(lc.c, nil, era.ListenParams(f))
	if res == addOK {
		l.cur = lc
	}
	l.mu.Unlock()
	if res != addOK {
		return nil, fmt.Errorf("server %q is not serving", s.key)
	}
	if late != nil {
		go m.endedLate(s, late, lc)
	}
	select {
	case <-lc.ack:
		return lc.agreed.ResourceSubscriptions, nil
	case <-lc.ended:
		if lc.endResult != nil {
			return nil, fmt.Errorf("subscriptions/listen failed: %s", lc.endResult)
		}
		return nil, errors.New("subscriptions/listen ended before its acknowledgement")
	case <-ctx.Done():
		return nil, fmt.Errorf("no acknowledgement of subscriptions/listen: %w", ctx.Err())
	}
}

// endedLate listens again when the listen old, whose end listenAt stopped waiting for, ends
// after cur was opened in its place: the go-sdk's server, letting go of old, ends the list
// subscriptions of the connection, cur's with them (a busy machine can take longer than the
// wait). Until then, for at most the start-up timeout, old stays in flight, so that its
// answer is seen; a server that never answers a cancelled listen says nothing more.
func (m *modernServer) endedLate(s *server, old, cur *listenCall) {
	select {
	case <-old.ended: // answered, or its server went down
	case <-time.After(m.a.opts.StartupTimeout): // it says nothing more
		m.a.inflight.take(old.c)
		return
	}
	m.a.inflight.take(old.c)
	l := &m.listen
	l.mu.Lock()
	still := l.cur == cur
	l.mu.Unlock()
	if !still {
		return // listened again meanwhile
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.a.opts.StartupTimeout)
	defer cancel()
	if _, err := m.listenAt(ctx, s); err != nil {
		s.log.Debug("listening again after a listen ended late: "+err.Error(), "protocol", s.protocol)
		return
	}
	s.log.Debug("listened again: the listen it replaced ended late")
	m.a.refresh(s, allKinds...) // changes while no listen was open
}

// notification looks at a notification of s: one tagged with the ID of its listen loses the
// tag and goes on to the legacy path (false); the acknowledgement of the listen, and anything
// of a listen no longer open, end here (true).
func (m *modernServer) notification(s *server, n *jsonrpc.Request) bool {
	rawID, rest, tagged := era.Untag(n.Params)
	if !tagged {
		return false
	}
	id, _ := rawjson.Decode(rawID)
	l := &m.listen
	l.mu.Lock()
	cur := l.cur
	l.mu.Unlock()
	if cur == nil || id != cur.c.toID {
		s.log.Debug("dropped a notification of a listen no longer open", "method", n.Method, "subscription", string(rawID))
		return true
	}
	if n.Method == "notifications/subscriptions/acknowledged" {
		var p struct {
			Notifications json.RawMessage `json:"notifications"`
		}
		_ = json.Unmarshal(n.Params, &p)
		_ = json.Unmarshal(p.Notifications, &cur.agreed)
		s.log.Debug("listening", "subscription", id, "agreed", string(p.Notifications))
		select {
		case <-cur.ack:
		default:
			close(cur.ack)
		}
		return true
	}
	n.Params = rest
	return false
}
