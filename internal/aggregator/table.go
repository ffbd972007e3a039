package aggregator

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The in-flight table holds every request that crosses the aggregator, in both directions,
// and the aggregator's own requests to servers: one entry (a call) from the moment it is sent
// until it is answered, cancelled, or its server goes down. It is modelled on the go-sdk's
// internal/jsonrpc2 (inFlightState): one lock, and lookups by each key a message can carry.
//
//	an answer from the receiver     byTo:    the ID the receiver saw (one of ours)
//	a cancellation from the sender  byFrom:  (sender, the sender's ID)
//	progress from the receiver      byToken: (receiver, the token the receiver was given)
//	a server going down             sweep:   every call it sends or receives, and its tasks
//	a server drained by a reload    drain:   a signal once it has nothing in flight
//
// Progress tokens are symmetric: a request's token passes to the receiver unchanged unless
// another request in flight to the same receiver already uses it; then the receiver gets a
// token of ours ("agg-p-N") and its progress goes back to the sender with the sender's own.

// idPrefix starts the IDs of every request the aggregator sends: strings, so that they never
// meet the numeric IDs of the SDK's session with the client.
const idPrefix = "agg-"

// tokenPrefix starts the progress tokens the aggregator gives when a token is taken.
const tokenPrefix = "agg-p-"

// call is one request in flight. Endpoints are servers; nil is the client.
type call struct {
	from   *server    // the sender: a server, or nil for the client (and for our own requests)
	fromID jsonrpc.ID // the sender's ID for it
	to     *server    // the receiver: a server, or nil for the client
	toID   string     // the ID the receiver sees: one of ours

	method string
	// doing says what it does, for error messages, with %q standing for subject (formatted
	// only when a message needs it, not on every call): `calling tool %q`, "search".
	doing, subject string
	token          string // the key (tokenKey) of the progress token the receiver was given; "" for none
	// fromToken is the sender's own progress token, as written, when the receiver was given
	// another one; nil when it passed unchanged.
	fromToken []byte
	task      bool // a tools/call that asked for a task: its answer names the task's owner
	// done takes the answer to a request of the aggregator's own (errObj is a JSON-RPC error
	// object, also when the server went down); nil for a request relayed between the client
	// and a server.
	done func(result, errObj json.RawMessage)
	// delivered is set once a request to the client was written (not just queued for it).
	delivered bool
	// req is the client's request a call relays to a server: should its process turn out dead
	// when it is written, the request goes where hold sends it (handlers.go).
	req *jsonrpc.Request
	// standing marks a request that stays open (a modern child's subscriptions/listen): it is
	// not counted in its server's inFlight, so that a drain does not wait for it.
	standing bool
	// mrtr is set on the legs of a legacy client's request to a modern child that may answer
	// input_required (childera.go); nil otherwise.
	mrtr *inputChain

	seq uint64 // the order it was added in
	// suspended is set while the client's request, answered with an InputRequiredResult,
	// waits for its retry (mrtr.go); guarded by the table's lock.
	suspended *suspension
	// logLevel is the rank (logLevels) of the io.modelcontextprotocol/logLevel of a modern
	// client's request: the server's log messages reach the client while such a request is
	// in flight to it; 0 for none.
	logLevel int

	// For the debug log.
	label, value string
	start        time.Time
	args         int
}

// what says what c does, for error messages: `calling tool "search"`.
func (c *call) what() string {
	if c.subject == "" && !strings.Contains(c.doing, "%") {
		return c.doing
	}
	return fmt.Sprintf(c.doing, c.subject)
}

// own reports whether the aggregator itself waits for the answer.
func (c *call) own() bool { return c.done != nil }

type fromKey struct {
	from *server
	id   jsonrpc.ID
}

type tokenKey struct {
	to    *server
	token string
}

// table is the in-flight table.
type table struct {
	mu      sync.Mutex
	seq     uint64
	byTo    map[string]*call
	byFrom  map[fromKey]*call
	byToken map[tokenKey]*call
	tasks   map[string]*server // the server that owns each task, by task ID
	// suspended are the client's requests waiting for its input, by suspension ID (mrtr.go).
	suspended map[string]*suspension
}

// gate is what a server process takes, decided under the table's lock (server.gate): the
// roster's transitions set it (roster.go), add reads it, so that a call is either in the table
// when the gate closes, and ends with the process, or refused, never lost between.
type gate int

const (
	gateOpen     gate = iota
	gateDraining      // a reload stops it: the client's calls are refused (addDraining)
	gateClosed        // it went down: everything is refused (addRefused)
)

func newTable() *table {
	return &table{byTo: map[string]*call{}, byFrom: map[fromKey]*call{}, byToken: map[tokenKey]*call{}, tasks: map[string]*server{},
		suspended: map[string]*suspension{}}
}

// addResult says whether add recorded a call.
type addResult int

const (
	addOK addResult = iota
	// addRefused: its receiver is a server that is down, or its sender is (a server's request
	// read after its sweep): the sweep of a server marks it down first, so nothing is added
	// after it.
	addRefused
	// addDraining: a request of the client to a server that a reload stops. Decided here,
	// under the lock busy takes too: a call is either counted by the drain or refused.
	addDraining
)

