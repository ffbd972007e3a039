package aggregator

import (
	"encoding/json"
	"slices"
	"strconv"
	"sync"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// What the sessions of one server process set up on it together: a legacy server's log level
// and its resource subscriptions are the connection's, and a shared process's process has one
// connection for every session that uses it. Each session's own (its clientSetup) is set up
// on the process as unshared, through this: the process is set to the most verbose level any
// session asks for, and subscribed to a resource while any session is; each session gets the
// log messages at its own level and the updates of the resources it subscribed to (serverLog,
// serverResourceUpdated). A process of the session's own has none: what its client asks for
// goes to it as asked.
//
// The schema's words (2025-11-25): the level is "The level of logging that the client wants
// to receive from the server. The server should send all logs at this level and higher (i.e.,
// more severe) to the client", and resources/subscribe is "Sent from the client to request
// resources/updated notifications from the server whenever a particular resource changes":
// each session gets what its own client asked for, whatever the process was set to for others.

// ProcessSetup is what the sessions of one shared server process set up on it together. Its
// members are the sessions' connections to the process (their Fed): Join and Leave are the
// process's, when a session begins and ends using it; take, logs and subscribed are the
// sessions' own.
type ProcessSetup struct {
	send func(method string, params json.RawMessage) // a request of the process's own, whose answer nobody waits for

	mu      sync.Mutex
	members map[Fed]*memberSetup
	level   int                     // the rank the process is set to; 0 before any
	subs    map[string]map[Fed]bool // the sessions subscribed to each resource
}

// memberSetup is what one session set up on the process.
type memberSetup struct {
	level int // the rank of its last logging/setLevel; 0 before any
}

// NewProcessSetup is the setup of a process that no session uses yet; send writes a request of
// the process's own to it (on Leave), whose answer is dropped.
func NewProcessSetup(send func(method string, params json.RawMessage)) *ProcessSetup {
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

// setUp takes a request c that sets up the connection of s (setsUp), params as it would be
// written: it returns what to write, or reports that c was answered here, the process being
// set up so already (ProcessSetup.take).
func (a *Aggregator) setUp(c *call, params [][]byte) ([][]byte, bool) {
	ps, f := c.to.processSetup()
	if ps == nil {
		return params, false
	}
	set, here := ps.take(f, c.method, slices.Concat(params...))
	if !here {
		return [][]byte{set}, false
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
		ps.send("logging/setLevel", levelParams(level))
	}
	for _, uri := range unsubs {
		ps.send("resources/unsubscribe", rawjson.Marshal(map[string]string{"uri": uri}))
	}
}

// take looks at a request of the session of f that sets up the connection (setupMethods),
// params as the session would write it: it returns the params to write instead (the level of
// the sessions together), or reports that the process is set up so already, and the request
// is answered with an empty result without reaching it. A level that is none of the
// specification's goes as written (the server answers it), and changes nothing; a request
// of a session that is not a member (its use of the process ended) is answered.
func (ps *ProcessSetup) take(f Fed, method string, params json.RawMessage) (json.RawMessage, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	m := ps.members[f]
	if m == nil {
		return nil, true
	}
	if method == "logging/setLevel" {
		level, _ := rawjson.StringMember(params, "level")
		rank := era.LogRank(level)
		if rank == 0 {
			return params, false
		}
		m.level = rank
		merged, changed := ps.merged()
		switch {
		case !changed:
			return nil, true
		case merged != rank: // another session asks for more: the answer is this one's all the same
			return levelParams(merged), false
		}
		return params, false
	}
	uri, _ := rawjson.StringMember(params, "uri")
	if ps.subscribe(f, uri, method == "resources/subscribe") {
		return params, false
	}
	return nil, true
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
// level it asked for, or any when it asked for none (as the process logs unshared).
func (ps *ProcessSetup) logs(f Fed, rank int) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	m := ps.members[f]
	return m != nil && (m.level == 0 || rank >= m.level)
}

// subscribed reports whether the session of f is subscribed to uri.
func (ps *ProcessSetup) subscribed(f Fed, uri string) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.subs[uri][f]
}

// levelParams are the params of logging/setLevel to the level of rank.
func levelParams(rank int) json.RawMessage {
	return json.RawMessage(`{"level":` + strconv.Quote(era.LogLevel(rank)) + `}`)
}
