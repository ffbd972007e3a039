package aggregator

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// The in-flight table holds every piece of pending work, in both directions: each request
// that crosses the aggregator and each of the aggregator's own, from the moment it is made
// until it is answered, cancelled, or its server goes down, whatever it waits for (its stage).
// It is modelled on the go-sdk's internal/jsonrpc2 (inFlightState): one lock, and lookups by
// each key a message can carry.
//
//	an answer from the receiver     byTo:    the ID the receiver saw (one of ours)
//	a cancellation from the sender  byFrom:  (sender, the sender's ID), whatever its stage
//	progress from the receiver      byToken: (receiver, the token the receiver was given)
//	a server going down             sweep:   every call it sends or receives, and its tasks
//	a server drained by a reload    drain:   a signal once it has nothing in flight
//	a key that serves again         release: the client's calls held for it
//	a modern client's retry         claim:   the suspension its requestState names
//
// Because everything pending is here, a cancellation finds what it cancels at any stage (a call
// held for a restarting server is then never sent), and shutdown, a drain and --debug
// (pending) see all of it.
//
// Progress tokens are symmetric: a request's token passes to the receiver unchanged unless
// another request in flight to the same receiver already uses it; then the receiver gets a
// token of ours ("agg-p-N") and its progress goes back to the sender with the sender's own.
//
// The IDs and tokens of ours are of the table's ID space: "agg-" (idPrefix), strings, so that
// they never meet the numeric IDs of the SDK's session with the client. A session hosted by
// the shared process has a space of its own (Options.IDSpace, "agg-3-"), and gives each of its
// requests to a server a token of its own too: the server processes it shares with other
// sessions take the requests of all of them as written, IDs and tokens never meeting
// (internal/shared routes the answers and progress back by the space).

// idPrefix is the ID space of an aggregator that has the servers to itself.
const idPrefix = "agg-"

// call is one piece of pending work: a request. Endpoints are servers; nil is the client.
type call struct {
	from   *server    // the sender: a server, or nil for the client (and for our own requests)
	fromID jsonrpc.ID // the sender's ID for it
	to     *server    // the receiver: a server, or nil for the client
	toID   string     // the ID the receiver sees: one of ours ("" while held)
	stage  stage

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
	// req is the client's request a call relays to a server: should its process turn out dead
	// when it is written, or a drain refuse it, the request is held for the key (hold).
	req *jsonrpc.Request
	// key is the server key a held call waits for; deadline answers it when the key does not
	// come back in time.
	key      string
	deadline *time.Timer
	// chain is set on the legs of a legacy client's request to a modern server that may
	// answer input_required (fulfil.go); nil otherwise.
	chain *inputChain
	// suspended is set while the client's request, answered with an InputRequiredResult,
	// waits for its retry (suspend.go); guarded by the table's lock.
	suspended *suspension
	// stream is set on a modern client's subscriptions/listen (streams.go).
	stream *stream
	// stop ends the legs of a fanning call, saying why (the client's reason).
	stop context.CancelCauseFunc
	// params are the params of a server's parked request (suspend.go).
	params json.RawMessage
	// agg is the aggregator that sent it to its server, told should the write fail
	// (WriteFailed).
	agg *Aggregator
	// parts are the params of a client's call by name in parts, its tool's or prompt's name
	// replaced by the server's (callNamed).
	parts [3][]byte
	// enveloped says that the params of the client's request carry the modern envelope (a
	// modern client's, or a retry's of fulfil): a modern server takes them as they are, a
	// legacy one without it.
	enveloped bool
	// logLevel is the rank (era.LogRank) of the logLevel of a modern client's request: the
	// server's log messages reach the client while such a request is in flight to it; 0 for
	// none.
	logLevel int
	// setupAnswered tells a shared process's setup how the server answered a request that
	// sets it up (ProcessSessions.take: ok when it took it); nil for any other.
	setupAnswered func(ok bool)
	// turn is set on a request to a shared legacy process during which the server may ask
	// its client: its part in the turns of the sessions' questions (turns.go).
	turn *turn

	seq uint64 // the order it was added in
	// For the debug log.
	label, value string
	start        time.Time
	args         int
}

