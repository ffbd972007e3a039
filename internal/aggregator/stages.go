package aggregator

import (
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
)

// The stages of the in-flight table (table.go): what each call waits for, and the transitions
// between them, each under the table's lock. table.go keeps the indexes and what every stage
// shares: add, answered, cancelled, take, sweep.

// stage is what a call waits for.
type stage uint8

const (
	// sent: written to its receiver (or being written), waiting for the answer.
	sent stage = iota
	// queued: a server's request to the client, waiting in the queue for the client to be
	// ready (queue.go).
	inQueue
	// held: the client's request for a key that is not serving, waiting for it to come back
	// (restart.go); not written anywhere yet.
	held
	// asking: the client's request to a modern server that asked for input, waiting for the
	// client's answers before it is sent again (fulfil.go).
	asking
	// standing: a modern client's subscriptions/listen, open until it is cancelled; not
	// counted as in flight, so that a drain does not wait for it (a modern server's listen is
	// its process's setup's, in no table: processlisten.go).
	standing
	// parked: a legacy server's request for input made outside any request of a modern
	// client's, waiting for the client's next request that can carry it (suspend.go).
	parked
	// fanning: the client's request that the aggregator answers from several servers'
	// answers (logging/setLevel, tasks/list: fanOut), whose legs are requests of the
	// aggregator's own, each in the table; the client's cancellation ends them.
	fanning
)

var stageNames = [...]string{sent: "sent", inQueue: "queued", held: "held", asking: "asking the client", standing: "standing", parked: "parked", fanning: "fanning out"}

func (st stage) String() string { return stageNames[st] }

// deliver moves a request to the client from queued to sent, as it is written; it reports
// false when it is no longer pending (its sender cancelled it, or went down, while it waited).
func (t *table) deliver(c *call) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byTo[c.toID] != c {
		return false
	}
	c.stage = sent
	return true
}

// hold records the client's call c for the key, which is not serving: held until the key
// serves again (release), for at most wait, then timeout answers it; a cancellation of the
// client takes it out, and it is never sent.
func (t *table) hold(c *call, key string, wait time.Duration, timeout func(*call)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	c.seq, c.stage, c.key, c.toID, c.token = t.seq, held, key, "", ""
	t.held[c] = struct{}{}
	t.byFrom[fromKey{nil, c.fromID}] = c
	c.deadline = time.AfterFunc(wait, func() {
		if t.take(c) {
			timeout(c)
		}
	})
}

// release removes and returns the calls held for key, in the order they were made.
func (t *table) release(key string) []*call {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.heldForLocked(key)
	for _, c := range out {
		t.removeLocked(c)
	}
	return out
}

// heldFor returns the calls held for key, in the order they were made, and leaves them in the
// table: whoever takes one (take) decides it.
func (t *table) heldFor(key string) []*call {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.heldForLocked(key)
}

func (t *table) heldForLocked(key string) []*call {
	var out []*call
	for c := range t.held {
		if c.key == key {
			out = append(out, c)
		}
	}
	sortBySeq(out)
	return out
}

// ask records the client's call c, whose leg a modern server answered with input_required, as
// waiting for the client's input (fulfil): the client's cancellation finds it. It reports false
// when the client's ID is taken by another call meanwhile.
func (t *table) ask(c *call) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := fromKey{nil, c.fromID}
	if t.byFrom[k] != nil {
		return false
	}
	c.stage = asking // its ID of the leg and its token are no longer in the table
	t.byFrom[k] = c
	return true
}

// streams are the modern client's open subscriptions/listen streams, in the order they were
// opened.
func (t *table) streams() []*call {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*call
	for k, c := range t.byFrom {
		if k.from == nil && c.stream != nil {
			out = append(out, c)
		}
	}
	sortBySeq(out)
	return out
}

// keep records the client's call c in stage st under the client's ID alone (it has no ID of
// ours at a receiver): a subscriptions/listen (standing), open until it is cancelled; a
// request the aggregator answers from several servers' answers (fanning, fanOut), until it is
// answered or cancelled.
func (t *table) keep(c *call, st stage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	c.seq, c.stage = t.seq, st
	t.byFrom[fromKey{nil, c.fromID}] = c
}

// Suspensions and parked requests (suspend.go) live under the table's lock too, beside the
// calls they hold.

// attribute is the client's request in flight to s that a request of s for input serves: the
// oldest that can take input, one not suspended first; nil when there is none.
func (t *table) attribute(s *server) *call {
	t.mu.Lock()
	defer t.mu.Unlock()
	var best *call
	before := func(c, d *call) bool { // c is taken before d
		if (c.suspended == nil) != (d.suspended == nil) {
			return c.suspended == nil
		}
		return c.seq < d.seq
	}
	for _, c := range t.byTo {
		if c.to != s || c.own() || c.from != nil || c.req == nil || c.stage != sent || !era.InputMethods[c.method] {
			continue
		}
		if c.turn != nil && !c.turn.sent.Load() {
			continue // waiting for its turn (turns.go): not at the server
		}
		if best == nil || before(c, best) {
			best = c
		}
	}
	return best
}

