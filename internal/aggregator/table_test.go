package aggregator

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// inFlight counts the calls in flight.
func (t *table) inFlight() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byTo)
}

func testServer(key string) *server {
	return &server{key: key}
}

func id(v any) jsonrpc.ID {
	i, err := jsonrpc.MakeID(v)
	if err != nil {
		panic(err)
	}
	return i
}

// An answer completes only the call sent to the one answering; cancellation is by sender and
// the sender's ID; both take the call out of every index.
func TestTableAnswerAndCancel(t *testing.T) {
	tb := newTable("")
	a, b := testServer("a"), testServer("b")
	c1 := &call{from: nil, fromID: id(float64(1)), to: a}
	c2 := &call{from: nil, fromID: id("two"), to: b}
	for _, c := range []*call{c1, c2} {
		if _, res := tb.add(c, nil); res != addOK {
			t.Fatal("add failed")
		}
	}
	if c1.toID == c2.toID || !strings.HasPrefix(c1.toID, idPrefix) {
		t.Fatalf("IDs %q and %q", c1.toID, c2.toID)
	}
	if got := tb.answered(b, c1.toID); got != nil {
		t.Errorf("server b completed a call sent to a")
	}
	if got := tb.answered(a, c1.toID); got != c1 {
		t.Errorf("a's answer found %v", got)
	}
	if got := tb.answered(a, c1.toID); got != nil {
		t.Errorf("a second answer found %v", got)
	}
	if got := tb.cancelled(nil, id("nope")); got != nil {
		t.Errorf("cancelling an unknown ID found %v", got)
	}
	if got := tb.cancelled(nil, id("two")); got != c2 {
		t.Errorf("cancelling two found %v", got)
	}
	if got := tb.answered(b, c2.toID); got != nil || tb.inFlight() != 0 {
		t.Errorf("after the cancellation: %v, %d in flight", got, tb.inFlight())
	}
}

// A progress token passes unchanged unless another call to the same receiver uses it; then
// the receiver gets one of ours and the sender keeps its own. Lookups match the receiver.
func TestTableProgressTokens(t *testing.T) {
	tb := newTable("")
	a, b := testServer("a"), testServer("b")
	// Two servers send requests to the client with the same token.
	r1 := &call{from: a, fromID: id(float64(1)), to: nil}
	r2 := &call{from: b, fromID: id(float64(1)), to: nil}
	if tok, _ := tb.add(r1, []byte(`7`)); tok != nil {
		t.Errorf("the first use of a token was rewritten to %s", tok)
	}
	tok, _ := tb.add(r2, []byte(`7.0`)) // the same token, written differently
	if !strings.HasPrefix(string(tok), `"agg-p-`) || string(r2.fromToken) != `7.0` {
		t.Fatalf("the second use: token %s, sender's %s", tok, r2.fromToken)
	}
	if got := tb.progress(nil, []byte(`7`)); got != r1 {
		t.Errorf("progress for 7 found %v", got)
	}
	if got := tb.progress(nil, tok); got != r2 {
		t.Errorf("progress for %s found %v", tok, got)
	}
	// The same token to another receiver is free.
	c := &call{fromID: id(float64(3)), to: a}
	if tok, _ := tb.add(c, []byte(`7`)); tok != nil {
		t.Errorf("a token to another receiver was rewritten")
	}
	if got := tb.progress(b, []byte(`7`)); got != nil {
		t.Errorf("progress from b for a's token found %v", got)
	}
	if tb.progress(nil, []byte(`{}`)) != nil || tokenKeyOf([]byte(`"x`)) != "" {
		t.Errorf("a value that is no token matched")
	}
	tb.take(r1)
	if got := tb.progress(nil, []byte(`7`)); got != nil {
		t.Errorf("progress after the call ended found %v", got)
	}
}

