package shared

import (
	"fmt"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
)

// Turns. A legacy server's request for input (elicitation, sampling, roots) does not name the
// request it serves, so the shared process can route it to the right session only while the
// requests that may be asking are one session's. It learns which requests ask: a tool (or
// prompt; every resources/read is one) that was the only request in flight when the server
// asked asks, for good; the tools in flight when it could have been any of several are
// suspected of asking, until a call of theirs ends with no question asked meanwhile. Requests
// known or suspected to ask take turns: one session's go while no other session's are in
// flight, and wait otherwise, first come first served (a session whose turn it is queues
// behind any other already waiting, so that none waits forever). Every other request goes at
// once: a long call that never asks holds up no other session for long, and most servers
// never ask at all. The modern era asks inside the answer to the request itself, and needs
// none of this.
//
// A server's request goes to the session whose requests known to ask are in flight, else to
// the session of whatever input requests are in flight; when those are several sessions'
// (the first time a tool asks, during another session's calls), it is answered with an error
// instead of guessed.

// queued is a request waiting for its session's turn.
type queued struct {
	a *Attachment
	r *request
}

// waits reports whether a's request r waits for a's turn. Callers hold p.mu.
func (p *proc) waits(a *Attachment, r *request) bool {
	if !p.askers[r.askKey()] {
		return false
	}
	if len(p.queue) > 0 {
		return true
	}
	for b := range p.asking {
		if b != a {
			return true
		}
	}
	return false
}

// began notes a request sent to the server, key what it is known to ask by. Callers hold p.mu.
func (p *proc) began(c *relayed, key string) {
	c.key = key
	c.questions = p.questions
	if p.askers[c.key] {
		c.asks = true
		p.asking[c.a]++
	}
}

// ended notes a request answered, cancelled or dropped: one suspected of asking that asked
// nothing is not suspected any more. Callers hold p.mu.
func (p *proc) ended(c *relayed) {
	if c.asks {
		c.asks = false
		if p.asking[c.a]--; p.asking[c.a] <= 0 {
			delete(p.asking, c.a)
		}
	}
	if p.suspects[c.key] && p.questions == c.questions {
		delete(p.suspects, c.key)
		delete(p.askers, c.key)
	}
}

// asker is the session a server's request serves (route): the one whose requests known to ask
// are in flight, else the one whose input requests are; nil when none are (the request is
// asked outside any), and why when it cannot be told. The requests in flight it may serve are
// known to ask from then on. Callers hold p.mu.
func (p *proc) asker() (*Attachment, string) {
	if p.eraSeen == era.Modern {
		return nil, "" // it asks in its answers
	}
	var known, any []*relayed
	for _, c := range p.calls {
		switch {
		case c.asks:
			known = append(known, c)
		case c.key != "":
			any = append(any, c)
		}
	}
	from := known
	if len(from) == 0 {
		from = any
	}
	sessions := map[*Attachment]bool{}
	for _, c := range from {
		sessions[c.a] = true
		switch {
		case len(from) == 1: // it asked
			delete(p.suspects, c.key)
		case !p.askers[c.key]: // it may have
			p.suspects[c.key] = true
		}
		if !p.askers[c.key] {
			p.d.log.Info("the server asks its client during requests of this kind, or may: they take turns between sessions", "pid", p.child.PID(), "request", c.key)
			p.askers[c.key] = true
		}
		if !c.asks {
			c.asks = true
			p.asking[c.a]++
		}
	}
	switch len(sessions) {
	case 0:
		return nil, ""
	case 1:
		return from[0].a, ""
	}
	return nil, fmt.Sprintf("the request cannot be told apart between the %d sessions whose requests are in flight at the server (the legacy era does not say which request a server's request serves); such requests take turns between sessions from now on", len(sessions))
}

// next takes from the queue the requests whose turn has come: when no session's requests
// known to ask are in flight, those of the session first in the queue, in order. Callers hold
// p.mu; the requests are sent with sendAll once it is released.
func (p *proc) next() []*queued {
	if len(p.asking) > 0 || len(p.queue) == 0 {
		return nil
	}
	a := p.queue[0].a
	var turn, rest []*queued
	for _, q := range p.queue {
		if q.a == a {
			turn = append(turn, q)
		} else {
			rest = append(rest, q)
		}
	}
	p.queue = rest
	p.asking[a] += len(turn) // its turn from now: another session's request queues behind them
	return turn
}

// sendAll relays the requests next took from the queue; those of a session detached since are
// dropped, as a request written as it was detached is.
func (p *proc) sendAll(qs []*queued) {
	for _, q := range qs {
		p.mu.Lock()
		if p.asking[q.a]--; p.asking[q.a] <= 0 { // relay counts it again
			delete(p.asking, q.a)
		}
		if !q.a.served {
			p.mu.Unlock()
			continue
		}
		p.relay(q.a, q.r)
	}
}

// unqueue takes a cancelled request out of the queue; it reports whether it was there.
// Callers hold p.mu.
func (p *proc) unqueue(a *Attachment, id string) bool {
	for i, q := range p.queue {
		if q.a == a && q.r.id == id {
			p.queue = append(p.queue[:i], p.queue[i+1:]...)
			return true
		}
	}
	return false
}
