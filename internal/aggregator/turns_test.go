package aggregator

import (
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// What a request is known to ask by: its method and the server's name of its tool or prompt,
// for the requests a server can ask during (a resources/read is one, whatever its resource).
func TestAskKey(t *testing.T) {
	for _, c := range []struct{ method, subject, want string }{
		{"tools/call", "ask", "tools/call ask"},
		{"prompts/get", "greet", "prompts/get greet"},
		{"resources/read", "fixture://static/a", "resources/read "},
	} {
		if got := keyOf(&call{method: c.method, subject: c.subject}).String(); got != c.want {
			t.Errorf("keyOf(%s, %s) = %q, want %q", c.method, c.subject, got, c.want)
		}
	}
}

// turnWire records the requests whose turn came, by ID, and the cancellations sent.
type turnWire struct{ ids, cancelled []string }

// write is the request id, written to s once its turn came: a connection that writes at once,
// as the shared process's does (an InlineWriter).
func (s *turnWire) write(id string) pendingWrite {
	return pendingWrite{conn: stdio.New(nil, idsWriter{&s.ids}, nil), msg: [][]byte{[]byte(id + "\n")}}
}

// idsWriter takes the lines written to it (request IDs) into ids, at once.
type idsWriter struct{ ids *[]string }

func (w idsWriter) Write(b []byte) (int, error) {
	*w.ids = append(*w.ids, strings.Fields(string(b))...)
	return len(b), nil
}

func (idsWriter) WritesInline() {}

func (s *turnWire) turn(ps *ProcessSessions, member string, id string) (*call, bool) {
	c := &call{toID: id, method: "tools/call", subject: "ask"}
	c.turn = ps.newTurn(member, c)
	now := ps.takeTurn(c.turn, c, s.write(id))
	if now {
		c.turn.wrote() // as sendToServer does once it wrote it
	}
	return c, now
}

// asked has A's call of "ask" asked alone and answered: the tool is known to ask from then on.
func (s *turnWire) asked(ps *ProcessSessions) {
	first, _ := s.turn(ps, "A", "a-1")
	ps.Asker()
	first.turn.end(nil)
}

// writing is A's call id whose turn came and that is being written (its writer has not said
// it wrote it yet).
func writing(t *testing.T, ps *ProcessSessions, id string) *call {
	t.Helper()
	c := &call{toID: id, method: "tools/call", subject: "ask"}
	c.turn = ps.newTurn("A", c)
	if !ps.takeTurn(c.turn, c, pendingWrite{}) {
		t.Fatalf("A's call %s waited", id)
	}
	return c
}

// cancel cancels c at the server as the session does.
func (s *turnWire) cancel(c *call) {
	c.cancelAtServer(func() { s.cancelled = append(s.cancelled, c.toID) })
	c.unanswered()
}

// A session that leaves with a request known to ask at the server: the server has it
// cancelled (nobody waits for its question), the session's waiting requests are dropped, and
// the next session's turn comes.
func TestTurnsLeave(t *testing.T) {
	ps, w := newTestSetup("A", "B")
	var s turnWire
	first, _ := s.turn(ps, "A", "a-1")
	if who, why := ps.Asker(); who != "A" || why != "" {
		t.Fatalf("the asker of a question during A's call alone: %v (%s)", who, why)
	}
	first.turn.end(nil) // answered: "tools/call ask" is known to ask from now on
	if _, now := s.turn(ps, "A", "a-2"); !now {
		t.Fatal("A's call waited with nothing at the server")
	}
	if _, now := s.turn(ps, "A", "a-3"); !now {
		t.Fatal("A's second call waited for A's first")
	}
	if _, now := s.turn(ps, "B", "b-1"); now {
		t.Fatal("B's call went during A's")
	}
	if _, now := s.turn(ps, "A", "a-4"); now {
		t.Fatal("A's call went before B's, which waited first")
	}
	ps.Leave("A")
	if !slices.Equal(s.ids, []string{"b-1"}) {
		t.Errorf("sent once A left: %q, want B's call", s.ids)
	}
	got := w.wrote()
	if len(got) != 2 || !strings.Contains(got[0], `"requestId":"a-2"`) || !strings.Contains(got[1], `"requestId":"a-3"`) {
		t.Errorf("the setup wrote %q, want the cancellations of A's calls at the server", got)
	}
	if who, _ := ps.Asker(); who != "B" {
		t.Errorf("the asker once A left: %v, want B", who)
	}
}

// A call cancelled while it waits for its turn never reaches the server, nor does its
// cancellation; one cancelled at the server is cancelled there, before the next session's
// requests go.
func TestTurnsCancelled(t *testing.T) {
	ps, _ := newTestSetup("A", "B")
	var s turnWire
	s.asked(ps)
	held, _ := s.turn(ps, "A", "a-2")
	waiting, _ := s.turn(ps, "B", "b-1")
	s.turn(ps, "B", "b-2")
	s.cancel(waiting)
	if len(s.cancelled) != 0 {
		t.Errorf("cancelled at the server: %q, want nothing of B's waiting call", s.cancelled)
	}
	var sentBefore []string
	held.cancelAtServer(func() {
		sentBefore = slices.Clone(s.ids)
		s.cancelled = append(s.cancelled, held.toID)
	})
	held.unanswered()
	if !slices.Equal(s.cancelled, []string{"a-2"}) || len(sentBefore) != 0 || !slices.Equal(s.ids, []string{"b-2"}) {
		t.Errorf("cancelled %q after %q was sent, then sent %q: want A's call cancelled, then B's other call sent", s.cancelled, sentBefore, s.ids)
	}
	if who, _ := ps.Asker(); who != "B" {
		t.Errorf("the asker after: %v, want B", who)
	}
}

// A call cancelled before its turn was taken (the table had it, the turn not yet) is neither
// written nor cancelled at the server, and holds up no other session.
func TestTurnsEndedBeforeTaken(t *testing.T) {
	ps, _ := newTestSetup("A", "B")
	var s turnWire
	c := &call{toID: "a-1", method: "tools/call", subject: "ask"}
	c.turn = ps.newTurn("A", c)
	s.cancel(c)
	if ps.takeTurn(c.turn, c, s.write("a-1")) || len(s.ids) != 0 || len(s.cancelled) != 0 {
		t.Errorf("a call ended before its turn was taken: went now, or written %q, or cancelled %q", s.ids, s.cancelled)
	}
	if _, now := s.turn(ps, "B", "b-1"); !now {
		t.Error("B's call waited for A's ended one")
	}
}

// A question of a legacy server's is attributed to a modern client's request at the server,
// suspended or not, never to one that waits for its turn there (suspend.go, table.attribute).
func TestTurnsAttributeSkipsWaiting(t *testing.T) {
	ps, _ := newTestSetup("A", "B")
	tb := newTable("")
	s := testServer("a")
	var w turnWire
	req := &jsonrpc.Request{ID: id(float64(1)), Method: "tools/call"}
	add := func(member string) *call {
		c := &call{fromID: id(float64(len(tb.byTo) + 1)), to: s, req: req, method: "tools/call", subject: "ask"}
		c.turn = ps.newTurn(member, c)
		if _, res := tb.add(c, nil); res != addOK {
			t.Fatal("the table did not take the call")
		}
		ps.takeTurn(c.turn, c, w.write(c.toID))
		return c
	}
	first := add("B")
	ps.Asker()
	first.turn.end(nil) // answered: "tools/call ask" is known to ask
	tb.take(first)
	atServer := add("B")
	atServer.suspended = &suspension{} // its question waits for its client's retry
	waiting := add("A")                // waits for B's turn to end
	if got := tb.attribute(s); got != atServer {
		t.Errorf("attributed to %v, want B's call at the server (A's waits: %v)", got, got == waiting)
	}
}

// A call cancelled while it is being written is cancelled at the server once it is written,
// and the next session's requests go after that cancellation.
func TestTurnsCancelledWhileWritten(t *testing.T) {
	ps, _ := newTestSetup("A", "B")
	var s turnWire
	s.asked(ps)
	c := writing(t, ps, "a-2")
	if _, now := s.turn(ps, "B", "b-1"); now {
		t.Fatal("B's call went during A's")
	}
	var order []string
	c.cancelAtServer(func() { order = append(order, "cancel a-2 after "+strings.Join(s.ids, ",")) })
	c.unanswered()
	if _, now := s.turn(ps, "B", "b-2"); now {
		t.Error("B's new call went before A's cancellation")
	}
	if len(order) != 0 || len(s.ids) != 0 {
		t.Fatalf("before A's call was written: cancelled %q, sent %q", order, s.ids)
	}
	c.turn.wrote()
	if !slices.Equal(order, []string{"cancel a-2 after "}) || !slices.Equal(s.ids, []string{"b-1", "b-2"}) {
		t.Errorf("once A's call was written: %q, then sent %q; want its cancellation, then B's calls", order, s.ids)
	}
}

// A request of a session's that comes while another session's cancellation waits for its
// request's write waits for it too, though no request is at the server or waiting.
func TestTurnsWaitForCancellation(t *testing.T) {
	ps, _ := newTestSetup("A", "B")
	var s turnWire
	s.asked(ps)
	c := writing(t, ps, "a-2")
	var order []string
	c.cancelAtServer(func() { order = append(order, "cancel a-2") })
	c.unanswered()
	if _, now := s.turn(ps, "B", "b-1"); now {
		t.Fatal("B's call went before A's cancellation was written")
	}
	c.turn.wrote()
	if !slices.Equal(order, []string{"cancel a-2"}) || !slices.Equal(s.ids, []string{"b-1"}) {
		t.Errorf("cancelled %q, sent %q: want A's cancellation, then B's call", order, s.ids)
	}
}