// In an ID space of the shared process's, the IDs are the space's, and every request to a
// server with a token gets one of the space's (the sender keeps its own); a server's request
// to the client keeps its token.
func TestTableIDSpace(t *testing.T) {
	tb := newTable("agg-3-")
	a := testServer("a")
	c := &call{fromID: id(float64(1)), to: a}
	tok, _ := tb.add(c, []byte(`"t"`))
	if c.toID != "agg-3-1" || string(tok) != `"agg-3-p-1"` || string(c.fromToken) != `"t"` {
		t.Errorf("a call in the space agg-3-: ID %s, token %s (the sender's %s)", c.toID, tok, c.fromToken)
	}
	if got := tb.progress(a, tok); got != c {
		t.Errorf("progress for %s found %v", tok, got)
	}
	if tok, _ := tb.add(&call{fromID: id(float64(2)), to: a}, nil); tok != nil {
		t.Errorf("a request without a token was given %s", tok)
	}
	odd := &call{fromID: id(float64(3)), to: a}
	if tok, _ := tb.add(odd, []byte(`null`)); string(tok) != `"agg-3-p-3"` || odd.fromToken != nil {
		t.Errorf("a token that is no string or number: rewritten to %s (the sender's %s), want one of the space's", tok, odd.fromToken)
	}
	if got := tb.progress(a, []byte(`"agg-3-p-3"`)); got != nil {
		t.Errorf("progress for a token that keys nothing found %v", got)
	}
	r := &call{from: a, fromID: id(float64(1))}
	if tok, _ := tb.add(r, []byte(`7`)); tok != nil || r.toID != "agg-3-4" {
		t.Errorf("a server's request to the client: ID %s, token rewritten to %s", r.toID, tok)
	}
}

// A server going down is one sweep: what it was sent, what it sent, and its tasks; nothing
// can be added for it afterwards.
func TestTableSweep(t *testing.T) {
	tb := newTable("")
	a, b := testServer("a"), testServer("b")
	toA := &call{fromID: id(float64(1)), to: a}
	fromA := &call{from: a, fromID: id(float64(1))}
	own := &call{to: a, done: func(_, _ json.RawMessage) {}}
	toB := &call{fromID: id(float64(2)), to: b}
	for _, c := range []*call{toA, fromA, own, toB} {
		tb.add(c, []byte(`"t"`))
	}
	tb.setTask("task-a", a, false)
	tb.setTask("task-b", b, false)
	gone := tb.sweep(a)
	if len(gone) != 3 || tb.inFlight() != 1 {
		t.Errorf("the sweep took %d calls and left %d; want 3 and 1", len(gone), tb.inFlight())
	}
	if tb.task("task-a") != nil || tb.task("task-b") != b {
		t.Errorf("tasks after the sweep: a %v, b %v", tb.task("task-a"), tb.task("task-b"))
	}
	if _, res := tb.add(&call{to: a}, nil); res != addRefused {
		t.Errorf("a call was added to a server that is down")
	}
	if _, res := tb.add(&call{from: a, fromID: id(float64(9))}, nil); res != addRefused {
		t.Errorf("a request of a server that is down was added")
	}
	// A server that a reload stops takes none of the client's calls (its own calls, a ping
	// say, still go), and its drain is signalled once it has nothing in flight.
	idle := tb.drain(b)
	if _, res := tb.add(&call{fromID: id(float64(10)), to: b}, nil); res != addDraining {
		t.Errorf("a call of the client was added to a draining server")
	}
	ping := &call{to: b, done: func(_, _ json.RawMessage) {}}
	if _, res := tb.add(ping, nil); res != addOK {
		t.Errorf("an own call to a draining server: %v", res)
	}
	select {
	case <-idle:
		t.Errorf("the drain of b was signalled with calls in flight")
	default:
	}
	tb.take(toB)
	tb.answered(b, ping.toID)
	select {
	case <-idle:
	default:
		t.Errorf("the drain of b was not signalled once it had nothing in flight")
	}
	tb.setTask("late", a, false)
	if tb.task("late") != nil {
		t.Errorf("a task of a server that is down was noted")
	}
}

