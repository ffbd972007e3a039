package aggregator

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// What the sessions of one server process set up on it together: a legacy server's
// initialization, its log level and its resource subscriptions are the connection's, and a
// shared process's process has one connection for every session that uses it. It is
// initialized once, by the process itself, when the first session needs it, and every session
// takes that answer (initialize). Each session's own setup (its clientSetup) is set up on the
// process as unshared, through this: the process is set to the most verbose level any session
// asks for, and subscribed to a resource while any session is; each session gets the log
// messages at its own level and the updates of the resources it subscribed to (serverLog,
// serverResourceUpdated). A process of the session's own has none: what its client asks for
// goes to it as asked.
//
// The schema's words (2025-11-25): the level is "The level of logging that the client wants
// to receive from the server. The server should send all logs at this level and higher (i.e.,
// more severe) to the client", and resources/subscribe is "Sent from the client to request
// resources/updated notifications from the server whenever a particular resource changes":
// each session gets what its own client asked for, whatever the process was set to for others.

// ProcessSetup is what the sessions of one shared server process set up on it together. Its
// members are the sessions' connections to the process (their Fed): Join, Leave and Answered
// are the process's, when a session begins and ends using it and when the server answers a
// request of the setup's own; initialize, initialized, take, logs and subscribed are the
// sessions'.
type ProcessSetup struct {
	send func(id, method string, params json.RawMessage) // writes a request of the setup's own

	mu      sync.Mutex
	seq     uint64
	init    *initCall // the process's initialize; nil before a session needed it
	inited  bool      // a session told the process notifications/initialized
	members map[Fed]*memberSetup
	level   int                     // the rank the process is set to; 0 before any
	subs    map[string]map[Fed]bool // the sessions subscribed to each resource
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

// NewProcessSetup is the setup of a process that no session uses yet; send writes a request of
// the setup's own to it, under id. The answer to such a request is the setup's (Answered).
func NewProcessSetup(send func(id, method string, params json.RawMessage)) *ProcessSetup {
	return &ProcessSetup{send: send, members: map[Fed]*memberSetup{}, subs: map[string]map[Fed]bool{}}
}

// setsUp reports whether a request of method sets up the connection (merged by a
// ProcessSetup). A switch: it is asked of every request to a server.
func setsUp(method string) bool {
	switch method {
	case "logging/setLevel", "resources/subscribe", "resources/unsubscribe":
		return true
	}
	return false
}

// processSetup is the setup the sessions of the process of s share, and the session's member
// of it; nil for a process of the session's own, and for a server whose setup is not the
// connection's (a modern one: each request carries its level, and its listen the
// subscriptions, listen.go).
func (s *server) processSetup() (*ProcessSetup, Fed) {
	f := s.fed()
	if f == nil || !s.side().setsLevel() {
		return nil, nil
	}
	return f.Setup(), f
}

// setUp takes a request c that sets up the connection of s (setsUp), in the table and about to
// be written, params as they would be: it returns what to write, or reports that c was
// answered here, the process being set up so already (ProcessSetup.take).
func (a *Aggregator) setUp(c *call, params [][]byte) ([][]byte, bool) {
	ps, f := c.to.processSetup()
	if ps == nil {
		return params, false
	}
	set, here, undo := ps.take(f, c.method, slices.Concat(params...))
	if !here {
		c.undo = undo
		return [][]byte{set}, false
	}
	if !a.inflight.take(c) {
		return nil, true
	}
	result := json.RawMessage(`{}`)
	if c.own() {
		c.done(result, nil)
	} else {
		a.client.answerCall(c, result, nil)
	}
	return nil, true
}

// Join makes f a member: what its session sets up on the process counts from now.
func (ps *ProcessSetup) Join(f Fed) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.members[f] == nil {
		ps.members[f] = &memberSetup{}
	}
}

// Leave releases what the session of f set up: each resource that no other session is
// subscribed to is unsubscribed, and the process is set to the level the others ask for,
// when that is less verbose (it stays at what it was when none asks for any).
func (ps *ProcessSetup) Leave(f Fed) {
	ps.mu.Lock()
	if ps.members[f] == nil {
		ps.mu.Unlock()
		return
	}
	delete(ps.members, f)
	var unsubs []string
	for uri := range ps.subs {
		if ps.subscribe(f, uri, false) {
			unsubs = append(unsubs, uri)
		}
	}
	slices.Sort(unsubs)
	level, changed := ps.merged()
	ps.mu.Unlock()
	if changed && level > 0 {
		ps.request("logging/setLevel", levelParams(level))
	}
	for _, uri := range unsubs {
		ps.request("resources/unsubscribe", rawjson.Marshal(map[string]string{"uri": uri}))
	}
}

// request sends a request of the setup's own, and returns its ID: of no session's ID space, so
// that the process's reader hands its answer to the setup (Answered); only initialize's is
// waited for.
func (ps *ProcessSetup) request(method string, params json.RawMessage) string {
	ps.mu.Lock()
	ps.seq++
	id := "s-setup-" + strconv.FormatUint(ps.seq, 10)
	ps.mu.Unlock()
	ps.send(id, method, params)
	return id
}

// Answered takes the server's answer to a request of no session's: the answer to the setup's
// initialize is kept; any other is dropped.
func (ps *ProcessSetup) Answered(id string, result, errObj json.RawMessage) {
	ps.mu.Lock()
	h := ps.init
	ps.mu.Unlock()
	if h != nil && h.id == id && !h.answered {
		h.answered = true
		h.result, h.errObj = result, errObj
		close(h.done)
	}
}

