package aggregator

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// What the sessions of one server process set up on it together: a legacy server's
// initialization, its log level and its resource subscriptions are the connection's, and a
// shared process's process has one connection for every session that uses it. It is
// initialized once, by the process itself, when the first session needs it, and every session
// takes that answer (initialize). Each session's own setup (its clientSetup) is set up on the
// process as unshared, through this: the process is set to the most verbose level any session
// asks for, and subscribed to a resource while any session is; each session gets the log
// messages at its own level and the updates of the resources it subscribed to (serverLog,
// serverResourceUpdated). A process of the session's own has a setup for its listen alone
// (processlisten.go): what its client sets up goes to it as asked.
//
// The schema's words (2025-11-25): the level is "The level of logging that the client wants
// to receive from the server. The server should send all logs at this level and higher (i.e.,
// more severe) to the client", and resources/subscribe is "Sent from the client to request
// resources/updated notifications from the server whenever a particular resource changes":
// each session gets what its own client asked for, whatever the process was set to for others.

// ProcessSessions is what the sessions of one server process do on it together, called its
// setup in what follows: they set it up (here), listen (processlisten.go), take turns
// (turns.go), and get its messages (processroute.go). Its members are the sessions' handles on
// the process: their Fed (a shared process's, a Member), or the server whose process it is (a
// process of the session's own, which has a setup for its listen alone). Join, Leave,
// Answered, Route and Ended are the process's, when a session begins and ends using it, when
// the server answers a request of the setup's own, when it writes a message, and when it
// ends; the others are the sessions'.
type ProcessSessions struct {
	write func(parts ...[]byte) // writes a message of the setup's own to the process
	log   *slog.Logger

	initOnce sync.Once     // notifications/initialized, told once
	reopen   chan struct{} // held (sent to) by one (re-)opening of a modern server's listen at a time, until it is written (processlisten.go)

	mu      sync.Mutex
	seq     uint64
	init    *initCall // the process's initialize; nil before a session needed it
	members map[any]*memberSetup
	// level is the rank the process was last told (0 before any); confirmed, the last it
	// accepted; levelAt counts the logging/setLevel requests at it, not answered yet.
	level, confirmed, levelAt int
	subs                      map[string]*resourceSubs
	// A modern server's listen (processlisten.go): the sessions' parts in it, the open one,
	// the listens of the setup's own not yet answered, by ID, and the envelope of the latest
	// session's requests, which the setup's listen takes.
	listeners map[any]*listener
	open      *setupListen
	byID      map[string]*setupListen
	listenEnv string
	// The sessions the process's messages go to (processroute.go), in the order they joined
	// (replaced under mu, read without it); and, for Route alone (the process's one reader),
	// whether more of the server's messages follow at once, the sessions handed one since the
	// last did not, and the size of the message being routed.
	routes   atomic.Pointer[routes]
	more     bool
	bursting []Member
	size     int
	// The turns of a legacy server's questions (turns.go): the sessions' requests at the
	// server during which it may ask (in no order: each knows its place, turn.at), and those
	// waiting for their session's turn; what is known (askers) or suspected to ask; the
	// server's questions so far; and each session's requests known to ask that are at the
	// server.
	atServer  []*turn
	queue     []*turn
	askers    map[askKey]bool
	suspects  map[askKey]bool
	questions uint64
	asking    map[any]int
	// cancelling counts the cancellations of the sessions' requests on their way to the
	// server: no request goes before them (turns.go).
	cancelling int
}

// initCall is the process's initialize.
type initCall struct {
	id             string
	done           chan struct{} // closed by its answer
	answered       bool          // for Answered alone (the process's one reader)
	result, errObj json.RawMessage
}

// memberSetup is what one session set up on the process.
type memberSetup struct {
	level int // the rank of its last logging/setLevel; 0 before any
}

// resourceSubs are the sessions subscribed to a resource; whether the server holds a
// subscription to it, as its last answer said; and the (un)subscriptions of it at the server,
// not answered yet: while there are some, what the server holds is not known, and a session's
// (un)subscription goes to it too, for its own answer.
type resourceSubs struct {
	by      map[any]bool
	held    bool
	pending int
}

// NewProcessSessions is the setup of a process that no session uses yet; write writes a message
// of the setup's own to it. The answer to a request of the setup's is the setup's (Answered).
func NewProcessSessions(write func(parts ...[]byte), log *slog.Logger) *ProcessSessions {
	return &ProcessSessions{write: write, log: log, members: map[any]*memberSetup{}, subs: map[string]*resourceSubs{},
		listeners: map[any]*listener{}, byID: map[string]*setupListen{}, reopen: make(chan struct{}, 1),
		askers: map[askKey]bool{}, suspects: map[askKey]bool{}, asking: map[any]int{}}
}