// unanswered tells a shared process's setup that c left the table without the server's answer
// (failed, cancelled, given up): a request that sets it up is taken for not taken
// (processsetup.go), one that took its turn ends it (turns.go).
func (c *call) unanswered() {
	if c.setupAnswered != nil {
		c.setupAnswered(false)
	}
	if c.turn != nil {
		c.turn.end(nil)
	}
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

// counted reports whether c counts as in flight for its endpoints (a drain waits for it).
func (c *call) counted() bool { return c.stage == sent || c.stage == inQueue || c.stage == parked }

// bySender reports whether c is in the table under its sender's ID alone: it has no ID of ours
// at a receiver (the client's call asking it for input, a listen, a fan-out).
func (c *call) bySender() bool { return c.stage == asking || c.stage == fanning || c.stream != nil }

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
	mu sync.Mutex
	// space starts the IDs and tokens of ours; ownTokens gives a token of ours to every
	// request to a server that has one (a space of the shared process's).
	space     string
	ownTokens bool
	seq       uint64
	byTo      map[string]*call
	byFrom    map[fromKey]*call
	byToken   map[tokenKey]*call
	held      map[*call]struct{} // the client's calls held for a key
	tasks     map[string]*server // the server that owns each task, by task ID
	// made are the tasks an answer to a request of the session's created (setTask), by task
	// ID: the session's own where a server is shared, whose tasks/list lists every session's.
	made map[string]bool
	// suspended are the client's requests waiting for its retry, by suspension ID
	// (suspend.go).
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

// newTable makes the table of a session whose ID space is space ("": idPrefix, and tokens
// pass as written).
func newTable(space string) *table {
	t := &table{space: space, ownTokens: space != "", byTo: map[string]*call{}, byFrom: map[fromKey]*call{},
		byToken: map[tokenKey]*call{}, held: map[*call]struct{}{}, tasks: map[string]*server{}, made: map[string]bool{}, suspended: map[string]*suspension{}}
	if space == "" {
		t.space = idPrefix
	}
	return t
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

// add records c (in its stage: sent unless set) under a new ID of ours, with the progress
// token it carries (nil for none). When another call to the same receiver already uses the
// token, c gets a token of ours, returned encoded (the caller puts it in the params), and
// c.fromToken keeps the sender's.
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
	var id [32]byte // one allocation for the ID, the string
	c.toID = string(strconv.AppendUint(append(id[:0], t.space...), t.seq, 10))
	t.byTo[c.toID] = c
	t.count(c, 1)
	if !c.own() {
		t.byFrom[fromKey{c.from, c.fromID}] = c
	}
	key := tokenKeyOf(token)
	switch {
	case key != "" && (t.byToken[tokenKey{c.to, key}] != nil || t.ownTokens && c.to != nil):
		newToken = []byte(strconv.Quote(t.space + "p-" + strconv.FormatUint(t.seq, 10)))
		c.fromToken = append([]byte(nil), token...)
		key = tokenKeyOf(newToken)
	case key == "" && token != nil && t.ownTokens && c.to != nil:
		// A token that is neither a string nor a number (ProgressToken's types) keys no
		// progress: what the server says of it is dropped, as it is when the server has it
		// as written; in a space, it gets one of the space's all the same, for the server
		// the sessions share.
		newToken = []byte(strconv.Quote(t.space + "p-" + strconv.FormatUint(t.seq, 10)))
	}
	if key != "" {
		c.token = key
		t.byToken[tokenKey{c.to, key}] = c
	}
	return newToken, addOK
}

// count adds n to the in-flight counts of c's endpoints (when c counts), and signals a drain
// waiting for none. Callers hold mu.
func (t *table) count(c *call, n int) {
	if !c.counted() {
		return
	}
	for _, s := range [2]*server{c.to, c.from} {
		if s == nil {
			continue
		}
		if s.inFlight += n; s.inFlight == 0 && s.idle != nil {
			close(s.idle)
			s.idle = nil
		}
	}
}

// has reports whether c is in the table. Callers hold mu.
func (t *table) has(c *call) bool {
	switch {
	case c.stage == held:
		_, ok := t.held[c]
		return ok
	case c.bySender():
		return t.byFrom[fromKey{c.from, c.fromID}] == c
	}
	return t.byTo[c.toID] == c
}

// removeLocked takes c out of the table, if it is in it. Callers hold mu.
func (t *table) removeLocked(c *call) {
	if !t.has(c) {
		return
	}
	switch {
	case c.stage == held:
		delete(t.held, c)
		if c.deadline != nil {
			c.deadline.Stop()
		}
	case !c.bySender():
		delete(t.byTo, c.toID)
		t.count(c, -1)
	}
	if !c.own() && t.byFrom[fromKey{c.from, c.fromID}] == c {
		delete(t.byFrom, fromKey{c.from, c.fromID})
	}
	if c.token != "" && t.byToken[tokenKey{c.to, c.token}] == c {
		delete(t.byToken, tokenKey{c.to, c.token})
	}
}

// answered removes and returns the call that receiver answered under id; nil when there is
// none. An answer only ever completes a call sent to the one answering: an ID made up or
// copied from another server matches nothing.
func (t *table) answered(receiver *server, id string) *call {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.byTo[id]
	if c == nil || c.to != receiver || c.stage == parked {
		return nil
	}
	t.removeLocked(c)
	return c
}

// cancelled removes and returns the call that sender sent as id, at whatever stage; nil when
// there is none.
func (t *table) cancelled(sender *server, id jsonrpc.ID) *call {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.byFrom[fromKey{sender, id}]
	if c != nil {
		t.removeLocked(c)
	}
	return c
}

// holdsFrom reports whether the table has a call that sender sent as id.
func (t *table) holdsFrom(sender *server, id jsonrpc.ID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byFrom[fromKey{sender, id}] != nil
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

// holds reports whether c is in the table.
func (t *table) holds(c *call) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.has(c)
}

// take removes c; it reports whether c was still pending.
func (t *table) take(c *call) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.takeLocked(c)
}