// Many goroutines add, answer, cancel and sweep at once (run with -race).
func TestTableConcurrent(t *testing.T) {
	tb := newTable("")
	servers := []*server{testServer("a"), testServer("b"), testServer("c")}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				s := servers[(g+i)%len(servers)]
				c := &call{fromID: id(fmt.Sprintf("%d-%d", g, i)), to: s}
				if _, res := tb.add(c, []byte(fmt.Sprintf(`"%d-%d"`, g, i))); res != addOK {
					continue
				}
				tb.progress(s, []byte(fmt.Sprintf(`"%d-%d"`, g, i)))
				switch i % 3 {
				case 0:
					tb.answered(s, c.toID)
				case 1:
					tb.cancelled(nil, c.fromID)
				case 2:
					tb.take(c)
				}
			}
		})
	}
	wg.Go(func() {
		tb.sweep(servers[2])
	})
	wg.Wait()
	if n := tb.inFlight(); n != 0 {
		t.Errorf("%d calls left", n)
	}
	if len(tb.byFrom) != 0 || len(tb.byToken) != 0 {
		t.Errorf("indexes left: %d by sender, %d by token", len(tb.byFrom), len(tb.byToken))
	}
}

// What waits for the client is bounded by count and by size; the oldest notifications go
// first, requests are never dropped but refused when nothing else can make room.
func TestQueueBounds(t *testing.T) {
	var q clientQueue
	for i := range queueMessages + 5 {
		q.hold([][]byte{[]byte(fmt.Sprintf("m%d", i)), []byte("\n")}, nil)
	}
	if len(q.items) != queueMessages || q.dropped != 5 || string(q.items[0].msg) != "m5\n" {
		t.Errorf("after %d messages: %d kept, %d dropped, first %q; want %d, 5, \"m5\\n\"", queueMessages+5, len(q.items), q.dropped, q.items[0].msg, queueMessages)
	}

	q = clientQueue{}
	big := []byte(strings.Repeat("x", queueBytes/3))
	for range 4 {
		q.hold([][]byte{big}, nil)
	}
	if len(q.items) != 3 || q.dropped != 1 || q.size != 3*len(big) {
		t.Errorf("four messages of a third of the limit: %d kept (%d bytes), %d dropped; want 3, 1", len(q.items), q.size, q.dropped)
	}

	// A request makes room by dropping the oldest notification.
	if held, refused := q.hold([][]byte{big}, &call{}); !held || refused {
		t.Errorf("a request with notifications to drop: held %v, refused %v", held, refused)
	}
	// Once only requests are left, a request that does not fit is refused.
	q = clientQueue{}
	q.hold([][]byte{big}, &call{})
	q.hold([][]byte{big}, &call{})
	q.hold([][]byte{big}, &call{})
	if held, refused := q.hold([][]byte{big}, &call{}); !held || !refused || len(q.items) != 3 {
		t.Errorf("a request that does not fit: held %v, refused %v, %d kept", held, refused, len(q.items))
	}

	// One message larger than the limit is still delivered.
	q = clientQueue{}
	q.hold([][]byte{make([]byte, queueBytes+1)}, nil)
	if len(q.items) != 1 {
		t.Errorf("a message over the limit alone was dropped")
	}

	var order []string
	q = clientQueue{}
	q.hold([][]byte{[]byte("1")}, nil)
	q.hold([][]byte{[]byte("2")}, nil)
	q.flush(func(it queued) { order = append(order, string(it.msg)) })
	if strings.Join(order, ",") != "1,2" || !q.isReady() {
		t.Errorf("flushed %v", order)
	}
	if held, _ := q.hold([][]byte{[]byte("late")}, nil); held {
		t.Errorf("a message held after the flush")
	}
}