// setsUp reports whether a request of method sets up the connection (merged by a
// ProcessSessions). A switch: it is asked of every request to a server.
func setsUp(method string) bool {
	switch method {
	case "logging/setLevel", "resources/subscribe", "resources/unsubscribe":
		return true
	}
	return false
}

// processSetup is the setup the sessions of the process of s share, and the session's member
// of it, for what a legacy server takes on the connection (its initialization, log level and
// subscriptions); nil for a process of the session's own, and for a modern server, whose
// requests carry their level, and whose listen the subscriptions (sharedSetup).
func (s *server) processSetup() (*ProcessSessions, Fed) {
	if !s.side().setsLevel() {
		return nil, nil // without taking the process's lock (fed)
	}
	fed := s.fed()
	return s.setupOf(fed), fed
}

// setupOf is processSetup's setup, given the session's member of the process of s (s.fed(), for
// a caller that needs it too: sendToServer).
func (s *server) setupOf(fed Fed) *ProcessSessions {
	if fed == nil || !s.side().setsLevel() {
		return nil
	}
	return fed.Sessions()
}

// sharedSetup is the setup the sessions of the process of s share, and the session's member of
// it; nil for a process of the session's own.
func (s *server) sharedSetup() (*ProcessSessions, Fed) {
	f := s.fed()
	if f == nil {
		return nil, nil
	}
	return f.Sessions(), f
}

// listenSetup is the setup whose listen is that of the process of s (processlisten.go), and the
// session's member of it: the shared process's, or the one of a process of the session's own.
func (s *server) listenSetup() (*ProcessSessions, any) {
	if ps, f := s.sharedSetup(); ps != nil {
		return ps, f
	}
	s.procMu.Lock()
	defer s.procMu.Unlock()
	return s.own, s
}

// setUp takes a request c that sets up the connection of s (setsUp), in the table and about to
// be written, params as they would be: it returns what to write, or reports that c was
// answered here, the process being set up so already (ProcessSessions.take).
func (a *Aggregator) setUp(c *call, params [][]byte) ([][]byte, bool) {
	ps, f := c.to.processSetup()
	if ps == nil {
		return params, false
	}
	set, here, answered := ps.take(f, c.method, slices.Concat(params...))
	if !here {
		if answered != nil {
			var once sync.Once // its answer, or its end without one (failWith, the client's cancellation)
			c.setupAnswered = func(ok bool) { once.Do(func() { answered(ok) }) }
		}
		return [][]byte{set}, false
	}
	if a.inflight.take(c) {
		a.complete(c, c.to, json.RawMessage(`{}`), nil) // as the server would answer
	}
	return nil, true
}

// Join makes f a member: what its session sets up on the process counts from now, and, when it
// is a Member, the process's messages for its session go to it (Route).
func (ps *ProcessSessions) Join(f any) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.members[f] == nil {
		ps.members[f] = &memberSetup{}
		if m, ok := f.(Member); ok {
			ps.setRoutes(append(slices.Clone(ps.routed()), m))
		}
	}
}

// Leave releases what the session of f set up: each resource that no other session is
// subscribed to is unsubscribed, and the process is set to the level the others ask for,
// when that is less verbose (it stays at what it was when none asks for any).
func (ps *ProcessSessions) Leave(f any) {
	ps.mu.Lock()
	if ps.members[f] == nil {
		ps.mu.Unlock()
		return
	}
	delete(ps.members, f)
	ps.unroute(f)
	delete(ps.listeners, f) // the open listen asks for at least as much: it costs the server nothing
	var tell []string       // the URIs to unsubscribe from
	for uri, rs := range ps.subs {
		if rs.by[f] {
			delete(rs.by, f)
			if ps.reconcile(uri, rs) != "" { // what a session's leaving changes: an unsubscription
				tell = append(tell, uri)
			}
		}
	}
	slices.Sort(tell)
	level := 0
	if ps.levelAt == 0 {
		level = ps.relevel()
	}
	cancel, next := ps.leaveTurns(f)
	ps.mu.Unlock()
	if cancel != nil {
		ps.cancelled(cancel)
	}
	sendAll(next)
	if level > 0 {
		ps.request("logging/setLevel", levelParams(level))
	}
	for _, uri := range tell {
		ps.request("resources/unsubscribe", rawjson.Marshal(map[string]string{"uri": uri}))
	}
}

