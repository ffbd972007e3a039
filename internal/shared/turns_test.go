//go:build unix

package shared

import (
	"encoding/json"
	"strings"
	"testing"
)

// Turns: once a tool has asked, its calls take turns between sessions (a legacy server's
// request does not say which call it serves); other calls go at once.

// answerRoots answers the server's roots/list request with the root uri.
func (p *peer) answerRoots(req message, uri string) {
	p.t.Helper()
	if req.Method != "roots/list" {
		p.t.Fatalf("%s was asked %s, want roots/list", p.name, req.line)
	}
	p.write(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"roots":[{"uri":"` + uri + `"}]}}`)
}

func TestTurns(t *testing.T) {
	_, p1, p2 := twoSessions(t, "-full")
	p1.initialize("2025-06-18", "one")
	p2.initialize("2025-06-18", "two")
	const ask = `{"name":"ask","arguments":{"method":"roots/list"}}`

	// The tool asks, once: from now on its calls take turns.
	first := p1.send(`1`, "tools/call", ask)
	p1.answerRoots(p1.await(p1.requests, "the server's request"), "file:///one")
	if m := p1.await(first, "answer to ask"); !strings.Contains(string(m.Result), "file:///one") {
		t.Fatalf("s1's first ask: %s", m.line)
	}

	// s1's call asks, and waits for its answer: s2's call of the same tool waits for its turn;
	// a call of another tool goes at once.
	held := p1.send(`2`, "tools/call", ask)
	heldReq := p1.await(p1.requests, "the server's request")
	waiting := p2.send(`1`, "tools/call", ask)
	if got := p2.tool(`2`, "echo", `{"during":"s1's ask"}`); string(got) != `{"during":"s1's ask"}` {
		t.Errorf("s2's echo during s1's ask: %s", got)
	}
	// The waiting call is not at the server: cancelled, it never reaches it, nor does its
	// cancellation.
	p2.write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + p2.wire(`1`) + `,"reason":"enough"}}`)
	var cancelled struct{ IDs []string }
	_ = json.Unmarshal(p2.tool(`3`, "cancelled", `{}`), &cancelled)
	if len(cancelled.IDs) > 0 {
		t.Errorf("s2's call of ask was at the server during s1's (cancellations %q): it did not wait for its turn", cancelled.IDs)
	}
	select {
	case m := <-waiting:
		t.Errorf("s2's call of ask was answered during s1's: %s", m.line)
	default:
	}

	// Another call of s2's waits, and goes once s1's call is answered.
	waiting = p2.send(`4`, "tools/call", ask)
	p2.tool(`5`, "echo", `{}`) // s2's call is at the shared process
	if asked := drain(p2.requests); len(asked) > 0 {
		t.Fatalf("s2 was asked %v during s1's call", asked)
	}
	p1.answerRoots(heldReq, "file:///one-again")
	if m := p1.await(held, "answer to ask"); !strings.Contains(string(m.Result), "file:///one-again") {
		t.Errorf("s1's second ask: %s", m.line)
	}
	p2.answerRoots(p2.await(p2.requests, "the server's request, in s2's turn"), "file:///two")
	if m := p2.await(waiting, "answer to ask"); !strings.Contains(string(m.Result), "file:///two") {
		t.Errorf("s2's ask in its turn: %s", m.line)
	}
	if asked := drain(p1.requests); len(asked) > 0 {
		t.Errorf("s1 was asked %v during s2's turn", asked)
	}
}

// cancelledAtServer is how many cancellations the fixture received.
func (p *peer) cancelledAtServer(id string) int {
	p.t.Helper()
	var got struct{ IDs []string }
	_ = json.Unmarshal(p.tool(id, "cancelled", `{}`), &got)
	return len(got.IDs)
}

// Every call in flight when the server asked (of the session it asked) is known to ask from
// then on; such a call takes its turn as soon as it is at the server, before the server asks
// in it.
func TestTurnsKnownBeforeItAsks(t *testing.T) {
	_, p1, p2 := twoSessions(t, "-full")
	p1.initialize("2025-06-18", "one")
	p2.initialize("2025-06-18", "two")

	// The server asks while s1's sleep is in flight with its ask: sleep may be what asked.
	p1.send(`1`, "tools/call", `{"name":"sleep","arguments":{"ms":60000}}`)
	asking := p1.send(`2`, "tools/call", `{"name":"ask","arguments":{"method":"roots/list"}}`)
	p1.answerRoots(p1.await(p1.requests, "the server's request"), "file:///one")
	p1.await(asking, "answer to ask")
	p1.write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + p1.wire(`1`) + `}}`)
	before := p1.cancelledAtServer(`3`)
	if before != 1 {
		t.Fatalf("%d cancellations at the server, want s1's sleep's", before)
	}

	// s1's sleep is at the server: s2's waits for its turn, though the server has not asked.
	p1.send(`4`, "tools/call", `{"name":"sleep","arguments":{"ms":60000}}`)
	p1.tool(`5`, "echo", `{}`)
	p2.send(`1`, "tools/call", `{"name":"sleep","arguments":{"ms":60000}}`)
	p2.write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + p2.wire(`1`) + `}}`)
	if after := p2.cancelledAtServer(`2`); after != before {
		t.Errorf("s2's sleep was at the server during s1's (%d cancellations there, %d before): it did not wait for its turn", after, before)
	}
}

// What a request is known to ask by: its method and name, for the requests a server can ask
// during (a resources/read is one, whatever its resource).
func TestAskKey(t *testing.T) {
	for _, c := range []struct{ method, params, want string }{
		{"tools/call", `{"name":"ask","arguments":{"name":"other"}}`, "tools/call ask"},
		{"prompts/get", `{"name":"greet"}`, "prompts/get greet"},
		{"resources/read", `{"uri":"fixture://static/a"}`, "resources/read "},
		{"tools/list", `{}`, ""},
		{"completion/complete", `{"name":"x"}`, ""},
		{"initialize", `{}`, ""},
	} {
		r := &request{method: c.method, params: json.RawMessage(c.params)}
		if got := r.askKey(); got != c.want {
			t.Errorf("askKey(%s, %s) = %q, want %q", c.method, c.params, got, c.want)
		}
	}
}