func (t *table) takeLocked(c *call) bool {
	if !t.has(c) {
		return false
	}
	t.removeLocked(c)
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
	for _, c := range t.byFrom {
		if c.stage == asking && c.to == s {
			gone = append(gone, c)
		}
	}
	for _, c := range gone {
		t.removeLocked(c)
	}
	for id, owner := range t.tasks {
		if owner == s {
			delete(t.tasks, id)
			delete(t.made, id)
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

// closeIfIdle closes the gate of s when it has nothing in flight and no task under way (an idle
// stop), and reports whether it did: a call either came first, and s is not idle, or finds it
// closed, and is held for the key.
func (t *table) closeIfIdle(s *server) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.inFlight > 0 {
		return false
	}
	for _, owner := range t.tasks {
		if owner == s {
			return false
		}
	}
	s.gate = gateClosed
	return true
}

// wantsLog reports whether a log message of s (its notifications/message params) is for a
// modern client: while a request of the client's with a logLevel at or below the message's
// level is in flight to s ("notifications/message is request-scoped", logging.mdx).
func (t *table) wantsLog(s *server, params json.RawMessage) bool {
	level, _ := rawjson.StringMember(params, "level")
	rank := era.LogRank(level)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.byTo {
		if c.to == s && c.logLevel > 0 && rank >= c.logLevel && c.suspended == nil && c.stage == sent {
			return true
		}
	}
	return false
}

// setTask notes that s owns the task id; made says that an answer to a request of the
// session's created it (madeBy), rather than a listing or a status notification naming it.
func (t *table) setTask(id string, s *server, made bool) {
	if id == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s.gate != gateClosed {
		t.tasks[id] = s
		if made {
			t.made[id] = true
		}
	}
}

// madeBy reports whether the task id of s was created by a request of the session's
// (setTask).
func (t *table) madeBy(id string, s *server) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.made[id] && t.tasks[id] == s
}

// task returns the server that owns the task id; nil when none is known.
func (t *table) task(id string) *server {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.tasks[id]
}

// pending says what the table holds, by stage, for the debug log: "2 sent, 1 held".
func (t *table) pending() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n [len(stageNames)]int
	seen := map[*call]bool{}
	for _, c := range t.byTo {
		seen[c] = true
		n[c.stage]++
	}
	for _, c := range t.byFrom {
		if !seen[c] {
			seen[c] = true
			n[c.stage]++
		}
	}
	var parts []string
	for st, k := range n {
		if k > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", k, stage(st)))
		}
	}
	if len(t.suspended) > 0 {
		parts = append(parts, fmt.Sprintf("%d suspended for the client's retry", len(t.suspended)))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// sortBySeq sorts calls in the order they were added.
func sortBySeq(cs []*call) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].seq < cs[j-1].seq; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
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