// reconcile makes what the server holds of the resource uri what the sessions want, once
// nothing of it is at the server: it returns the method of the request to send for it ("" for
// none), and forgets a resource no session wants and the server does not hold. Callers hold
// ps.mu.
func (ps *ProcessSessions) reconcile(uri string, rs *resourceSubs) string {
	if rs.pending > 0 {
		return ""
	}
	method := ""
	switch want := len(rs.by) > 0; {
	case want && !rs.held:
		method = "resources/subscribe"
	case !want && rs.held:
		method = "resources/unsubscribe"
	}
	rs.held = len(rs.by) > 0
	if !rs.held {
		delete(ps.subs, uri)
	}
	return method
}

// request sends a request of the setup's own, whose answer is dropped (Answered): of no
// session's ID space, so that the process's reader hands it to the setup.
func (ps *ProcessSessions) request(method string, params json.RawMessage) {
	ps.write(stdio.Request(ps.newID(), method, params)...)
}

// newID is an ID of the setup's own.
func (ps *ProcessSessions) newID() string {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.nextID()
}

// nextID is newID for callers that hold ps.mu.
func (ps *ProcessSessions) nextID() string {
	ps.seq++
	return setupIDs + strconv.FormatUint(ps.seq, 10)
}

// setupIDs begins the IDs of the setup's own requests: of no session's ID space, nor of the
// in-flight table's.
const setupIDs = "s-setup-"

// Answered takes the server's answer to a request of no session's: the answer to the setup's
// initialize is kept, one to a listen of the setup's ends it; any other request of the
// setup's has its answer dropped. It reports whether id was of the setup's.
func (ps *ProcessSessions) Answered(id string, result, errObj json.RawMessage) bool {
	if ps.listenEnded(id, errObj) {
		return true
	}
	ps.mu.Lock()
	h := ps.init
	ps.mu.Unlock()
	if h != nil && h.id == id && !h.answered {
		h.answered = true
		h.result, h.errObj = result, errObj
		close(h.done)
	}
	return strings.HasPrefix(id, setupIDs)
}

