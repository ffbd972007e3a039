//go:build unix

package shared

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Routing between the sessions of one server process: each session speaks to it as to a
// process of its own, and sees nothing of the others'.

// twoSessions are two sessions of one shared process, attached to one process of the fixture
// run with args.
func twoSessions(t *testing.T, args ...string) (*testDaemon, *peer, *peer) {
	t.Helper()
	d := startDaemon(t, DefaultLinger)
	p1 := attach(t, d.session(t, "/one.json"), "s1", fixture(args...))
	p2 := attach(t, d.session(t, "/two.json"), "s2", fixture(args...))
	if p1.a.PID() != p2.a.PID() {
		t.Fatalf("the sessions' processes: %d and %d, want one", p1.a.PID(), p2.a.PID())
	}
	return d, p1, p2
}

// Requests of the same ID in both sessions' spaces (what their aggregators number alike), at
// the server together: each session gets its own answer, under its own ID.
func TestMuxSameIDs(t *testing.T) {
	_, p1, p2 := twoSessions(t, "-full")
	p1.initialize("2025-06-18", "one")
	p2.initialize("2025-06-18", "two")
	for _, id := range []string{`7`, `"x"`} {
		slow := p1.send(id, "tools/call", `{"name":"sleep","arguments":{"ms":300}}`)
		fast := p2.send(id, "tools/call", `{"name":"echo","arguments":{"from":"two"}}`)
		if m := p2.await(fast, "answer to echo"); string(m.ID) != id || !strings.Contains(string(m.Result), `"structuredContent":{"from":"two"}`) {
			t.Errorf("s2's echo, ID %s: %s", id, m.line)
		}
		if m := p1.await(slow, "answer to sleep"); string(m.ID) != id || !strings.Contains(string(m.Result), "slept 300 ms") {
			t.Errorf("s1's sleep, ID %s: %s", id, m.line)
		}
	}
	for _, p := range []*peer{p1, p2} {
		if extra := drain(p.notes); len(extra) > 0 {
			t.Errorf("%s got messages that are not its own: %v", p.name, extra)
		}
	}
}

// Progress tokens numbered alike in both sessions' spaces: each session gets the progress of
// its own request only, under its token as it wrote it.
func TestMuxProgressTokens(t *testing.T) {
	_, p1, p2 := twoSessions(t, "-full")
	p1.initialize("2025-06-18", "one")
	p2.initialize("2025-06-18", "two")
	c1 := p1.send(`3`, "tools/call", `{"name":"progress","arguments":{},"_meta":{"progressToken":`+p1.wire("p-3")+`}}`)
	c2 := p2.send(`3`, "tools/call", `{"name":"progress","arguments":{},"_meta":{"progressToken":`+p2.wire("p-3")+`}}`)
	p1.await(c1, "answer to progress")
	p2.await(c2, "answer to progress")
	for _, p := range []*peer{p1, p2} {
		// What the server sent before an answer that comes after both calls' has come.
		p.tool(`4`, "echo", `{}`)
		var got []string
		for _, m := range drain(p.notes) {
			if m.Method != "notifications/progress" {
				t.Errorf("%s: %s", p.name, m.line)
				continue
			}
			var params struct {
				ProgressToken json.RawMessage
				Message       string
			}
			_ = json.Unmarshal(m.Params, &params)
			if string(params.ProgressToken) != p.wire("p-3") {
				t.Errorf("%s: progress under the token %s, want its own, %s", p.name, params.ProgressToken, p.wire("p-3"))
			}
			got = append(got, params.Message)
		}
		if want := []string{"step 1", "step 2", "step 3"}; !slices.Equal(got, want) {
			t.Errorf("%s got the progress %q, want its own request's, %q", p.name, got, want)
		}
	}
}

// A session's cancellation of a request of its own ID space reaches the server; another
// session's cancellation of it does not.
func TestMuxCancelOfOwnSpace(t *testing.T) {
	_, p1, p2 := twoSessions(t, "-full", "-hold", "tools/list")
	p1.initialize("2025-06-18", "one")
	p2.initialize("2025-06-18", "two")
	p1.send(`5`, "tools/list", `{}`)
	p2.tool(`6`, "echo", `{}`) // s1's request is at the server
	cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + p1.wire(`5`) + `}}`
	p2.write(cancel)
	p1.write(cancel)
	var got struct{ IDs []string }
	waitFor(t, "the cancellation at the server", func() bool {
		_ = json.Unmarshal(p2.tool(`7`, "cancelled", `{}`), &got)
		return len(got.IDs) > 0
	})
	if len(got.IDs) != 1 || got.IDs[0] != p1.wire(`5`) {
		t.Errorf("the server's cancellations: %q, want s1's own alone", got.IDs)
	}
}

// A server's request routed to a session just as its use of the process ended (handed to it
// after it) is answered with an error: the server does not wait for it for good.
func TestMuxRequestAfterEnd(t *testing.T) {
	_, p1, p2 := twoSessions(t, "-full")
	p1.initialize("2025-06-18", "one")
	p2.initialize("2025-06-18", "two")
	p1.send(`1`, "tools/call", `{"name":"ask","arguments":{"method":"roots/list"}}`)
	req := p1.await(p1.requests, "the server's request")
	p1.a.Stop(0)
	var raw any
	_ = json.Unmarshal(req.ID, &raw)
	id, _ := jsonrpc.MakeID(raw)
	p1.a.Deliver(&jsonrpc.Request{ID: id, Method: req.Method}, false) // as the reader would, routed before the end
	waitFor(t, "the server's question answered", func() bool {
		return strings.Contains(p2.stderr.String(), `fixture: the question `+string(req.ID)+` was answered with the error {"code":-32603,"message":"Internal error: the session that was asked stopped using the server`)
	})
}

