package aggregator

import (
	"slices"
	"strings"
	"testing"
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

// turnWire records the requests whose turn came, by ID.
type turnWire struct{ ids []string }

func (s *turnWire) turn(ps *ProcessSessions, member string, id string) (*call, bool) {
	c := &call{toID: id, method: "tools/call", subject: "ask"}
	return c, ps.takeTurn(member, c, func() { s.ids = append(s.ids, id) })
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
	first.turn.end() // answered: "tools/call ask" is known to ask from now on
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
	if len(got) != 2 || !strings.Contains(got[0]+got[1], `"requestId":"a-2"`) || !strings.Contains(got[0]+got[1], `"requestId":"a-3"`) {
		t.Errorf("the setup wrote %q, want the cancellations of A's calls at the server", got)
	}
	if who, _ := ps.Asker(); who != "B" {
		t.Errorf("the asker once A left: %v, want B", who)
	}
}

// A call cancelled while it waits for its turn never reaches the server; one cancelled at the
// server ends its turn.
func TestTurnsWithdrawn(t *testing.T) {
	ps, _ := newTestSetup("A", "B")
	var s turnWire
	first, _ := s.turn(ps, "A", "a-1")
	ps.Asker()
	first.turn.end()
	held, _ := s.turn(ps, "A", "a-2")
	waiting, _ := s.turn(ps, "B", "b-1")
	s.turn(ps, "B", "b-2")
	if !waiting.withdrawn() {
		t.Error("B's waiting call was not withdrawn")
	}
	if held.withdrawn() { // cancelled at the server: its turn ends
		t.Error("A's call at the server was withdrawn")
	}
	if !slices.Equal(s.ids, []string{"b-2"}) {
		t.Errorf("sent once A's call ended: %q, want B's other call", s.ids)
	}
}