// initialize returns the process's answer to initialize (its result, or its error object):
// the first session that needs it has the process ask it, with params (the initialize of the
// session's client: every session of a legacy process sends the same, as its identity says);
// every session, the first too, waits for that one answer, until ctx ends or closed is closed
// (the session's use of the process ended), and takes it. A legacy server is initialized
// once: a second initialize may be refused, or end it. A session whose wait ended leaves the
// request at the server, for the next session to take its answer.
func (ps *ProcessSessions) initialize(ctx context.Context, closed <-chan struct{}, params json.RawMessage) (result, errObj json.RawMessage, err error) {
	ps.mu.Lock()
	h := ps.init
	first := h == nil
	if first {
		h = &initCall{id: ps.nextID(), done: make(chan struct{})}
		ps.init = h
	}
	ps.mu.Unlock()
	if first {
		ps.write(stdio.Request(h.id, "initialize", params)...)
	}
	select {
	case <-h.done:
		return h.result, h.errObj, nil
	case <-closed:
		return nil, nil, errClosed
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// tellInitialized tells the process notifications/initialized, once: every session that found
// the answer to initialize good calls it, and none goes on before it was written, so that the
// server hears it before any session's next request.
func (ps *ProcessSessions) tellInitialized() {
	ps.initOnce.Do(func() { ps.write(stdio.Notification("notifications/initialized", nil)...) })
}

// take looks at a request of the session of f that sets up the connection (setsUp), params as
// the session would write it: it returns the params to write instead (the level of the
// sessions together), with what to do once the server answered them (answered: ok when it
// took them), or reports that the process is set up so already (here), and the request is
// answered with an empty result without reaching it. A level that is none of the
// specification's goes as written (the server answers it), and changes nothing; a request of
// a session that is not a member (its use of the process ended) is answered.
func (ps *ProcessSessions) take(f any, method string, params json.RawMessage) (set json.RawMessage, here bool, answered func(ok bool)) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	m := ps.members[f]
	if m == nil {
		return nil, true, nil
	}
	if method == "logging/setLevel" {
		return ps.takeLevel(f, m, params)
	}
	uri, _ := rawjson.StringMember(params, "uri")
	rs := ps.subs[uri]
	if rs == nil {
		rs = &resourceSubs{by: map[any]bool{}}
		ps.subs[uri] = rs
	}
	on := method == "resources/subscribe"
	had := rs.by[f]
	if on {
		rs.by[f] = true
	} else {
		delete(rs.by, f)
	}
	// What changes what the server is to hold goes to it (the first subscription, the last
	// unsubscription), and any while one is there (what it holds is not known before its
	// answer).
	if want := len(rs.by) > 0; want == rs.held && rs.pending == 0 {
		if !want {
			delete(ps.subs, uri)
		}
		return nil, true, nil
	}
	rs.pending++
	return params, false, func(ok bool) { ps.subscribed(f, uri, rs, on, had, ok) }
}

// subscribed takes the server's answer to an (un)subscription of uri by the session of f (ok:
// it took it): one it refused is taken back (the session is subscribed as it was), so that the
// next session's goes to the server, and gets its error, as unshared. Once nothing of the
// resource is at the server, what it holds is made what the sessions want (reconcile): two
// sessions' requests, decided in one order, may have reached it in the other.
func (ps *ProcessSessions) subscribed(f any, uri string, rs *resourceSubs, on, had, ok bool) {
	ps.mu.Lock()
	rs.pending--
	switch {
	case ok:
		rs.held = on
	case ps.members[f] != nil && rs.by[f] == on:
		if had {
			rs.by[f] = true
		} else {
			delete(rs.by, f)
		}
	}
	method := ps.reconcile(uri, rs)
	ps.mu.Unlock()
	if method != "" {
		ps.request(method, rawjson.Marshal(map[string]string{"uri": uri}))
	}
}

// takeLevel is take of a logging/setLevel. Callers hold ps.mu.
func (ps *ProcessSessions) takeLevel(f any, m *memberSetup, params json.RawMessage) (json.RawMessage, bool, func(bool)) {
	level, _ := rawjson.StringMember(params, "level")
	rank := era.LogRank(level)
	if rank == 0 {
		return params, false, nil
	}
	was := m.level
	m.level = rank
	merged, changed := ps.merged()
	if !changed && ps.levelAt == 0 {
		return nil, true, nil // the process was told, and took, this level
	}
	ps.levelAt++
	answered := func(ok bool) { ps.leveled(f, rank, was, merged, ok) }
	if merged != rank { // another session asks for more: the answer is this one's all the same
		return levelParams(merged), false, answered
	}
	return params, false, answered
}

// leveled takes the server's answer to a logging/setLevel to the rank sent, of the session of
// f, which asked for rank (was before): one it refused is taken back, the session's level
// (unless it asked for another since). Once no other is at the server, the process is set to
// what the sessions ask together when the last level it took is not that (relevel): two
// sessions' requests, decided in one order, may have reached it in the other.
func (ps *ProcessSessions) leveled(f any, rank, was, sent int, ok bool) {
	ps.mu.Lock()
	ps.levelAt--
	if ok {
		ps.confirmed = sent
	} else if m := ps.members[f]; m != nil && m.level == rank {
		m.level = was
	}
	level := 0
	if ps.levelAt == 0 {
		ps.level = ps.confirmed
		level = ps.relevel()
	}
	ps.mu.Unlock()
	if level > 0 {
		ps.request("logging/setLevel", levelParams(level))
	}
}

// relevel returns the level to set the process to, when what the sessions ask together is more
// verbose, or less, than what it last took (0 when it is that, or no session asks for any), and
// takes it for set. Callers hold ps.mu, with no level of the setup's at the server.
func (ps *ProcessSessions) relevel() int {
	lowest := ps.lowest()
	if lowest == 0 || lowest == ps.confirmed {
		return 0
	}
	ps.level, ps.confirmed = lowest, lowest
	return lowest
}

// lowest is the most verbose level a member asks for; 0 when none asks for any. Callers hold
// ps.mu.
func (ps *ProcessSessions) lowest() int {
	lowest := 0
	for _, m := range ps.members {
		if m.level > 0 && (lowest == 0 || m.level < lowest) {
			lowest = m.level
		}
	}
	return lowest
}

// merged sets ps.level to the most verbose level a member asks for, and reports whether that
// changed it. Callers hold ps.mu.
func (ps *ProcessSessions) merged() (int, bool) {
	lowest := ps.lowest()
	if lowest == ps.level || lowest == 0 {
		return ps.level, false
	}
	ps.level = lowest
	return lowest, true
}

// logs reports whether a log message at rank reaches the session of f: one at or above the
// level it asked for, or any when it asked for none (unshared, the process would log at its
// own default level, which a shared one may be set away from by the others).
func (ps *ProcessSessions) logs(f any, rank int) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	m := ps.members[f]
	return m != nil && (m.level == 0 || rank >= m.level)
}

// wants reports whether the session of f is subscribed to uri, or to a resource uri is part
// of (era.PartOf): an update of it is the session's.
func (ps *ProcessSessions) wants(f any, uri string) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if rs := ps.subs[uri]; rs != nil && rs.by[f] {
		return true
	}
	for sub, rs := range ps.subs {
		if rs.by[f] && era.PartOf(uri, sub) {
			return true
		}
	}
	return false
}

// levelParams are the params of logging/setLevel to the level of rank.
func levelParams(rank int) json.RawMessage {
	return json.RawMessage(`{"level":` + strconv.Quote(era.LogLevel(rank)) + `}`)
}