// add records c under a new ID of ours, with the progress token it carries (nil for none).
// When another call to the same receiver already uses the token, c gets a token of ours,
// returned encoded (the caller puts it in the params), and c.fromToken keeps the sender's.
func (t *table) add(c *call, token []byte) (newToken []byte, res addResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.to != nil && c.to.gate == gateClosed || c.from != nil && c.from.gate == gateClosed {
		return nil, addRefused
	}
	if c.to != nil && c.from == nil && !c.own() && c.to.gate == gateDraining {
		return nil, addDraining
	}
	t.seq++
	c.seq = t.seq
	c.toID = idPrefix + strconv.FormatUint(t.seq, 10)
	t.byTo[c.toID] = c
	for _, s := range [2]*server{c.to, c.from} {
		if s != nil && !c.standing {
			s.inFlight++
		}
	}
	if !c.own() {
		t.byFrom[fromKey{c.from, c.fromID}] = c
	}
	if key := tokenKeyOf(token); key != "" {
		if t.byToken[tokenKey{c.to, key}] != nil {
			newToken = []byte(strconv.Quote(tokenPrefix + strconv.FormatUint(t.seq, 10)))
			c.fromToken = append([]byte(nil), token...)
			key = tokenKeyOf(newToken)
		}
		c.token = key
		t.byToken[tokenKey{c.to, key}] = c
	}
	return newToken, addOK
}

func (t *table) removeLocked(c *call) {
	if t.byTo[c.toID] != c {
		return
	}
	delete(t.byTo, c.toID)
	if !c.own() && t.byFrom[fromKey{c.from, c.fromID}] == c {
		delete(t.byFrom, fromKey{c.from, c.fromID})
	}
	if c.token != "" && t.byToken[tokenKey{c.to, c.token}] == c {
		delete(t.byToken, tokenKey{c.to, c.token})
	}
	for _, s := range [2]*server{c.to, c.from} {
		if s == nil || c.standing {
			continue
		}
		if s.inFlight--; s.inFlight == 0 && s.idle != nil {
			close(s.idle)
			s.idle = nil
		}
	}
}

// answered removes and returns the call that receiver answered under id; nil when there is
// none. An answer only ever completes a call sent to the one answering: an ID made up or
// copied from another server matches nothing.
func (t *table) answered(receiver *server, id string) *call {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.byTo[id]
	if c == nil || c.to != receiver {
		return nil
	}
	t.removeLocked(c)
	return c
}

// cancelled removes and returns the call that sender sent as id; nil when there is none.
func (t *table) cancelled(sender *server, id jsonrpc.ID) *call {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.byFrom[fromKey{sender, id}]
	if c != nil {
		t.removeLocked(c)
	}
	return c
}

// progress returns the call in flight to receiver with the progress token (as written in a
// notification); nil when receiver was given no such token.
func (t *table) progress(receiver *server, token []byte) *call {
	key := tokenKeyOf(token)
	if key == "" {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byToken[tokenKey{receiver, key}]
}

// take removes c; it reports whether c was still in flight.
func (t *table) take(c *call) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byTo[c.toID] != c {
		return false
	}
	t.removeLocked(c)
	return true
}

// deliver marks a request to the client as written; it reports false when it is no longer in
// flight (its sender cancelled it, or went down, while it waited).
func (t *table) deliver(c *call) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byTo[c.toID] != c {
		return false
	}
	c.delivered = true
	return true
}

// sweep closes the gate of s, which went down, and removes and returns every call it sends or
// receives; its tasks are forgotten. Nothing can be added for s afterwards.
func (t *table) sweep(s *server) []*call {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.gate = gateClosed
	var gone []*call
	for _, c := range t.byTo {
		if c.to == s || c.from == s && !c.own() {
			gone = append(gone, c)
		}
	}
	for _, c := range gone {
		t.removeLocked(c)
	}
	for id, owner := range t.tasks {
		if owner == s {
			delete(t.tasks, id)
		}
	}
	return gone
}

// drain stops the client's calls to s (a reload stops it) and returns a channel closed once s
// has nothing in flight: no call to it, no request of its to the client.
func (t *table) drain(s *server) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.gate == gateOpen {
		s.gate = gateDraining
	}
	if s.inFlight == 0 {
		idle := make(chan struct{})
		close(idle)
		return idle
	}
	if s.idle == nil {
		s.idle = make(chan struct{})
	}
	return s.idle
}

// wantsLog reports whether a log message of s (its notifications/message params) is for a
// modern client: while a request of the client's with a logLevel at or below the message's
// level is in flight to s ("notifications/message is request-scoped", logging.mdx).
func (t *table) wantsLog(s *server, params json.RawMessage) bool {
	level, _ := rawjson.StringMember(params, "level")
	rank := logLevels[level]
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.byTo {
		if c.to == s && c.logLevel > 0 && rank >= c.logLevel && c.suspended == nil {
			return true
		}
	}
	return false
}

// setTask notes that s owns the task id.
func (t *table) setTask(id string, s *server) {
	if id == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.gate != gateClosed {
		t.tasks[id] = s
	}
}

// task returns the server that owns the task id; nil when none is known.
func (t *table) task(id string) *server {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tasks[id]
}

// tokenKeyOf is the identity of a progress token (a string or a number) however it is written:
// a peer may encode the token differently when it echoes it. "" when v is no token.
func tokenKeyOf(v []byte) string {
	if len(v) == 0 {
		return ""
	}
	if v[0] == '"' {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return ""
		}
		return "s" + s
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return ""
	}
	return "n" + strconv.FormatFloat(f, 'g', -1, 64)
}
