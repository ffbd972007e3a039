//go:build unix

package shared

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
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
// is meant for another session) is refused, and never reaches the server: written to the
// session's input, or made by its core (Attachment.Request), also with its progress token under
// a key written escaped (the core reads that key as _meta too, and makes the token its own;
// the check does not rely on it).
func TestMuxOutsideSpace(t *testing.T) {
	record := filepath.Join(t.TempDir(), "calls")
	_, p1, p2 := twoSessions(t, "-full", "-record", record)
	p1.initialize("2025-06-18", "one")
	p2.initialize("2025-06-18", "two")
	const (
		id    = "the request's ID is not of the session's ID space"
		token = "the request's progress token is not of the session's ID space"
	)
	for _, tc := range []struct {
		wire, params, why string
		made              bool // by the core, not written
	}{
		{`7`, `{"name":"echo","arguments":{}}`, id, false},
		{`"x"`, `{"name":"echo","arguments":{}}`, id, false},
		{p2.wire(`8`), `{"name":"echo","arguments":{}}`, id, false},
		{p1.wire(`9`), `{"name":"echo","arguments":{},"_meta":{"progressToken":` + p2.wire(`p-9`) + `}}`, token, false},
		{p1.wire(`10`), `{"name":"echo","arguments":{},"_meta":{"progressToken":10}}`, token, false},
		{`"y"`, `{"name":"echo","arguments":{}}`, id, true},
		{p2.wire(`18`), `{"name":"echo","arguments":{}}`, id, true},
		{p1.wire(`19`), `{"name":"echo","arguments":{},"_meta":{"progressToken":` + p2.wire(`p-19`) + `}}`, token, true},
		{p1.wire(`20`), `{"name":"echo","arguments":{},"\u005fmeta":{"progressToken":` + p2.wire(`p-20`) + `}}`, token, true},
	} {
		p1.mu.Lock()
		ch := make(chan message, 1)
		p1.pending[tc.wire] = pending{tc.wire, ch}
		p1.mu.Unlock()
		if tc.made {
			id, _ := strconv.Unquote(tc.wire)
			p1.a.Request(nil, nil, id, "tools/call", stdio.Request(id, "tools/call", []byte(tc.params)))
		} else {
			p1.write(`{"jsonrpc":"2.0","id":` + tc.wire + `,"method":"tools/call","params":` + tc.params + `}`)
		}
		m := p1.await(ch, "the refusal of "+tc.wire)
		if !strings.Contains(string(m.Error), tc.why) || !strings.Contains(string(m.Error), `"code":-32603`) {
			t.Errorf("%s (made by the core: %v): %s, want an internal error saying %q", tc.wire, tc.made, m.line, tc.why)
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

// request makes a request as a session's core does (Attachment.Request, not a line written to
// the input): under id in the session's ID space, held while held lasts; its answer comes on
// the channel, under id, and a write that fails is told to failed.
func (p *peer) request(held *stdio.Burst, failed stdio.WriteFailure, id, method, params string) <-chan message {
	p.t.Helper()
	ch := make(chan message, 1)
	wire := p.a.space + id
	p.mu.Lock()
	p.pending[strconv.Quote(wire)] = pending{id, ch}
	p.mu.Unlock()
	p.a.Request(held, failed, wire, method, stdio.Request(wire, method, []byte(params)))
	return ch
}

// The requests a session's core makes during its client's burst are held in the process's
// connection, and reach the server in one write at the burst's end, as an unshared session's
// reach its server's pipe: not a write, and a wake-up of the server, per request.
func TestMuxRequestsHeldForTheBurst(t *testing.T) {
	d := startDaemon(t, DefaultLinger)
	p := attach(t, d.session(t, "/one.json"), "s1", fixture("-report-reads"))
	p.initialize("2025-06-18", "one")
	var burst stdio.Burst
	var answers []<-chan message
	before := writeCalls(t)
	burst.Hold(func() {
		for i := range 5 {
			n := strconv.Itoa(i)
			answers = append(answers, p.request(&burst, nil, "r"+n, "tools/call", `{"name":"echo","arguments":{"n":`+n+`}}`))
		}
	})
	if n := writeCalls(t) - before; n < 1 || n >= 5 {
		t.Errorf("the five requests of a burst took %d write calls, want one (at the burst's end)", n)
	}
	for i, ch := range answers {
		if m := p.await(ch, "answer to echo"); !strings.Contains(string(m.Result), `"structuredContent":{"n":`+strconv.Itoa(i)+`}`) {
			t.Errorf("echo %d: %s", i, m.line)
		}
	}
	var reads struct{ Lines []int }
	if err := json.Unmarshal(p.tool("20", "stdin_reads", `{}`), &reads); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(reads.Lines, func(n int) bool { return n >= 5 }) {
		t.Errorf("the server read the five requests of a burst in reads of %v lines, want them in one read", reads.Lines)
	}
}

// Every session's requests are held in the one connection of the process: another session's
// request that is not held writes them first (with itself, in one write), so the burst that
// held them does not keep them from the server once another's write is made.
func TestMuxHeldRequestsGoFirst(t *testing.T) {
	_, p1, p2 := twoSessions(t, "-full")
	p1.initialize("2025-06-18", "one")
	p2.initialize("2025-06-18", "two")
	var burst stdio.Burst
	var second <-chan message
	burst.Hold(func() {
		first := p1.request(&burst, nil, "h1", "tools/call", `{"name":"echo","arguments":{"held":"one"}}`)
		second = p2.request(nil, nil, "n1", "tools/call", `{"name":"echo","arguments":{"now":"two"}}`)
		if m := p1.await(first, "the held request's answer, while its burst lasts"); !strings.Contains(string(m.Result), `"structuredContent":{"held":"one"}`) {
			t.Errorf("the held request's answer: %s", m.line)
		}
	})
	if m := p2.await(second, "the other session's answer"); !strings.Contains(string(m.Result), `"structuredContent":{"now":"two"}`) {
		t.Errorf("the other session's answer: %s", m.line)
	}
}

// Two sessions' bursts holding requests in the one connection at once: the end of the later
// writes its requests (and the earlier's), which do not wait for the earlier burst to end.
func TestMuxBurstsOfTwoSessions(t *testing.T) {
	_, p1, p2 := twoSessions(t, "-full")
	p1.initialize("2025-06-18", "one")
	p2.initialize("2025-06-18", "two")
	var b1, b2 stdio.Burst
	b1.Hold(func() {
		first := p1.request(&b1, nil, "h1", "tools/call", `{"name":"echo","arguments":{"held":"one"}}`)
		var second <-chan message
		b2.Hold(func() {
			second = p2.request(&b2, nil, "h2", "tools/call", `{"name":"echo","arguments":{"held":"two"}}`)
		})
		if m := p2.await(second, "the answer of the burst that ended, while the other lasts"); !strings.Contains(string(m.Result), `"structuredContent":{"held":"two"}`) {
			t.Errorf("the second session's answer: %s", m.line)
		}
		p1.await(first, "the first session's answer")
	})
}

// A request made once the session stopped using the process fails as a write to a closed
// pipe, told to the request's record (its core's table then deals with it, as with a write
// to an unshared server that failed); the server never gets it.
func TestMuxRequestOfDetached(t *testing.T) {
	record := filepath.Join(t.TempDir(), "calls")
	_, p1, p2 := twoSessions(t, "-full", "-record", record)
	p1.initialize("2025-06-18", "one")
	p2.initialize("2025-06-18", "two")
	p1.a.Stop(0)
	p1.exited()
	var failed writeFailure
	p1.request(nil, &failed, "late", "tools/call", `{"name":"echo","arguments":{"late":true}}`)
	if err := failed.get(); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("the detached session's request: told %v, want a write to a closed pipe", err)
	}
	p2.tool("1", "echo", `{"after":"the detach"}`)
	if got, _ := os.ReadFile(record); string(got) != "echo {\"after\":\"the detach\"}\n" {
		t.Errorf("the server's calls:\n%s\nwant the other session's alone", got)
	}
}

// writeFailure records the failure of a write (a stdio.WriteFailure, as a call's record is).
type writeFailure struct {
	mu  sync.Mutex
	err error
}

func (w *writeFailure) WriteFailed(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = err
}

func (w *writeFailure) get() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// server/discover made by a session whose handshake began before another settled the process
// as legacy is answered Method not found by the multiplexer (a server may exit on a second
// probe): this one never answers it.
func TestMuxDiscoverOfLegacy(t *testing.T) {
	_, p1, _ := twoSessions(t, "-full", "-discover", "silent")
	p1.a.Settled(era.Legacy)
	m := p1.await(p1.request(nil, nil, "probe", "server/discover", `{}`), "the answer to server/discover")
	if !strings.Contains(string(m.Error), `"code":-32601`) {
		t.Errorf("server/discover of a legacy process: %s, want Method not found", m.line)
	}
}