// suspend adds the server's request p to the suspension of c, made now (first) when c is not
// suspended yet: c's ID with the client is returned, since the client's request is answered
// with the InputRequiredResult. Nil when c is no longer in flight.
func (t *table) suspend(c *call, p pending, ttl time.Duration) (sus *suspension, clientID jsonrpc.ID, first bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byTo[c.toID] != c {
		return nil, clientID, false
	}
	if sus = c.suspended; sus != nil {
		sus.waiting = append(sus.waiting, p)
		return sus, clientID, false
	}
	sus = &suspension{call: c, method: c.method, digest: era.ParamsDigest(c.method, c.req.Params), asked: map[string]pending{}}
	sus.ask(p)
	sus.round(ttl)
	c.suspended = sus
	t.suspended[sus.id] = sus
	delete(t.byFrom, fromKey{nil, c.fromID}) // answered: the client cannot cancel it any more
	return sus, c.fromID, true
}

// parkSuspension registers a suspension that holds no call (a -32042's URL elicitations, or
// parked requests given to the client).
func (t *table) parkSuspension(sus *suspension) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.suspended[sus.id] = sus
}

// park moves a server's request to the client, in the table, to parked with its params; false
// when it is no longer pending.
func (t *table) park(c *call, params json.RawMessage) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.has(c) {
		return false
	}
	t.count(c, -1)
	c.stage, c.params = parked, params
	t.count(c, 1)
	return true
}

// unpark returns the parked requests, in the order they came, and takes them out of the
// table.
func (t *table) unpark() []*call {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []*call
	for _, c := range t.byTo {
		if c.stage == parked {
			out = append(out, c)
		}
	}
	sortBySeq(out)
	for _, c := range out {
		t.removeLocked(c)
	}
	return out
}

// give puts a request taken out by unpark back in the table as given to the client (in an
// InputRequiredResult); false when its server went down meanwhile.
func (t *table) give(c *call) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.from.gate == gateClosed {
		return false
	}
	c.stage = sent
	t.byTo[c.toID] = c
	t.byFrom[fromKey{c.from, c.fromID}] = c
	t.count(c, 1)
	return true
}

// claim takes the suspension id for a retry: nil when there is none (taken, expired, gone).
func (t *table) claim(id string) *suspension {
	t.mu.Lock()
	defer t.mu.Unlock()
	sus := t.suspended[id]
	delete(t.suspended, id)
	return sus
}

// resume makes the retry req stand for sus's call: the client's cancellation and progress
// token are the retry's. When the server answered meanwhile, outcome says the retry is to be
// answered with it; when requests are still to be asked, again says so, and sus is suspended
// for another round.
func (t *table) resume(sus *suspension, req *jsonrpc.Request, token []byte, ttl time.Duration) (again, outcome bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := sus.call
	if sus.done {
		for _, p := range sus.asked {
			t.removeLocked(p.call)
		}
		for _, p := range sus.waiting {
			t.removeLocked(p.call)
		}
		return false, true
	}
	for _, p := range sus.waiting {
		sus.ask(p)
	}
	sus.waiting = nil
	c.fromID, c.req = req.ID, req
	if token != nil {
		c.fromToken = append([]byte(nil), token...)
	}
	if len(sus.asked) > 0 {
		sus.round(ttl)
		t.suspended[sus.id] = sus
		return true, false
	}
	c.suspended = nil
	if t.byTo[c.toID] == c {
		t.byFrom[fromKey{nil, c.fromID}] = c
	}
	return false, false
}

// outcome takes the server's answer to c: kept in its suspension when c is suspended (held);
// else the client's ID to answer under.
func (t *table) outcome(c *call, result, errObj json.RawMessage) (id jsonrpc.ID, held bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if sus := c.suspended; sus != nil {
		sus.done, sus.result, sus.errObj = true, result, errObj
		return id, true
	}
	return c.fromID, false
}

// expire removes sus when it is still waiting for the client, and returns the server's
// requests it held, and its call.
func (t *table) expire(sus *suspension) (asked []pending, c *call, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.suspended[sus.id] != sus {
		return nil, nil, false
	}
	delete(t.suspended, sus.id)
	for _, p := range sus.asked {
		asked = append(asked, p)
	}
	return append(asked, sus.waiting...), sus.call, true
}

// suspendedCall reports whether c waits for the client's input (its progress has no request
// to go to).
func (t *table) suspendedCall(c *call) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return c.suspended != nil
}