// initialize returns the process's answer to initialize (its result, or its error object):
// the first session that needs it has the process ask it, with params (the initialize of the
// session's client: every session of a legacy process sends the same, as its identity says);
// every session, the first too, waits for that one answer, until ctx ends or closed is closed
// (the session's use of the process ended), and takes it. A legacy server is initialized
// once: a second initialize may be refused, or end it. A session whose wait ended leaves the
// request at the server, for the next session to take its answer.
func (ps *ProcessSetup) initialize(ctx context.Context, closed <-chan struct{}, params json.RawMessage) (result, errObj json.RawMessage, err error) {
	ps.mu.Lock()
	h := ps.init
	if h == nil {
		ps.seq++
		h = &initCall{id: "s-setup-" + strconv.FormatUint(ps.seq, 10), done: make(chan struct{})}
		ps.init = h
		ps.mu.Unlock()
		ps.send(h.id, "initialize", params)
	} else {
		ps.mu.Unlock()
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

// initialized reports whether the session that found the answer to initialize good is the
// first to: it tells the process notifications/initialized, once for every session.
func (ps *ProcessSetup) initialized() bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	first := !ps.inited
	ps.inited = true
	return first
}

// take looks at a request of the session of f that sets up the connection (setsUp), params as
// the session would write it: it returns the params to write instead (the level of the
// sessions together), with what to take back when the server refuses them (undo), or reports
// that the process is set up so already (here), and the request is answered with an empty
// result without reaching it. A level that is none of the specification's goes as written
// (the server answers it), and changes nothing; a request of a session that is not a member
// (its use of the process ended) is answered.
func (ps *ProcessSetup) take(f Fed, method string, params json.RawMessage) (set json.RawMessage, here bool, undo func()) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	m := ps.members[f]
	if m == nil {
		return nil, true, nil
	}
	if method == "logging/setLevel" {
		level, _ := rawjson.StringMember(params, "level")
		rank := era.LogRank(level)
		if rank == 0 {
			return params, false, nil
		}
		was, wasSet := m.level, ps.level
		m.level = rank
		merged, changed := ps.merged()
		if !changed {
			return nil, true, nil
		}
		undo = func() { ps.unlevel(f, rank, was, merged, wasSet) }
		if merged != rank { // another session asks for more: the answer is this one's all the same
			return levelParams(merged), false, undo
		}
		return params, false, undo
	}
	uri, _ := rawjson.StringMember(params, "uri")
	on := method == "resources/subscribe"
	if ps.subscribe(f, uri, on) {
		return params, false, func() { ps.unsubscribe(f, uri, on) }
	}
	return nil, true, nil
}

// unlevel takes back a logging/setLevel of the session of f that the server refused: its level
// is what it was (unless it asked for another since), and so is the process's (unless another
// was set since).
func (ps *ProcessSetup) unlevel(f Fed, rank, was, set, wasSet int) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if m := ps.members[f]; m != nil && m.level == rank {
		m.level = was
	}
	if ps.level == set {
		ps.level = wasSet
	}
}

// unsubscribe takes back the (un)subscription of uri by the session of f that the server
// refused, so that the next session's goes to the server.
func (ps *ProcessSetup) unsubscribe(f Fed, uri string, on bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.members[f] != nil {
		ps.subscribe(f, uri, !on)
	}
}

// merged sets ps.level to the most verbose level a member asks for, and reports whether that
// changed it. Callers hold ps.mu.
func (ps *ProcessSetup) merged() (int, bool) {
	lowest := 0
	for _, m := range ps.members {
		if m.level > 0 && (lowest == 0 || m.level < lowest) {
			lowest = m.level
		}
	}
	if lowest == ps.level || lowest == 0 {
		return ps.level, false
	}
	ps.level = lowest
	return lowest, true
}

// subscribe notes the (un)subscription of uri by the session of f; it reports whether the
// server is to be asked: the first subscription, or the last unsubscription. Callers hold
// ps.mu.
func (ps *ProcessSetup) subscribe(f Fed, uri string, on bool) bool {
	cur := ps.subs[uri]
	switch {
	case on && !cur[f]:
		if cur == nil {
			cur = map[Fed]bool{}
			ps.subs[uri] = cur
		}
		cur[f] = true
		return len(cur) == 1
	case !on && cur[f]:
		delete(cur, f)
		if len(cur) == 0 {
			delete(ps.subs, uri)
			return true
		}
	}
	return false
}

// logs reports whether a log message at rank reaches the session of f: one at or above the
// level it asked for, or any when it asked for none (unshared, the process would log at its
// own default level, which a shared one may be set away from by the others).
func (ps *ProcessSetup) logs(f Fed, rank int) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	m := ps.members[f]
	return m != nil && (m.level == 0 || rank >= m.level)
}

// subscribed reports whether the session of f is subscribed to uri, or to a resource uri is
// part of (era.PartOf).
func (ps *ProcessSetup) subscribed(f Fed, uri string) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.subs[uri][f] {
		return true
	}
	for sub, fs := range ps.subs {
		if fs[f] && era.PartOf(uri, sub) {
			return true
		}
	}
	return false
}

// levelParams are the params of logging/setLevel to the level of rank.
func levelParams(rank int) json.RawMessage {
	return json.RawMessage(`{"level":` + strconv.Quote(era.LogLevel(rank)) + `}`)
}
