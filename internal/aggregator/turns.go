package aggregator

import (
	"fmt"
	"slices"
	"sync/atomic"

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
// client (era.InputMethods): made before the table has the call (newTurn, so that whoever
// finds the call there finds its turn), then at the server or waiting for its session's turn
// to go. Its fields are guarded by the setup's lock, but sent, which the table reads, and writing.
type turn struct {
	ps        *ProcessSessions
	member    any
	key       askKey        // what it is known to ask by
	id        string        // its ID at the server, once the table had it
	asks      bool          // it is of the requests known to ask, and counted in ps.asking
	questions uint64        // ps.questions when it went
	queued    bool          // it waits for its session's turn, in ps.queue
	pending   *pendingWrite // its request, written once its turn came (takeTurn); nil unless it waited
	over      bool          // answered, cancelled or given up (end)
	// at is its place in ps.atServer, plus one: 0 while it is not at the server.
	at int
	// cancel is its cancellation, when it ended while it was being written: sent once the
	// write is done (wrote).
	cancel func()
	// writing is notWriting, beingWritten (takeTurn, sendAll, until wrote), or cancelWaits
	// (it ended meanwhile: cancel waits for the write). An atomic, so that the writer that
	// says it wrote takes no lock unless a cancellation waits for it: a request that goes at
	// once, the usual case, takes the setup's lock once to go and once to end.
	writing atomic.Int32
	// sent says it is written to the server, or being written: a cancellation of it is to
	// be sent, and a question of the server's may be its (table.attribute).
	sent atomic.Bool
}

// The states of turn.writing.
const (
	notWriting int32 = iota
	beingWritten
	cancelWaits
)

// pendingWrite is a request to a server, written now or once its session's turn comes: the
// connection it is written to, or the shared process that takes it (fed, whose requests are
// not written to the connection: Fed.Request), its ID and method, the message, and what is
// told should the write fail (what Send takes). A request that goes at once, the usual case,
// needs no function made to write it later.
type pendingWrite struct {
	conn       *stdio.Conn
	fed        Fed
	id, method string
	failed     stdio.WriteFailure
	msg        [][]byte
}

// write writes the request, held while the burst held lasts (nil: at once).
func (w *pendingWrite) write(held *stdio.Burst) {
	if w.fed != nil {
		w.fed.Request(held, w.failed, w.id, w.method, w.msg)
		return
	}
	w.conn.SendHeldBy(held, w.failed, w.msg...)
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

// newTurn is the turn of c, a request of the session of f to the process during which the
// server may ask, before the table has it.
func (ps *ProcessSessions) newTurn(f any, c *call) *turn {
	return &turn{ps: ps, member: f, key: keyOf(c)}
}

// takeTurn takes t, the turn of c, in the table now and about to be written: it reports
// whether it goes now (the caller writes it, and then says so: wrote), or not: it waits for its
// session's turn, and whoever ends the turn before it writes it with write; or it ended already
// (cancelled or given up meanwhile). The turn ends with c's answer, or with its end without one
// (c.unanswered, c.cancelAtServer).
func (ps *ProcessSessions) takeTurn(t *turn, c *call, write pendingWrite) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	t.id = c.toID
	switch {
	case t.over:
		return false
	case ps.members[t.member] == nil:
		t.writing.Store(beingWritten)
		t.sent.Store(true)
		return true // its session's use of the process ended: the process drops it
	case ps.waits(t.member, t.key):
		t.pending, t.queued = new(pendingWrite), true // allocated here alone: most requests go at once
		*t.pending = write
		ps.queue = append(ps.queue, t)
		return false
	}
	ps.began(t)
	t.writing.Store(beingWritten)
	t.sent.Store(true)
	return true
}

// wrote says that t's request was written (takeTurn, sendAll): a cancellation of it that came
// meanwhile is sent now, after it.
func (t *turn) wrote() {
	if t.writing.CompareAndSwap(beingWritten, notWriting) {
		return // no cancellation came meanwhile
	}
	ps := t.ps
	ps.mu.Lock() // the cancellation was set before writing said so (waitForWrite)
	t.writing.Store(notWriting)
	cancel := t.cancel
	t.cancel = nil
	ps.mu.Unlock()
	if cancel != nil {
		ps.cancelled(cancel)
	}
}

// waitForWrite leaves cancel to be sent by the writer of t's request once it wrote it (wrote),
// and reports whether it did: false when t is not being written (its write is done, or it never
// began). Callers hold ps.mu.
func (t *turn) waitForWrite(cancel func()) bool {
	t.cancel = cancel
	if t.writing.CompareAndSwap(beingWritten, cancelWaits) {
		return true
	}
	t.cancel = nil
	return false
}

// waits reports whether a request of the session of f known to ask by key waits for the
// session's turn. Callers hold ps.mu.
func (ps *ProcessSessions) waits(f any, key askKey) bool {
	if !ps.askers[key] {
		return false
	}
	if len(ps.queue) > 0 || ps.cancelling > 0 {
		return true // behind those waiting, and behind a cancellation on its way (next)
	}
	for g := range ps.asking {
		if g != f {
			return true
		}
	}
	return false
}

// began notes that t goes to the server. Callers hold ps.mu.
func (ps *ProcessSessions) began(t *turn) {
	t.questions = ps.questions
	ps.atServer = append(ps.atServer, t)
	t.at = len(ps.atServer)
	if ps.askers[t.key] {
		t.asks = true
		ps.asking[t.member]++
	}
}

// end notes that t's request was answered, cancelled or given up: one suspected of asking
// that asked nothing is not suspected any more, and the requests whose turn comes then go,
// after cancel (the cancellation of t's request at the server, nil for none), which is sent
// only when the request reached the server, after it (a request being written is cancelled
// once it is written: wrote). A request that waited for its turn, or that its turn came to
// but was not written yet, never reaches it.
func (t *turn) end(cancel func()) {
	ps := t.ps
	ps.mu.Lock()
	if t.over {
		ps.mu.Unlock()
		return
	}
	t.over = true
	switch {
	case t.queued:
		t.queued = false
		ps.queue = slices.DeleteFunc(ps.queue, func(q *turn) bool { return q == t })
	case t.at > 0:
		ps.ended(t)
	}
	if cancel != nil && t.sent.Load() {
		ps.cancelling++ // no request goes before it (next)
		if t.waitForWrite(cancel) {
			ps.mu.Unlock()
			return
		}
		ps.mu.Unlock()
		ps.cancelled(cancel)
		return
	}
	next := ps.next()
	ps.mu.Unlock()
	sendAll(next)
}

// cancelled sends the cancellation cancel of a turn's request (end counted it), and then the
// requests whose turn came meanwhile.
func (ps *ProcessSessions) cancelled(cancel func()) {
	cancel()
	ps.mu.Lock()
	ps.cancelling--
	next := ps.next()
	ps.mu.Unlock()
	sendAll(next)
}

// ended takes t out of what is at the server. Callers hold ps.mu.
func (ps *ProcessSessions) ended(t *turn) {
	last := ps.atServer[len(ps.atServer)-1]
	ps.atServer[t.at-1], last.at = last, t.at
	ps.atServer[len(ps.atServer)-1] = nil
	ps.atServer, t.at = ps.atServer[:len(ps.atServer)-1], 0
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

// next takes from the queue the requests whose turn has come: when no session's requests
// known to ask are at the server and no cancellation of one is on its way there, those of the
// session first in the queue, in order. Callers hold ps.mu; what it returns is written with
// sendAll once it is released.
func (ps *ProcessSessions) next() []*turn {
	if len(ps.asking) > 0 || ps.cancelling > 0 || len(ps.queue) == 0 {
		return nil
	}
	f := ps.queue[0].member
	var turns []*turn
	ps.queue = slices.DeleteFunc(ps.queue, func(t *turn) bool {
		if t.member != f {
			return false
		}
		t.queued = false
		turns = append(turns, t)
		ps.began(t) // its session's turn from now: another session's request queues behind it
		return true
	})
	return turns
}

// sendAll writes the requests next took from the queue, but those that ended meanwhile.
func sendAll(turns []*turn) {
	for _, t := range turns {
		t.ps.mu.Lock()
		goes := !t.over
		if goes {
			t.writing.Store(beingWritten)
			t.sent.Store(true)
		}
		t.ps.mu.Unlock()
		if goes {
			func() {
				defer t.wrote() // whatever the write does: a cancellation waits for it
				t.pending.write(nil)
			}()
		}
	}
}

// leaveTurns takes the requests of the session of f out of the turns, as it leaves: those at
// the server still (none, unless one left the session's table without its answer and without
// a word to the setup) are cancelled there, so that no question of a request nobody waits for
// is taken for another session's (one being written once it is written, as end does). Callers
// hold ps.mu; it returns what writes the other cancellations (nil for none; counted in
// ps.cancelling, for ps.cancelled) and the requests whose turn comes then, for once it is
// released.
func (ps *ProcessSessions) leaveTurns(f any) (cancel func(), next []*turn) {
	var cancels []string
	ps.queue = slices.DeleteFunc(ps.queue, func(t *turn) bool {
		if t.member == f {
			t.over, t.queued = true, false
			return true
		}
		return false
	})
	for _, t := range slices.Clone(ps.atServer) { // ended takes each out
		if t.member != f {
			continue
		}
		t.over = true
		ps.ended(t)
		id := t.id
		switch {
		case t.waitForWrite(func() { ps.write(stdio.Cancelled(id, SessionGone)...) }):
			ps.cancelling++ // cancelled once it is written (wrote), as end does
		case t.sent.Load():
			cancels = append(cancels, t.id)
		}
	}
	if len(cancels) > 0 {
		slices.Sort(cancels)
		ps.cancelling++
		cancel = func() {
			for _, id := range cancels {
				ps.write(stdio.Cancelled(id, SessionGone)...)
			}
		}
	}
	return cancel, ps.next()
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
	for _, t := range ps.atServer {
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

// turnsOf is the setup whose turns the requests of method to s take, where fed is the
// session's member of it (s.fed(): nil for a process of the session's own): a shared legacy
// process's (processSetup); nil for a process of the session's own, and for a modern server.
func (s *server) turnsOf(method string, fed Fed) *ProcessSessions {
	if !era.InputMethods[method] {
		return nil
	}
	return s.setupOf(fed)
}

// cancelAtServer sends the cancellation of c, a request to a server, with cancel, unless its
// turn kept it from the server (turns.go: it never reached it), and ends its turn (then, so that
// the next session's requests follow the cancellation).
func (c *call) cancelAtServer(cancel func()) {
	if c.turn == nil {
		cancel()
		return
	}
	c.turn.end(cancel)
}
