package aggregator

import (
	"fmt"
	"slices"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// Turns. A legacy server's request for input (elicitation, sampling, roots) does not name the
// request it serves, so the shared process can route it to the right session only while the
// requests that may be asking are one session's. The process's setup learns which requests
// ask, from the sessions' calls in flight at it: a tool (or prompt; every resources/read is
// one) that was the only request in flight when the server asked asks, for good; the tools in
// flight when it could have been any of several are suspected of asking, until a call of
// theirs ends with no question asked meanwhile. Requests known or suspected to ask take
// turns: one session's go while no other session's are in flight, and wait otherwise, in
// their session's table, first come first served (a session whose turn it is queues behind
// any other already waiting, so that none waits forever). Every other request goes at once:
// a long call that never asks holds up no other session for long, and most servers never ask
// at all. The modern era asks inside the answer to the request itself, and needs none of
// this; a process of the session's own has one session, whose every question is its own.
//
// A server's request goes to the session whose requests known to ask are in flight, else to
// the session of whatever input requests are in flight (Asker); when those are several
// sessions' (the first time a tool asks, during another session's calls), it is answered with
// an error instead of guessed.

// turn is a session's request to a shared legacy process during which the server may ask its
// client (era.InputMethods), at the server or waiting for its session's turn to go. Its
// fields are guarded by the setup's lock.
type turn struct {
	ps        *ProcessSessions
	member    any
	id        string // its ID at the server
	key       askKey // what it is known to ask by
	asks      bool   // it is of the requests known to ask, and counted in ps.asking
	questions uint64 // ps.questions when it was sent
	send      func() // writes it while it waits for its session's turn; nil once it went
	over      bool   // answered, cancelled or given up (end)
}

// askKey is what a request during which a server may ask (era.InputMethods) is known to ask
// by: its method and the server's name of its tool or prompt (a resources/read is one,
// whatever its resource).
type askKey struct{ method, name string }

func (k askKey) String() string { return k.method + " " + k.name }

// keyOf is what c, a request during which its server may ask, is known to ask by: its subject
// is the server's name of its tool or prompt (callNamed), or a resource's URI.
func keyOf(c *call) askKey {
	if c.method == "resources/read" {
		return askKey{method: c.method}
	}
	return askKey{c.method, c.subject}
}

// takeTurn takes c, a request of the session of f to the process during which the server may
// ask, in the table and about to be written: it reports whether it goes now (the caller writes
// it), or waits for its session's turn, when whoever ends the turn before it writes it with
// send. The turn ends with c's answer, or with its end without one (c.unanswered).
func (ps *ProcessSessions) takeTurn(f any, c *call, send func()) bool {
	key := keyOf(c)
	ps.mu.Lock()
	if ps.members[f] == nil {
		ps.mu.Unlock()
		return true // its session's use of the process ended: the process drops it
	}
	t := &turn{ps: ps, member: f, id: c.toID, key: key}
	c.turn = t
	if !ps.waits(f, key) {
		ps.began(t)
		ps.mu.Unlock()
		return true
	}
	t.send = send
	ps.queue = append(ps.queue, t)
	ps.mu.Unlock()
	return false
}

// waits reports whether a request of the session of f known to ask by key waits for the
// session's turn. Callers hold ps.mu.
func (ps *ProcessSessions) waits(f any, key askKey) bool {
	if !ps.askers[key] {
		return false
	}
	if len(ps.queue) > 0 {
		return true
	}
	for g := range ps.asking {
		if g != f {
			return true
		}
	}
	return false
}

// began notes that t is sent to the server. Callers hold ps.mu.
func (ps *ProcessSessions) began(t *turn) {
	t.send = nil
	t.questions = ps.questions
	ps.atServer[t] = true
	if ps.askers[t.key] {
		t.asks = true
		ps.asking[t.member]++
	}
}

// end notes that t's request was answered, cancelled or given up: one suspected of asking
// that asked nothing is not suspected any more, and the requests whose turn comes then go. It
// reports whether the request never reached the server (it waited for its turn): no
// cancellation of it is to be sent.
func (t *turn) end() (unsent bool) {
	ps := t.ps
	ps.mu.Lock()
	if t.over {
		ps.mu.Unlock()
		return false
	}
	t.over = true
	if t.send != nil {
		unsent = true
		ps.queue = slices.DeleteFunc(ps.queue, func(q *turn) bool { return q == t })
	} else {
		ps.ended(t)
	}
	next := ps.next()
	ps.mu.Unlock()
	sendAll(next)
	return unsent
}

// ended takes t, sent, out of what is at the server. Callers hold ps.mu.
func (ps *ProcessSessions) ended(t *turn) {
	delete(ps.atServer, t)
	if t.asks {
		t.asks = false
		if ps.asking[t.member]--; ps.asking[t.member] <= 0 {
			delete(ps.asking, t.member)
		}
	}
	if ps.suspects[t.key] && ps.questions == t.questions {
		delete(ps.suspects, t.key)
		delete(ps.askers, t.key)
	}
}

// next takes from the queue the requests whose turn has come, as sent: when no session's
// requests known to ask are at the server, those of the session first in the queue, in
// order. Callers hold ps.mu; what it returns is sent with sendAll once it is released.
func (ps *ProcessSessions) next() []func() {
	if len(ps.asking) > 0 || len(ps.queue) == 0 {
		return nil
	}
	f := ps.queue[0].member
	var sends []func()
	ps.queue = slices.DeleteFunc(ps.queue, func(t *turn) bool {
		if t.member != f {
			return false
		}
		sends = append(sends, t.send)
		ps.began(t) // its session's turn from now: another session's request queues behind it
		return true
	})
	return sends
}

// sendAll writes the requests next took from the queue.
func sendAll(sends []func()) {
	for _, send := range sends {
		send()
	}
}

// leaveTurns takes the requests of the session of f out of the turns, as it leaves: those at
// the server still (none, unless one left the session's table without its answer and without
// a word to the setup) are cancelled there, so that no question of a request nobody waits for
// is taken for another session's; the requests whose turn comes then go. Callers hold ps.mu;
// what it returns is done once it is released.
func (ps *ProcessSessions) leaveTurns(f any) []func() {
	var do []func()
	ps.queue = slices.DeleteFunc(ps.queue, func(t *turn) bool {
		if t.member == f {
			t.over = true
			return true
		}
		return false
	})
	for t := range ps.atServer {
		if t.member == f {
			t.over = true
			ps.ended(t)
			do = append(do, func() { ps.write(stdio.Cancelled(t.id, SessionGone)...) })
		}
	}
	return append(do, ps.next()...)
}

// Asker is the member whose request a server's request for input serves (it names no task of
// a session's): the session whose requests known to ask are at the server, else the one whose
// input requests are; nil when none are (it asks outside any request), and why when it cannot
// be told. The requests at the server it may serve are known to ask from then on.
func (ps *ProcessSessions) Asker() (any, string) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.questions++
	var known, some []*turn
	for t := range ps.atServer {
		if t.asks {
			known = append(known, t)
		} else {
			some = append(some, t)
		}
	}
	from := known
	if len(from) == 0 {
		from = some
	}
	sessions := map[any]bool{}
	for _, t := range from {
		sessions[t.member] = true
		switch {
		case len(from) == 1: // it asked
			delete(ps.suspects, t.key)
		case !ps.askers[t.key]: // it may have
			ps.suspects[t.key] = true
		}
		if !ps.askers[t.key] {
			ps.log.Info("the server asks its client during requests of this kind, or may: they take turns between sessions", "request", t.key.String())
			ps.askers[t.key] = true
		}
		if !t.asks {
			t.asks = true
			ps.asking[t.member]++
		}
	}
	switch len(sessions) {
	case 0:
		return nil, ""
	case 1:
		return from[0].member, ""
	}
	return nil, fmt.Sprintf("the request cannot be told apart between the %d sessions whose requests are in flight at the server (the legacy era does not say which request a server's request serves); such requests take turns between sessions from now on", len(sessions))
}

// turnsOf is the setup whose turns the requests of s take, and the session's member of it: a
// shared legacy process's (processSetup); nil for a process of the session's own, and for a
// modern server.
func (s *server) turnsOf(method string) (*ProcessSessions, Fed) {
	if !era.InputMethods[method] {
		return nil, nil
	}
	return s.processSetup()
}

// withdrawn ends the turn of c, a request to a shared legacy process that is cancelled or
// given up, and reports whether c never reached the server (it waited for its turn): no
// cancellation of it is to be sent.
func (c *call) withdrawn() bool {
	return c.turn != nil && c.turn.end()
}