// A request whose ID or progress token is not of its session's space (which would take what
// is meant for another session) is refused, and never reaches the server.
func TestMuxOutsideSpace(t *testing.T) {
	record := filepath.Join(t.TempDir(), "calls")
	_, p1, p2 := twoSessions(t, "-full", "-record", record)
	p1.initialize("2025-06-18", "one")
	p2.initialize("2025-06-18", "two")
	for _, tc := range []struct{ id, params, why string }{
		{`7`, `{"name":"echo","arguments":{}}`, "the request's ID is not of the session's ID space"},
		{`"x"`, `{"name":"echo","arguments":{}}`, "the request's ID is not of the session's ID space"},
		{p2.wire(`8`), `{"name":"echo","arguments":{}}`, "the request's ID is not of the session's ID space"},
		{p1.wire(`9`), `{"name":"echo","arguments":{},"_meta":{"progressToken":` + p2.wire(`p-9`) + `}}`, "the request's progress token is not of the session's ID space"},
		{p1.wire(`10`), `{"name":"echo","arguments":{},"_meta":{"progressToken":10}}`, "the request's progress token is not of the session's ID space"},
	} {
		p1.mu.Lock()
		ch := make(chan message, 1)
		p1.pending[tc.id] = pending{tc.id, ch}
		p1.mu.Unlock()
		p1.write(`{"jsonrpc":"2.0","id":` + tc.id + `,"method":"tools/call","params":` + tc.params + `}`)
		m := p1.await(ch, "the refusal of "+tc.id)
		if !strings.Contains(string(m.Error), tc.why) || !strings.Contains(string(m.Error), `"code":-32603`) {
			t.Errorf("%s: %s, want an internal error saying %q", tc.id, m.line, tc.why)
		}
	}
	p1.tool(`11`, "echo", `{"after":"the refusals"}`)
	if got, _ := os.ReadFile(record); string(got) != "echo {\"after\":\"the refusals\"}\n" {
		t.Errorf("the server's calls:\n%s\nwant the last alone: a refused request reached it", got)
	}
}

// A notification a session wrote as it was detached (its write began before the detach, and
// is taken after it) does not reach the server, as a request would not.
func TestMuxDetachedNotification(t *testing.T) {
	_, p1, p2 := twoSessions(t, "-full")
	p1.initialize("2025-06-18", "one")
	p2.initialize("2025-06-18", "two")
	p1.a.Stop(0)
	p1.exited()
	p1.a.p.fromSession(p1.a, []byte(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`))
	var got struct{ Notes []string }
	_ = json.Unmarshal(p2.tool(`1`, "notes", `{}`), &got)
	if slices.Contains(got.Notes, "notifications/roots/list_changed") {
		t.Errorf("the server got a detached session's notification: %q", got.Notes)
	}
}

// The requests a session writes in one write (a burst of its client's, held for its end) reach
// the server in one write, as they left the client: not a write, and a wake-up of the server,
// per request.
func TestMuxBurstInOneWrite(t *testing.T) {
	d := startDaemon(t, DefaultLinger)
	p := attach(t, d.session(t, "/one.json"), "s1", fixture("-report-reads"))
	p.initialize("2025-06-18", "one")
	var lines []string
	var answers []<-chan message
	for i := range 5 {
		id := strconv.Itoa(10 + i)
		ch := make(chan message, 1)
		p.mu.Lock()
		p.pending[p.wire(id)] = pending{id, ch}
		p.mu.Unlock()
		answers = append(answers, ch)
		lines = append(lines, `{"jsonrpc":"2.0","id":`+p.wire(id)+`,"method":"tools/call","params":{"name":"echo","arguments":{"n":`+id+`}}}`)
	}
	// The session's write is taken, and what it holds written to the server, on the writer's
	// goroutine: the system calls it makes are counted in this process's write calls (with
	// whatever else writes meanwhile, little: the answers are read, not written, here).
	before := writeCalls(t)
	p.write(strings.Join(lines, "\n"))
	if n := writeCalls(t) - before; n < 1 || n >= 5 {
		t.Errorf("the five requests written together took %d write calls, want one (on the writer's goroutine)", n)
	}
	for _, ch := range answers {
		p.await(ch, "answer to echo")
	}
	var reads struct{ Lines []int }
	if err := json.Unmarshal(p.tool("20", "stdin_reads", `{}`), &reads); err != nil {
		t.Fatal(err)
	}
	// The reads: initialize, notifications/initialized (in the same read as the echoes, when
	// the server was not waiting yet), the five echoes, stdin_reads.
	if !slices.ContainsFunc(reads.Lines, func(n int) bool { return n >= 5 }) {
		t.Errorf("the server read the five requests written together in reads of %v lines, want them in one read", reads.Lines)
	}
}

// writeCalls is how many write system calls this process has made (syscw of /proc/self/io).
func writeCalls(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		t.Skipf("no count of system calls here: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "syscw: "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	t.Skip("no syscw in /proc/self/io")
	return 0
}
