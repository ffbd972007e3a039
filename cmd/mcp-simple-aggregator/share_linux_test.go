package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Shared servers (--share, issue #29), with the real binary and real processes: sessions of one
// user share one process per server through the shared process, each message stays in its
// session, and nothing is left after the last session and the linger.

// shortTemp is where a test makes a directory whose path must stay short (a socket's is at
// most 107 bytes): the temporary directory, or /tmp when TMPDIR is long.
func shortTemp() string {
	if dir := os.TempDir(); len(dir) <= 30 {
		return dir
	}
	return "/tmp"
}

// shareDir gives the test a runtime directory of its own, where its sessions find their shared
// process (and no other test's), and returns the shared process's directory in it.
func shareDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(shortTemp(), "share")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Setenv("XDG_RUNTIME_DIR", dir)
	return filepath.Join(dir, "mcp-simple-aggregator")
}

// sharedProcs lists the live shared processes whose socket is in dir.
func sharedProcs(dir string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		if args := strings.Split(cmdline(pid), " "); len(args) >= 3 && args[1] == "__shared" && strings.HasPrefix(args[2], dir+"/") && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// shareSession starts a session with --share on the configuration at path.
func shareSession(t *testing.T, path string, flags ...string) *peer {
	t.Helper()
	agg := startPeer(t, aggBinary, append([]string{"--config", path, "--share", "--linger", "1s"}, flags...)...)
	agg.initialize("test")
	return agg
}

// endShared ends the sessions (their clients close their input), and then checks that
// nothing is left of the shared process or its servers (nothingShared).
func endShared(t *testing.T, dir, tag string, sessions ...*peer) {
	t.Helper()
	for _, s := range sessions {
		s.in.Close()
	}
	nothingShared(t, dir, tag)
}

// nothingShared fails the test when a shared process or a tagged server outlives the last
// session and the linger.
func nothingShared(t *testing.T, dir, tag string) {
	t.Helper()
	noneLeft(t, tag)
	deadline := time.Now().Add(6 * time.Second)
	for len(sharedProcs(dir)) > 0 {
		if time.Now().After(deadline) {
			for _, pid := range sharedProcs(dir) {
				t.Errorf("the shared process %d outlived its last session and server", pid)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Five sessions of one configuration run one process per server (two keys of one entry are
// two servers, as unshared): each sees what an unshared session sees, byte for byte; check
// names the shared process, its sessions and servers; a session's end leaves the others
// serving; after the last and the linger, nothing is left.
func TestFaultShareFive(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag, "-full")+`, "b": `+tagged(tag)+`, "c": `+tagged(tag)+`}}`)

	alone := startPeer(t, aggBinary, "--config", path)
	alone.initialize("test")
	want := alone.call("tools/list", "")
	wantCall := alone.call("tools/call", `{"name":"a:odd","arguments":{}}`)
	endSession(t, alone, tag)

	var sessions []*peer
	for i := range 5 {
		s := shareSession(t, path)
		sessions = append(sessions, s)
		if m := s.call("tools/list", ""); string(m.Result) != string(want.Result) {
			t.Errorf("session %d: tools/list\n%s\nunshared:\n%s", i, m.Result, want.Result)
		}
	}
	if n := len(taggedProcs(tag)); n != 3 {
		t.Errorf("%d server processes for five sessions of three servers, want 3", n)
	}
	if n := len(sharedProcs(dir)); n != 1 {
		t.Errorf("%d shared processes, want 1", n)
	}
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Go(func() {
			for j := range 20 {
				args := fmt.Sprintf(`{"session":%d,"call":%d}`, i, j)
				m := s.call("tools/call", `{"name":"b:echo","arguments":`+args+`}`)
				if !strings.Contains(string(m.Result), `"structuredContent":`+args) {
					t.Errorf("session %d call %d: %s", i, j, m.Line)
				}
			}
			if m := s.call("tools/call", `{"name":"a:odd","arguments":{}}`); string(m.Result) != string(wantCall.Result) {
				t.Errorf("session %d: a:odd %s, unshared %s", i, m.Result, wantCall.Result)
			}
		})
	}
	wg.Wait()

	// check names the shared process, its sessions and its servers.
	out, err := exec.Command(aggBinary, "check", "--config", path, "--json").Output()
	if err != nil && len(out) == 0 {
		t.Fatalf("check: %v", err)
	}
	var rep struct {
		Shared *struct {
			PID      int `json:"pid"`
			Sessions []struct {
				PID int `json:"pid"`
			} `json:"sessions"`
			Servers []struct {
				Keys     []string `json:"keys"`
				PID      int      `json:"pid"`
				Sessions int      `json:"sessions"`
			} `json:"servers"`
		} `json:"shared"`
	}
	if err := json.Unmarshal(out, &rep); err != nil || rep.Shared == nil {
		t.Fatalf("check --json has no shared process: %v\n%s", err, out)
	}
	if len(rep.Shared.Sessions) != 5 || len(rep.Shared.Servers) != 3 || rep.Shared.Servers[0].Sessions != 5 {
		t.Errorf("check: %s", out)
	}
	for _, s := range rep.Shared.Servers {
		if !alive(s.PID) {
			t.Errorf("check names server PID %d, which does not run", s.PID)
		}
	}

	// The place is the user's alone.
	for _, f := range []string{dir} {
		if info, err := os.Stat(f); err != nil || info.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v", f, err)
		}
	}
	socks, _ := filepath.Glob(filepath.Join(dir, "*.sock"))
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range append(socks, logs...) {
		if info, err := os.Stat(f); err != nil || info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v", f, info.Mode().Perm(), err)
		}
		data, _ := os.ReadFile(f)
		if strings.Contains(string(data), tag) {
			t.Errorf("%s holds the env value %s", f, tag)
		}
	}
	if len(socks) != 1 {
		t.Errorf("sockets: %v", socks)
	}

	// A session's end leaves the others serving, and the servers running.
	for i, s := range sessions[:4] {
		s.in.Close()
		if !exits(s.cmd.Process.Pid, 20*time.Second) {
			t.Fatalf("session %d did not exit", i)
		}
		last := sessions[4]
		if m := last.call("tools/call", `{"name":"a:echo","arguments":{"after":`+fmt.Sprint(i)+`}}`); m.Error != nil || !strings.Contains(string(m.Result), `{"after":`+fmt.Sprint(i)+`}`) {
			t.Errorf("after session %d ended: %s", i, m.Line)
		}
	}
	if n := len(taggedProcs(tag)); n != 3 {
		t.Errorf("%d server processes after four sessions ended, want 3", n)
	}
	endSessionWithin(t, sessions[4], tag, 0, "")
	nothingShared(t, dir, tag)
}

// sharedClient is a session whose client declares sampling, elicitation and roots, answers
// the server's requests with its own name, and keeps every notification it gets.
type sharedClient struct {
	*peer
	name string

	mu    sync.Mutex
	notes []message
	asked []message // the server's requests it answered
}

// shareInit is the initialize of shareClient's clients.
const shareInit = `{"protocolVersion":"2025-06-18","capabilities":{"sampling":{},"elicitation":{},"roots":{"listChanged":true}},"clientInfo":{"name":"shared","version":"1"}}`

// shareSessionAs starts a session with --share (and flags) whose client initializes with init.
func shareSessionAs(t *testing.T, path, init string, flags ...string) *peer {
	t.Helper()
	agg := startPeer(t, aggBinary, append([]string{"--config", path, "--share", "--linger", "1s"}, flags...)...)
	if m := agg.call("initialize", init); m.Error != nil {
		t.Fatalf("initialize: %s", m.Line)
	}
	agg.writeLine(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return agg
}

// shareClient starts a session with --share whose client is named name (the clients of one
// test send the same initialize: the legacy server is theirs to share).
func shareClient(t *testing.T, path, name string) *sharedClient {
	t.Helper()
	agg := shareSessionAs(t, path, shareInit)
	c := &sharedClient{peer: agg, name: name}
	go func() {
		for {
			select {
			case m := <-agg.notes:
				c.take(m)
			case <-agg.done:
				return
			}
		}
	}()
	return c
}

// take answers a request of the server's with the client's name in it, and keeps a
// notification.
func (c *sharedClient) take(m message) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(m.ID) == 0 {
		c.notes = append(c.notes, m)
		return
	}
	c.asked = append(c.asked, m)
	var result string
	switch m.Method {
	case "roots/list":
		result = `{"roots":[{"uri":"file:///` + c.name + `"}]}`
	case "elicitation/create":
		result = `{"action":"accept","content":{"who":"` + c.name + `"}}`
	default:
		result = `{"role":"assistant","content":{"type":"text","text":"` + c.name + `"},"model":"m"}`
	}
	c.writeLine(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`)
}

// got is the notifications of method the client has, and the requests it was asked.
func (c *sharedClient) got(method string) (notes []message, asked int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.notes {
		if m.Method == method {
			notes = append(notes, m)
		}
	}
	return notes, len(c.asked)
}

// Every kind of message stays in its session under load from three sessions at once: answers,
// progress (the same token in each), a cancellation, the server's questions (elicitation,
// roots and sampling answered by the session whose call asked), logs at each session's level,
// subscriptions held while any session holds them, list changes to all.
func TestFaultShareRouting(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag, "-full")+`}}`)
	var cs []*sharedClient
	for i := range 3 {
		cs = append(cs, shareClient(t, path, fmt.Sprintf("s%d", i)))
	}
	if n := len(taggedProcs(tag)); n != 1 {
		t.Fatalf("%d server processes for three sessions, want 1", n)
	}

	// The server has asked once (alone): from now on the sessions take turns.
	if m := cs[0].call("tools/call", `{"name":"a:ask","arguments":{"method":"roots/list"}}`); !strings.Contains(string(m.Result), `file:///s0`) {
		t.Fatalf("roots asked during s0's call: %s", m.Line)
	}

	for i, level := range []string{"debug", "warning", "error"} {
		if m := cs[i].call("logging/setLevel", `{"level":"`+level+`"}`); m.Error != nil {
			t.Fatalf("setLevel: %s", m.Line)
		}
	}
	// A client's progress token on a request the aggregator makes its own (setLevel is merged),
	// and one of no type a token may have on a call: each reaches the server as a token of the
	// session's ID space, and nothing is refused.
	if m := cs[2].call("logging/setLevel", `{"level":"error","_meta":{"progressToken":7}}`); m.Error != nil {
		t.Fatalf("setLevel with a progress token: %s", m.Line)
	}
	if m := cs[1].call("tools/call", `{"name":"a:echo","arguments":{"n":1},"_meta":{"progressToken":null}}`); m.Error != nil || !strings.Contains(string(m.Result), `"structuredContent":{"n":1}`) {
		t.Fatalf("a call with a progress token of null: %s", m.Line)
	}
	for _, c := range cs[:2] {
		if m := c.call("resources/subscribe", `{"uri":"fixture://static/a"}`); m.Error != nil {
			t.Fatalf("subscribe: %s", m.Line)
		}
	}

	// s0 cancels a long call; the others' calls, in flight with it, are answered.
	long := cs[0].send("tools/call", `{"name":"a:sleep","arguments":{"ms":20000}}`)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			for j := range 10 {
				args := fmt.Sprintf(`{"s":%d,"j":%d}`, i, j)
				if m := c.call("tools/call", `{"name":"a:echo","arguments":`+args+`}`); !strings.Contains(string(m.Result), `"structuredContent":`+args) {
					t.Errorf("s%d echo %d: %s", i, j, m.Line)
				}
				m := c.call("tools/call", `{"name":"a:progress","_meta":{"progressToken":"tok"},"arguments":{}}`)
				if m.Error != nil {
					t.Errorf("s%d progress: %s", i, m.Line)
				}
				for _, q := range []struct{ method, want string }{
					{"elicitation/create", `"content":{"who":"` + c.name + `"}`},
					{"roots/list", `file:///` + c.name},
					{"sampling/createMessage", `"text":"` + c.name + `"`},
				} {
					m := c.call("tools/call", `{"name":"a:ask","arguments":{"method":"`+q.method+`","params":{"message":"?","requestedSchema":{"type":"object"},"messages":[],"maxTokens":1}}}`)
					if !strings.Contains(string(m.Result), q.want) {
						t.Errorf("s%d: %s asked during its call was answered: %s", i, q.method, m.Line)
					}
				}
			}
		})
	}
	// s0's long call is at the server: then s0 cancels it (initialize, ask, setLevel, subscribe,
	// then it: request 5).
	waitSaid(t, cs[0].peer, "[a] fixture: sleep of 20000 ms started", 1)
	cs[0].writeLine(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"enough"}}`)
	wg.Wait()
	select {
	case m := <-long:
		t.Errorf("the cancelled call was answered: %s", m.Line)
	default:
	}

	// Logs: s0 asks the server to log every level; each session gets those at its own.
	if m := cs[0].call("tools/call", `{"name":"a:log","arguments":{}}`); m.Error != nil {
		t.Fatalf("log: %s", m.Line)
	}
	// Subscriptions: s1 keeps one after s0 leaves it; s2 never had one.
	cs[0].call("tools/call", `{"name":"a:touch","arguments":{"uri":"fixture://static/a"}}`)
	cs[0].call("resources/unsubscribe", `{"uri":"fixture://static/a"}`)
	if m := cs[2].call("tools/call", `{"name":"a:touch","arguments":{"uri":"fixture://static/a"}}`); !strings.Contains(string(m.Result), `"subscribed":true`) {
		t.Errorf("s1's subscription was dropped with s0's: %s", m.Line)
	}
	cs[1].call("resources/unsubscribe", `{"uri":"fixture://static/a"}`)
	if m := cs[2].call("tools/call", `{"name":"a:touch","arguments":{"uri":"fixture://static/a"}}`); !strings.Contains(string(m.Result), `"subscribed":false`) {
		t.Errorf("the last unsubscription did not reach the server: %s", m.Line)
	}
	// A list change reaches every session.
	cs[1].call("tools/call", `{"name":"a:grow","arguments":{}}`)

	wantLogs := []int{8, 5, 4} // debug and up, warning and up, error and up
	wantUpdates := []int{1, 2, 0}
	for i, c := range cs {
		waitFor(t, fmt.Sprintf("s%d's messages", i), func() bool {
			logs, _ := c.got("notifications/message")
			changed, _ := c.got("notifications/tools/list_changed")
			return len(logs) >= wantLogs[i] && len(changed) == 1
		})
		time.Sleep(100 * time.Millisecond) // for any message that should not come
		logs, asked := c.got("notifications/message")
		updates, _ := c.got("notifications/resources/updated")
		progress, _ := c.got("notifications/progress")
		if len(logs) != wantLogs[i] || len(updates) != wantUpdates[i] || len(progress) != 30 {
			t.Errorf("s%d got %d log messages (want %d), %d updates (want %d), %d progress (want 30)", i, len(logs), wantLogs[i], len(updates), wantUpdates[i], len(progress))
		}
		for _, p := range progress {
			if !strings.Contains(string(p.Params), `"progressToken":"tok"`) {
				t.Errorf("s%d: progress %s", i, p.Line)
			}
		}
		if want := 30 + map[bool]int{true: 1}[i == 0]; asked != want {
			t.Errorf("s%d was asked %d requests by the server, want %d", i, asked, want)
		}
	}
	// The server saw one cancellation: s0's.
	m := cs[1].call("tools/call", `{"name":"a:cancelled","arguments":{}}`)
	if strings.Count(string(m.Result), `"agg-`) != 1 {
		t.Errorf("the server's cancellations: %s", m.Result)
	}
	for _, c := range cs {
		c.in.Close()
	}
	nothingShared(t, dir, tag)
}

// A shared legacy server is initialized once, by its process's setup (aggregator.ProcessSessions):
// three sessions that start together (the server takes 300 ms to answer initialize, so the
// later ones come while it is at the server) all take that one answer, and the server hears one
// initialize and one notifications/initialized, before any session's next request (it refuses
// a request before it, as the Python SDK's server does).
func TestFaultShareInitializeOnce(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag, "-full", "-report-init", "-start-delay", "300ms", "-strict-init")+`}}`)
	ss := make([]*peer, 3)
	var wg sync.WaitGroup
	for i := range ss {
		wg.Go(func() { ss[i] = shareSessionAs(t, path, shareInit) })
	}
	wg.Wait()
	if t.Failed() { // a session did not start (its goroutine's Fatalf ended it alone)
		t.FailNow()
	}
	if n := len(taggedProcs(tag)); n != 1 {
		t.Fatalf("%d server processes for three sessions, want 1", n)
	}
	for i, s := range ss {
		m := s.call("tools/call", `{"name":"a:init_params","arguments":{}}`)
		if !strings.Contains(string(m.Result), `"text":"initialized 1 times"`) || !strings.Contains(string(m.Result), `"clientInfo":{"name":"shared"`) {
			t.Errorf("s%d: the server's initializes: %s, want one, of the sessions' client", i, m.Line)
		}
	}
	var got struct{ StructuredContent struct{ Notes []string } }
	_ = json.Unmarshal(ss[0].call("tools/call", `{"name":"a:notes","arguments":{}}`).Result, &got)
	if notes := got.StructuredContent.Notes; strings.Count(strings.Join(notes, " "), "notifications/initialized") != 1 {
		t.Errorf("the server was told %q, want notifications/initialized once", notes)
	}
	endShared(t, dir, tag, ss...)
}

// What the sessions of a shared legacy server set up on it is merged by their cores
// (aggregator.ProcessSessions): the server is set to the most verbose level a session asks for,
// and stays there when the session that set it asks for less while another still asks for
// more; a level that is none of the specification's is the server's to answer, as unshared,
// and changes nothing; a session that ends releases its level and its subscriptions. s2 sets
// no level: it gets every message the server logs, which says what it was set to.
func TestFaultShareSetup(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag, "-full")+`}}`)
	var ss []*peer
	for range 3 {
		ss = append(ss, shareSessionAs(t, path, shareInit))
	}
	if n := len(taggedProcs(tag)); n != 1 {
		t.Fatalf("%d server processes for three sessions, want 1", n)
	}
	setLevel := func(i int, level string) message {
		return ss[i].call("logging/setLevel", `{"level":"`+level+`"}`)
	}
	for _, c := range []struct {
		i     int
		level string
	}{{0, "debug"}, {1, "info"}, {0, "error"}} {
		if m := setLevel(c.i, c.level); m.Error != nil {
			t.Fatalf("s%d: setLevel %s: %s", c.i, c.level, m.Line)
		}
	}
	if got, want := loggedLevels(t, ss[2]), []string{"info", "notice", "warning", "error", "critical", "alert", "emergency"}; !slices.Equal(got, want) {
		t.Errorf("the server logged %q, want %q: set to the level of s0 (error), not of s1 (info)", got, want)
	}
	if m := setLevel(0, "loud"); !strings.Contains(string(m.Error), "unknown level loud") {
		t.Errorf("a level none of the specification's: %s, want the server's error", m.Line)
	}
	// A subscription the server refuses is refused to each session that asks, as unshared: the
	// first's refusal is not taken for the process being subscribed.
	for i := range 2 {
		if m := ss[i].call("resources/subscribe", `{"uri":"fixture://items/refused"}`); !strings.Contains(string(m.Error), "cannot be subscribed to") {
			t.Errorf("s%d: a subscription the server refuses: %s, want its error", i, m.Line)
		}
	}
	// While the server has not answered the first subscription (it takes half a second, then
	// refuses), a second session's goes to the server too: it is not taken for subscribed.
	first := ss[0].send("resources/subscribe", `{"uri":"fixture://items/slowrefused"}`)
	waitSaid(t, ss[1], "fixture: resources/subscribe of fixture://items/slowrefused is slow", 1)
	if m := ss[1].call("resources/subscribe", `{"uri":"fixture://items/slowrefused"}`); !strings.Contains(string(m.Error), "cannot be subscribed to") {
		t.Errorf("s1: a subscription the server refuses, asked while the first was at it: %s, want its error", m.Line)
	}
	if m := <-first; !strings.Contains(string(m.Error), "cannot be subscribed to") {
		t.Errorf("s0: a subscription the server refuses: %s, want its error", m.Line)
	}
	// s0 is subscribed to a resource, s2 is not: an update of a part of it reaches s0 alone.
	if m := ss[0].call("resources/subscribe", `{"uri":"fixture://items/1"}`); m.Error != nil {
		t.Fatalf("subscribe: %s", m.Line)
	}
	drain(ss[0])
	drain(ss[2])
	ss[2].call("tools/call", `{"name":"a:touch","arguments":{"uri":"fixture://items/1","part":"p"}}`)
	if !ss[0].note("notifications/resources/updated", testTimeout) {
		t.Errorf("s0 did not get the update of a part of the resource it subscribed to")
	}
	ss[0].call("resources/unsubscribe", `{"uri":"fixture://items/1"}`)
	for _, m := range drainAll(ss[2]) {
		if m.Method == "notifications/resources/updated" {
			t.Errorf("s2, subscribed to nothing, got %s", m.Line)
		}
	}

	// s1 asks for more, and subscribes; then it ends.
	if m := setLevel(1, "debug"); m.Error != nil {
		t.Fatalf("s1: setLevel debug: %s", m.Line)
	}
	if m := ss[1].call("resources/subscribe", `{"uri":"fixture://static/a"}`); m.Error != nil {
		t.Fatalf("subscribe: %s", m.Line)
	}
	if got := loggedLevels(t, ss[2]); len(got) != 8 {
		t.Errorf("the server logged %q after s1 asked for debug, want every level", got)
	}
	ss[1].in.Close()
	// Its subscription is released after its level (aggregator.ProcessSessions.Leave).
	waitFor(t, "the release of s1's subscription", func() bool {
		m := ss[2].call("tools/call", `{"name":"a:touch","arguments":{"uri":"fixture://static/a"}}`)
		return strings.Contains(string(m.Result), `"subscribed":false`)
	})
	if got, want := loggedLevels(t, ss[2]), []string{"error", "critical", "alert", "emergency"}; !slices.Equal(got, want) {
		t.Errorf("the server logged %q once s1 ended, want %q: the level s0 asks for", got, want)
	}
	endShared(t, dir, tag, ss...)
}

// drainAll returns what notifications p has, without waiting.
func drainAll(p *peer) []message {
	var ms []message
	for {
		select {
		case m := <-p.notes:
			ms = append(ms, m)
		default:
			return ms
		}
	}
}

// loggedLevels has the session p's server "a" log at every level it is set to, and returns the
// levels of the log messages p got.
func loggedLevels(t *testing.T, p *peer) []string {
	t.Helper()
	drain(p)
	if m := p.call("tools/call", `{"name":"a:log","arguments":{}}`); m.Error != nil {
		t.Fatalf("log: %s", m.Line)
	}
	var levels []string
	for _, m := range drainAll(p) {
		if m.Method == "notifications/message" {
			var params struct{ Level string }
			_ = json.Unmarshal(m.Params, &params)
			levels = append(levels, params.Level)
		}
	}
	return levels
}

// What a process is shared by: the same entry (command, args, env, directory) and, for a
// legacy server, the same initialize; a modern server hears each request's client, and is
// shared by clients that differ.
func TestFaultShareIdentity(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	quoted, _ := json.Marshal(gosdkBin)
	config := `{"mcpServers": {"legacy": ` + tagged(tag, "-report-init") + `, "modern": {"command": ` + string(quoted) + `, "env": {"FAULT_TAG": "` + tag + `"}}}}`
	path := writeConfig(t, config)
	other := writeConfig(t, strings.Replace(config, `"FAULT_TAG"`, `"OTHER": "x", "FAULT_TAG"`, 1))
	cwd1, cwd2 := t.TempDir(), t.TempDir()

	session := func(path, cwd, client string) *peer {
		t.Helper()
		t.Chdir(cwd) // the session's directory, which a server's entry without one runs in
		agg := startPeer(t, aggBinary, "--config", path, "--share", "--linger", "1s")
		agg.initialize(client)
		return agg
	}
	count := func() int { return len(taggedProcs(tag)) }

	a := session(path, cwd1, "one")
	if n := count(); n != 2 {
		t.Fatalf("%d processes for the first session's two servers", n)
	}
	b := session(path, cwd1, "one") // the same: shares both
	if n := count(); n != 2 {
		t.Errorf("%d processes after a second session of the same entries and client, want 2", n)
	}
	c := session(path, cwd1, "two") // another client: the legacy server is its own, the modern one shared
	if n := count(); n != 3 {
		t.Errorf("%d processes after a session of another client, want 3", n)
	}
	for _, s := range []struct {
		p    *peer
		name string
	}{{a, "one"}, {c, "two"}} {
		if m := s.p.call("tools/call", `{"name":"modern:whoami","arguments":{}}`); !strings.Contains(string(m.Result), `"name":"`+s.name+`"`) {
			t.Errorf("the shared modern server heard another client than %s: %s", s.name, m.Result)
		}
		if m := s.p.call("tools/call", `{"name":"legacy:init_params","arguments":{}}`); !strings.Contains(string(m.Result), `"name":"`+s.name+`"`) {
			t.Errorf("the legacy server of %s was initialized for another client: %s", s.name, m.Result)
		}
	}
	d := session(path, cwd2, "one") // another directory: both its own
	if n := count(); n != 5 {
		t.Errorf("%d processes after a session in another directory, want 5", n)
	}
	if m := d.call("tools/call", `{"name":"legacy:getenv","arguments":{"name":"FAULT_TAG","cwd":true}}`); !strings.Contains(string(m.Result), `"cwd":"`+cwd2+`"`) {
		t.Errorf("the server of a session in %s runs in: %s", cwd2, m.Result)
	}
	e := session(other, cwd1, "one") // another env value for the legacy server: it its own
	if n := count(); n != 6 {
		t.Errorf("%d processes after a session with another env for one server, want 6", n)
	}
	for _, s := range []*peer{a, b, c, d, e} {
		s.in.Close()
	}
	nothingShared(t, dir, tag)
}

// The first time a server asks during requests of several sessions, the question cannot be
// told apart: it is answered with an error (never sent to a session it may not be for), and
// that tool takes turns from then on.
func TestFaultShareAmbiguousAsk(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag, "-full")+`}}`)
	s0, s1 := shareClient(t, path, "s0"), shareClient(t, path, "s1")
	long := s1.send("tools/call", `{"name":"a:sleep","arguments":{"ms":1000}}`)
	waitSaid(t, s1.peer, "[a] fixture: sleep of 1000 ms started", 1) // s1's call is at the server
	m := s0.call("tools/call", `{"name":"a:ask","arguments":{"method":"elicitation/create","params":{"message":"?","requestedSchema":{"type":"object"}}}}`)
	if !strings.Contains(string(m.Result), `cannot be told apart between the 2 sessions`) {
		t.Errorf("an ambiguous question: %s", m.Line)
	}
	s1.wait(long, "the long call")
	if _, asked := s1.got(""); asked != 0 {
		t.Errorf("s1 was asked s0's question")
	}
	// a:sleep was in flight then: suspected of asking, it takes turns until a call of it ends
	// with no question asked meanwhile; then it does not (s1's short sleep ends while s0's
	// long one runs).
	s1.call("tools/call", `{"name":"a:sleep","arguments":{"ms":10}}`)
	long = s0.send("tools/call", `{"name":"a:sleep","arguments":{"ms":3000}}`)
	waitSaid(t, s0.peer, "[a] fixture: sleep of 3000 ms started", 1) // s0's call is at the server
	s1.call("tools/call", `{"name":"a:sleep","arguments":{"ms":10}}`)
	select {
	case <-long:
		t.Errorf("s1's sleep waited for s0's: a:sleep, which never asks, still takes turns")
	default:
	}
	s0.wait(long, "s0's long call")
	// Now a:ask takes turns: s1's call waits for s0's, and each is asked by its own session.
	ch := s0.send("tools/call", `{"name":"a:ask","arguments":{"method":"roots/list"}}`)
	m = s1.call("tools/call", `{"name":"a:ask","arguments":{"method":"roots/list"}}`)
	if !strings.Contains(string(m.Result), "file:///s1") {
		t.Errorf("s1's call: %s", m.Line)
	}
	if m := s0.wait(ch, "s0's call"); !strings.Contains(string(m.Result), "file:///s0") {
		t.Errorf("s0's call: %s", m.Line)
	}
	endShared(t, dir, tag, s0.peer, s1.peer)
}

// lastID is the ID of the request p sent last.
func (p *peer) lastID() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Sprint(p.nextID)
}

// asked waits for the server's request of method to p's client, skipping notifications.
func (p *peer) asked(method string) message {
	p.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case m := <-p.notes:
			if len(m.ID) == 0 {
				continue
			}
			if m.Method != method {
				p.t.Fatalf("the client was asked %s, want %s", m.Line, method)
			}
			return m
		case <-deadline:
			p.t.Fatalf("the client was not asked %s within 20s; stderr:\n%s", method, p.stderr)
			return message{}
		}
	}
}

// answerRoots answers the server's roots/list request q with the root uri.
func (p *peer) answerRoots(q message, uri string) {
	p.writeLine(`{"jsonrpc":"2.0","id":` + string(q.ID) + `,"result":{"roots":[{"uri":"` + uri + `"}]}}`)
}

// cancelledAtServer is how many cancellations the fixture of server "a" received.
func (p *peer) cancelledAtServer() int {
	p.t.Helper()
	var got struct {
		StructuredContent struct{ IDs []string }
	}
	_ = json.Unmarshal(p.call("tools/call", `{"name":"a:cancelled","arguments":{}}`).Result, &got)
	return len(got.StructuredContent.IDs)
}

// Turns: once a tool has asked, its calls take turns between the sessions of a legacy server
// (its request does not say which call it serves); other calls go at once. A call waiting for
// its turn is in its session's table alone: cancelled, neither it nor its cancellation reaches
// the server.
func TestFaultShareTurns(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag, "-full")+`}}`)
	s1 := shareSessionAs(t, path, shareInit) // answers the server's questions when the test says
	s2 := shareClient(t, path, "s2")
	const ask = `{"name":"a:ask","arguments":{"method":"roots/list"}}`

	// The tool asks, alone: from now on its calls take turns.
	first := s1.send("tools/call", ask)
	s1.answerRoots(s1.asked("roots/list"), "file:///one")
	if m := s1.wait(first, "s1's first ask"); !strings.Contains(string(m.Result), "file:///one") {
		t.Fatalf("s1's first ask: %s", m.Line)
	}

	// s1's call asks, and waits for its answer: s2's call of the same tool waits for its turn;
	// a call of another tool goes at once.
	held := s1.send("tools/call", ask)
	question := s1.asked("roots/list")
	waiting := s2.send("tools/call", ask)
	waitingID := s2.lastID()
	if m := s2.call("tools/call", `{"name":"a:echo","arguments":{"during":"s1's ask"}}`); !strings.Contains(string(m.Result), `{"during":"s1's ask"}`) {
		t.Errorf("s2's echo during s1's ask: %s", m.Line)
	}
	before := s2.cancelledAtServer()
	s2.writeLine(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + waitingID + `,"reason":"enough"}}`)
	if after := s2.cancelledAtServer(); after != before {
		t.Errorf("%d cancellations at the server after s2 cancelled its waiting call, %d before: the call or its cancellation reached the server", after, before)
	}
	select {
	case m := <-waiting:
		t.Errorf("s2's cancelled call was answered: %s", m.Line)
	default:
	}

	// Another call of s2's waits, and goes once s1's call is answered; each session is asked
	// its own question.
	waiting = s2.send("tools/call", ask)
	s2.call("tools/call", `{"name":"a:echo","arguments":{}}`) // s2's call is in its table
	if _, asked := s2.got(""); asked != 0 {
		t.Fatalf("s2 was asked %d questions during s1's call", asked)
	}
	s1.answerRoots(question, "file:///one-again")
	if m := s1.wait(held, "s1's second ask"); !strings.Contains(string(m.Result), "file:///one-again") {
		t.Errorf("s1's second ask: %s", m.Line)
	}
	if m := s2.wait(waiting, "s2's ask in its turn"); !strings.Contains(string(m.Result), "file:///s2") {
		t.Errorf("s2's ask in its turn: %s", m.Line)
	}
	endShared(t, dir, tag, s1, s2.peer)
}

// Every call in flight when the server asked (of the session it asked) is known to ask from
// then on: such a call takes its turn as soon as it is at the server, before the server asks
// in it.
func TestFaultShareTurnsKnownBeforeItAsks(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag, "-full")+`}}`)
	s1, s2 := shareClient(t, path, "s1"), shareClient(t, path, "s2")

	// The server asks while s1's sleep is in flight with its ask: sleep may be what asked.
	s1.send("tools/call", `{"name":"a:sleep","arguments":{"ms":60000}}`)
	sleepID := s1.lastID()
	waitSaid(t, s1.peer, "[a] fixture: sleep of 60000 ms started", 1)
	s1.call("tools/call", `{"name":"a:ask","arguments":{"method":"roots/list"}}`)
	s1.writeLine(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + sleepID + `}}`)
	before := s1.cancelledAtServer()
	if before != 1 {
		t.Fatalf("%d cancellations at the server, want s1's sleep's", before)
	}

	// s1's sleep is at the server: s2's waits for its turn, though the server has not asked.
	s1.send("tools/call", `{"name":"a:sleep","arguments":{"ms":60000}}`)
	sleepID = s1.lastID()
	waitSaid(t, s1.peer, "[a] fixture: sleep of 60000 ms started", 2)
	s2.send("tools/call", `{"name":"a:sleep","arguments":{"ms":60000}}`)
	s2.writeLine(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + s2.lastID() + `}}`)
	if after := s2.cancelledAtServer(); after != before {
		t.Errorf("s2's sleep was at the server during s1's (%d cancellations there, %d before): it did not wait for its turn", after, before)
	}
	// Nothing in flight at the end: a session's end waits a while for its calls' answers.
	s1.writeLine(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + sleepID + `}}`)
	endShared(t, dir, tag, s1.peer, s2.peer)
}

// A modern client's request whose question its client cannot take (the request's envelope
// declares no elicitation) is cancelled at the shared legacy server, and its turn ends with it:
// another session's call of the same tool, known to ask now, goes at once.
func TestFaultShareModernTurnEnds(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag, "-full")+`}}`)
	env := func(caps string) string {
		return `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `,"io.modelcontextprotocol/clientInfo":{"name":"turns","version":"1"}}`
	}
	var sessions []*peer
	for range 2 {
		s := startPeer(t, aggBinary, "--config", path, "--share", "--linger", "1s")
		if m := s.call("tools/list", `{`+env(`{"elicitation":{}}`)+`}`); m.Error != nil {
			t.Fatalf("tools/list: %s", m.Line)
		}
		sessions = append(sessions, s)
	}
	if n := len(taggedProcs(tag)); n != 1 {
		t.Fatalf("%d server processes for two sessions, want 1", n)
	}
	const ask = `"name":"a:ask","arguments":{"method":"elicitation/create","params":{"message":"?","requestedSchema":{"type":"object"}}}`
	if m := sessions[0].call("tools/call", `{`+env(`{}`)+`,`+ask+`}`); m.Error == nil || !strings.Contains(string(m.Error), "elicitation") {
		t.Errorf("a call whose client cannot take the question: %s", m.Line)
	}
	var got struct {
		ResultType string `json:"resultType"`
	}
	m := sessions[1].call("tools/call", `{`+env(`{"elicitation":{}}`)+`,`+ask+`}`)
	if json.Unmarshal(m.Result, &got) != nil || got.ResultType != "input_required" {
		t.Errorf("the other session's call: %s, want input_required", m.Line)
	}
	endShared(t, dir, tag, sessions...)
}

// A server's answer over --max-message-size fails its own request through a shared process as
// unshared (the process reads its server with the session's limit, its only session's), and
// the session goes on; a line of the server's that is not a message is warned of in the
// session's log, as unshared.
func TestFaultShareServerLinesOverLimit(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"big": `+tagged(tag)+`, "ts": `+tagged(tag, "-id-last")+`, "noisy": `+tagged(tag, "-garbage")+`}}`)
	s := shareSession(t, path, "--max-message-size", "1048576")
	answersOverLimit(t, s)
	if m := s.call("tools/call", `{"name":"big:big","arguments":{"bytes":1000}}`); m.Error != nil {
		t.Errorf("after answers over the limit: %s", m.Line)
	}
	if m := s.call("tools/call", `{"name":"noisy:echo","arguments":{"a":1}}`); m.Error != nil {
		t.Errorf("a call through a noisy server: %s", m.Line)
	}
	waitSaid(t, s, "not a JSON-RPC message", 1)
	endShared(t, dir, tag, s)
}

// Each session of a shared process keeps its own --max-message-size, as unshared: the process
// reads its server with the largest limit of its sessions (the starting session's, raised for
// one with a larger limit that joins), and an answer over a session's own limit fails that
// session's request, naming its limit; the session goes on. A question of the server's over
// the limit of the session it is for is answered with an error in its place: the server, and
// the turns of every session, would wait for it.
func TestFaultShareSessionLimits(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"big": `+tagged(tag, "-full")+`}}`)
	small := shareSession(t, path, "--max-message-size", "1048576")
	large := shareSession(t, path, "--max-message-size", "4194304")
	if n := len(taggedProcs(tag)); n != 1 {
		t.Fatalf("%d server processes for two sessions, want 1", n)
	}
	const big = `{"name":"big:big","arguments":{"bytes":2000000}}`
	if m := large.call("tools/call", big); m.Error != nil || len(m.Result) < 2000000 {
		t.Errorf("an answer within the joining session's limit: %.300s", m.Line)
	}
	if m := small.call("tools/call", big); !strings.Contains(string(m.Error), `the answer of server \"big\" is larger than 1048576 bytes`) {
		t.Errorf("an answer over the starting session's limit: %.300s", m.Line)
	}
	if m := small.call("tools/call", `{"name":"big:big","arguments":{"bytes":1000}}`); m.Error != nil {
		t.Errorf("after an answer over the limit: %s", m.Line)
	}
	m := small.call("tools/call", `{"name":"big:ask","arguments":{"method":"roots/list","pad":2000000}}`)
	if !strings.Contains(string(m.Result), `larger than the --max-message-size of the session it is for`) {
		t.Errorf("a question over the asking session's limit: %.300s", m.Line)
	}
	endShared(t, dir, tag, small, large)
}

// A session ends with its forwarder, even while its client keeps its input open: the shared
// process reads the client itself, and without the forwarder nobody would take the session's
// journal or carry it over a restart. Its server then stops with the linger, and the shared
// process exits.
func TestFaultShareForwarderKilled(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag)+`}}`)
	s0 := shareClient(t, path, "s0")
	if m := s0.call("tools/call", `{"name":"a:echo","arguments":{"back":1}}`); !strings.Contains(string(m.Result), `{"back":1}`) {
		t.Fatalf("a call: %s", m.Line)
	}
	if err := s0.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the session's end in the shared process", func() bool {
		return strings.Contains(sharedLog(t, dir), "a session ended")
	})
	nothingShared(t, dir, tag)
	s0.in.Close()
}

// The shared process leads a process group of its own, in the session of the client that
// started it (shared.detached): a client that ends its server's process group does not end
// it, and it is scheduled with its clients, where Linux's autogroup (the session's) would put
// it and its servers apart from them. After the group's end the next session is served by the
// same shared process.
func TestFaultShareDetached(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag)+`}}`)
	cmd := exec.Command(aggBinary, "--config", path, "--share", "--linger", "1s")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the client starts its server as a group
	s0 := startPeerCmd(t, cmd)
	s0.initialize("test")
	if m := s0.call("tools/call", `{"name":"a:echo","arguments":{"back":1}}`); !strings.Contains(string(m.Result), `{"back":1}`) {
		t.Fatalf("a call: %s", m.Line)
	}
	procs := sharedProcs(dir)
	if len(procs) != 1 {
		t.Fatalf("%d shared processes, want 1", len(procs))
	}
	shared, forwarder := procs[0], cmd.Process.Pid
	if pgid, err := unix.Getpgid(shared); err != nil || pgid != shared {
		t.Errorf("the shared process %d is in process group %d (%v), want its own", shared, pgid, err)
	}
	sid, _ := unix.Getsid(shared)
	if clientSid, _ := unix.Getsid(forwarder); sid != clientSid {
		t.Errorf("the shared process is in session %d, the client that started it in %d: want the client's", sid, clientSid)
	}
	if want, err := os.ReadFile(fmt.Sprintf("/proc/%d/autogroup", forwarder)); err == nil {
		if got, _ := os.ReadFile(fmt.Sprintf("/proc/%d/autogroup", shared)); string(got) != string(want) {
			t.Errorf("the shared process's scheduling group is %q, its client's %q", strings.TrimSpace(string(got)), strings.TrimSpace(string(want)))
		}
	}

	if err := syscall.Kill(-forwarder, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s0.waitExit()
	s1 := shareSession(t, path)
	if m := s1.call("tools/call", `{"name":"a:echo","arguments":{"back":2}}`); !strings.Contains(string(m.Result), `{"back":2}`) {
		t.Fatalf("a call of the next session: %s", m.Line)
	}
	if procs := sharedProcs(dir); len(procs) != 1 || procs[0] != shared {
		t.Errorf("shared processes %v after the first client's group was killed, want %d still", procs, shared)
	}
	endShared(t, dir, tag, s1)
}

// A client started from a terminal: its session has one (here a pseudo-terminal), and the
// shared process it starts runs in that session (TestFaultShareDetached), but gives the
// terminal up as it starts: neither it nor the servers of any session can open that client's
// terminal.
func TestFaultShareNoTerminal(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag)+`}}`)
	master, slave := openPTY(t)
	defer master.Close()
	cmd := exec.Command(aggBinary, "--config", path, "--share", "--linger", "1s")
	cmd.ExtraFiles = []*os.File{slave} // fd 3 in the client
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 3}
	s0 := startPeerCmd(t, cmd)
	slave.Close()
	s0.initialize("test")
	if m := s0.call("tools/call", `{"name":"a:echo","arguments":{"back":1}}`); !strings.Contains(string(m.Result), `{"back":1}`) {
		t.Fatalf("a call: %s", m.Line)
	}
	if terminalOf(cmd.Process.Pid) == 0 {
		t.Fatal("the client has no controlling terminal: the test set up none")
	}
	procs := sharedProcs(dir)
	if len(procs) != 1 {
		t.Fatalf("%d shared processes, want 1", len(procs))
	}
	if sid, _ := unix.Getsid(procs[0]); sid != cmd.Process.Pid {
		t.Errorf("the shared process is in session %d, want the client's, %d", sid, cmd.Process.Pid)
	}
	for _, pid := range append(procs, taggedProcs(tag)...) {
		if tty := terminalOf(pid); tty != 0 {
			t.Errorf("%s (%d) has the client's terminal (device %#x) as its own", cmdline(pid), pid, tty)
		}
	}
	endShared(t, dir, tag, s0)
}

// openPTY opens a pseudo-terminal: its master and its slave, neither the test's terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return master, slave
}

// terminalOf is the device number of the process's controlling terminal, 0 for none
// (/proc/PID/stat's tty_nr).
func terminalOf(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	tty, _ := strconv.Atoi(fields[4]) // state, ppid, pgrp, session, tty_nr
	return tty
}

// A session that ends with work at a server another session uses: the server has the
// session's call cancelled and its question to the session's client answered with an error,
// by the session itself (its in-flight table is the only record of either), and the other
// session goes on.
func TestFaultShareSessionEnds(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag, "-full")+`}}`)
	// s0's client sends what shareClient's do (the server is theirs to share), and answers
	// nothing it is asked.
	s0 := shareSessionAs(t, path, shareInit)
	s1 := shareClient(t, path, "s1")
	if n := len(taggedProcs(tag)); n != 1 {
		t.Fatalf("%d server processes for two sessions, want 1", n)
	}
	s0.send("tools/call", `{"name":"a:sleep","arguments":{"ms":60000}}`)
	waitSaid(t, s0, "[a] fixture: sleep of 60000 ms started", 1)
	s0.send("tools/call", `{"name":"a:ask","arguments":{"method":"roots/list"}}`)
	if !s0.note("roots/list", 10*time.Second) {
		t.Fatal("s0's client was not asked for its roots")
	}
	s0.in.Close()
	waitSaid(t, s1.peer, `[a] fixture: the question "ask-1" was answered with the error`, 1)
	// Both of s0's calls, and nothing of s1's: the IDs of one session's space ("agg-1-").
	var got struct {
		StructuredContent struct{ IDs []string }
	}
	_ = json.Unmarshal(s1.call("tools/call", `{"name":"a:cancelled","arguments":{}}`).Result, &got)
	if ids := got.StructuredContent.IDs; len(ids) != 2 || ids[0][:7] != ids[1][:7] {
		t.Errorf("the server's cancellations: %q, want s0's sleep and ask", ids)
	}
	if m := s1.call("tools/call", `{"name":"a:echo","arguments":{"after":"s0"}}`); !strings.Contains(string(m.Result), `{"after":"s0"}`) {
		t.Errorf("s1's call after s0 ended: %s", m.Line)
	}
	s1.in.Close()
	nothingShared(t, dir, tag)
}

// A shared process's era is learned once, by the probe of the session that started it: a
// session after it speaks to the process in that era without a probe, and --debug says why. (A
// legacy server may end on a second server/discover: this one ends on the first, and the first
// session starts it again for initialize.)
func TestFaultShareEraOnce(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag, "-discover", "exit")+`}}`)
	s0 := shareClient(t, path, "s0")
	pids := taggedProcs(tag)
	if len(pids) != 1 {
		t.Fatalf("%d server processes, want 1", len(pids))
	}
	s1 := shareSessionAs(t, path, shareInit, "--debug")
	if m := s1.call("tools/call", `{"name":"a:echo","arguments":{"n":1}}`); !strings.Contains(string(m.Result), `{"n":1}`) {
		t.Fatalf("s1's call: %s", m.Line)
	}
	// Its stderr is read beside its answers: the line may come after the answer.
	waitSaid(t, s1, "era: legacy (the shared process's process spoke it to a session before; not probed)", 1)
	if now := taggedProcs(tag); !slices.Equal(now, pids) {
		t.Errorf("the server processes: %v, want %v as before s1", now, pids)
	}
	endShared(t, dir, tag, s0.peer, s1)
}

// A legacy era is the process's only once initialize succeeded: a probe that timed out may yet
// be answered, so a session whose server did not answer it, and then failed initialize, leaves
// the era unknown, and the next session of the process probes it again.
func TestFaultShareEraUnconfirmed(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag, "-discover", "silent", "-hang-at-start")+`}}`)
	// The linger keeps the process for the second session, and ends it after.
	flags := []string{"--config", path, "--share", "--linger", "3s", "--debug", "--probe-timeout", "200ms", "--startup-timeout", "1s"}
	var ss [2]*peer
	for i := range ss {
		ss[i] = startPeer(t, aggBinary, flags...)
		if m := ss[i].call("initialize", shareInit); !strings.Contains(string(m.Error), "did not finish initialize within the start-up timeout") {
			t.Fatalf("session %d's initialize: %s", i, m.Line)
		}
		if n := len(taggedProcs(tag)); n != 1 {
			t.Fatalf("%d server processes, want the one both sessions use", n)
		}
	}
	if log := ss[1].stderr.String(); strings.Contains(log, "not probed") || !strings.Contains(log, "era: legacy (no answer to server/discover within 200ms)") {
		t.Errorf("the second session did not probe the server whose era the first did not confirm:\n%s", log)
	}
	endShared(t, dir, tag, ss[:]...)
}

// A task's status notifications go to the session whose call created the task (its table owns
// the task), and never to another session of the server; tasks/list lists the session's own
// tasks, as unshared, although the server lists every session's on its one connection.
func TestFaultShareTasks(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag, "-tasks")+`}}`)
	var ss [2]*peer
	for i := range ss {
		ss[i] = shareSessionAs(t, path, `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"tasker","version":"1"}}`)
	}
	if n := len(taggedProcs(tag)); n != 1 {
		t.Fatalf("%d server processes for two sessions, want 1", n)
	}
	for i, s := range ss {
		m := s.call("tools/call", `{"name":"a:task_sleep","arguments":{"ms":50},"task":{"ttl":60000}}`)
		var r struct{ Task struct{ TaskID string } }
		if json.Unmarshal(m.Result, &r); r.Task.TaskID == "" {
			t.Fatalf("s%d creating a task: %s", i, m.Line)
		}
		note := nextNote(t, s, "the task's status")
		if !strings.Contains(string(note.Line), `"method":"notifications/tasks/status","params":{"taskId":"`+r.Task.TaskID+`"`) {
			t.Errorf("s%d's task status: %s", i, note.Line)
		}
		// What the other session was handed before this call's answer has reached it.
		other := ss[1-i]
		other.call("tools/call", `{"name":"a:echo","arguments":{}}`)
		select {
		case m := <-other.notes:
			t.Errorf("s%d got a message of s%d's task: %s", 1-i, i, m.Line)
		default:
		}
	}
	// s1's task, still working as s0 lists the tasks: not in s0's list, and its status is
	// s1's, though s0 is the first session attached.
	m := ss[1].call("tools/call", `{"name":"a:task_sleep","arguments":{"ms":1000},"task":{"ttl":60000}}`)
	var r struct{ Task struct{ TaskID string } }
	if json.Unmarshal(m.Result, &r); r.Task.TaskID == "" {
		t.Fatalf("s1 creating a task: %s", m.Line)
	}
	var lists [2]struct{ Tasks []struct{ TaskID string } }
	for i, s := range ss {
		m := s.call("tasks/list", `{}`)
		if json.Unmarshal(m.Result, &lists[i]); m.Error != nil {
			t.Fatalf("s%d tasks/list: %s", i, m.Line)
		}
	}
	if n0, n1 := len(lists[0].Tasks), len(lists[1].Tasks); n0 != 1 || n1 != 2 {
		t.Errorf("tasks/list: s0 got %d tasks (want its 1), s1 %d (want its 2): %+v", n0, n1, lists)
	}
	if note := nextNote(t, ss[1], "the status of s1's second task"); !strings.Contains(string(note.Line), `"taskId":"`+r.Task.TaskID+`"`) {
		t.Errorf("s1's second task's status: %s", note.Line)
	}
	ss[0].call("tools/call", `{"name":"a:echo","arguments":{}}`)
	select {
	case m := <-ss[0].notes:
		t.Errorf("s0 got a message of s1's task: %s", m.Line)
	default:
	}
	endShared(t, dir, tag, ss[:]...)
}

// logsAtError has c's server "a" send its log messages (the fixture's log: eight, four of them
// at level error or above) and checks that c gets the four: its level, error, filters them.
func (c *sharedClient) logsAtError(t *testing.T) {
	t.Helper()
	before, _ := c.got("notifications/message")
	c.call("tools/call", `{"name":"a:log","arguments":{}}`)
	waitFor(t, c.name+"'s logs", func() bool { l, _ := c.got("notifications/message"); return len(l) >= len(before)+4 })
	time.Sleep(100 * time.Millisecond) // none more comes
	if l, _ := c.got("notifications/message"); len(l) != len(before)+4 {
		t.Errorf("%s got %d log messages, want 4 (at level error)", c.name, len(l)-len(before))
	}
}

// The shared process killed under load: the sessions go on. Their calls in flight are answered
// with an error naming what happened, a new shared process runs their servers, what their
// clients set up (the log level, a subscription) is set up again, and the old servers died
// with it.
func TestFaultShareKilled(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag, "-full")+`}}`)
	s0, s1 := shareClient(t, path, "s0"), shareClient(t, path, "s1")
	s0.call("logging/setLevel", `{"level":"error"}`)
	s1.call("resources/subscribe", `{"uri":"fixture://static/a"}`)
	old := taggedProcs(tag)
	daemons := sharedProcs(dir)
	if len(old) != 1 || len(daemons) != 1 {
		t.Fatalf("%d servers, %d shared processes", len(old), len(daemons))
	}
	var inflight []<-chan message
	for range 5 {
		inflight = append(inflight, s0.send("tools/call", `{"name":"a:sleep","arguments":{"ms":10000}}`), s1.send("tools/call", `{"name":"a:sleep","arguments":{"ms":10000}}`))
	}
	// All ten are at the server (its stderr goes to every session attached to it).
	waitSaid(t, s0.peer, "[a] fixture: sleep of 10000 ms started", 10)
	syscall.Kill(daemons[0], syscall.SIGKILL)
	for i, ch := range inflight {
		p := s0
		if i%2 == 1 {
			p = s1
		}
		if m := p.wait(ch, "a call in flight"); !strings.Contains(string(m.Error), "ended with the shared process that ran it") {
			t.Errorf("a call in flight when the shared process was killed: %s", m.Line)
		}
	}
	for _, pid := range old {
		if !exits(pid, 10*time.Second) {
			t.Errorf("the server %d outlived the shared process killed", pid)
		}
	}
	for _, s := range []*sharedClient{s0, s1} {
		waitFor(t, "a call after the restart", func() bool {
			m := s.call("tools/call", `{"name":"a:echo","arguments":{"back":1}}`)
			return strings.Contains(string(m.Result), `{"back":1}`)
		})
	}
	if n := len(sharedProcs(dir)); n != 1 {
		t.Errorf("%d shared processes after the restart, want 1", n)
	}
	if n := len(taggedProcs(tag)); n != 1 {
		t.Errorf("%d servers after the restart, want 1", n)
	}
	// Set up again: s1's subscription reaches the new process; s0's level filters its logs.
	if m := s1.call("tools/call", `{"name":"a:touch","arguments":{"uri":"fixture://static/a"}}`); !strings.Contains(string(m.Result), `"subscribed":true`) {
		t.Errorf("the subscription was not set up again: %s", m.Line)
	}
	s0.logsAtError(t)
	endShared(t, dir, tag, s0.peer, s1.peer)
}

// What a new shared process is given again is what the client set up and the session took: a
// log level refused after one that was taken leaves the one taken.
func TestFaultShareKilledSetupRefused(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag, "-full")+`}}`)
	s0 := shareClient(t, path, "s0")
	if m := s0.call("logging/setLevel", `{"level":"error"}`); m.Error != nil {
		t.Fatalf("setLevel error: %s", m.Line)
	}
	if m := s0.call("logging/setLevel", `{"level":"loud"}`); m.Error == nil {
		t.Fatalf("setLevel of no level: %s", m.Line)
	}
	daemons := sharedProcs(dir)
	if len(daemons) != 1 {
		t.Fatalf("%d shared processes", len(daemons))
	}
	// Killed once a call is at the server, well after the receipts of the answers before it
	// were written (an answer's receipt follows it: a kill between the two answers it again).
	sleeping := s0.send("tools/call", `{"name":"a:sleep","arguments":{"ms":10000}}`)
	waitSaid(t, s0.peer, "[a] fixture: sleep of 10000 ms started", 1)
	syscall.Kill(daemons[0], syscall.SIGKILL)
	if m := s0.wait(sleeping, "the call in flight"); !strings.Contains(string(m.Error), "ended with the shared process that ran it") {
		t.Errorf("the call in flight when the shared process was killed: %s", m.Line)
	}
	waitFor(t, "a call after the restart", func() bool {
		m := s0.call("tools/call", `{"name":"a:echo","arguments":{"back":1}}`)
		return strings.Contains(string(m.Result), `{"back":1}`)
	})
	s0.logsAtError(t)
	endShared(t, dir, tag, s0.peer)
}

// A batch in flight (2025-03-26) when the shared process is killed: each of its requests is
// answered with an error, as a request sent alone is; a batch answered before the kill is not
// answered again (the receipt of its answer named each of its requests).
func TestFaultShareKilledBatch(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag, "-full")+`}}`)
	agg := shareSessionAs(t, path, `{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"batcher","version":"1"}}`)
	agg.writeLine(`[{"jsonrpc":"2.0","id":"d1","method":"ping"},{"jsonrpc":"2.0","id":"d2","method":"tools/call","params":{"name":"a:echo","arguments":{}}}]`)
	if m := nextNote(t, agg, "the first batch's answer"); !strings.Contains(string(m.Line), `"id":"d2"`) {
		t.Fatalf("the first batch's answer: %s", m.Line)
	}
	wait := map[string]chan message{}
	agg.mu.Lock()
	for _, id := range []string{`"b1"`, `"b2"`} {
		wait[id] = make(chan message, 1)
		agg.waiting[id] = wait[id]
	}
	agg.mu.Unlock()
	sleep := `"method":"tools/call","params":{"name":"a:sleep","arguments":{"ms":10000}}}`
	agg.writeLine(`[{"jsonrpc":"2.0","id":"b1",` + sleep + `,{"jsonrpc":"2.0","id":"b2",` + sleep + `]`)
	waitSaid(t, agg, "[a] fixture: sleep of 10000 ms started", 2)
	daemons := sharedProcs(dir)
	if len(daemons) != 1 {
		t.Fatalf("%d shared processes", len(daemons))
	}
	syscall.Kill(daemons[0], syscall.SIGKILL)
	for id, ch := range wait {
		if m := agg.wait(ch, "the batch's call "+id); !strings.Contains(string(m.Error), "ended with the shared process that ran it") {
			t.Errorf("the batch's call %s in flight when the shared process was killed: %s", id, m.Line)
		}
	}
	waitFor(t, "a call after the restart", func() bool {
		m := agg.call("tools/call", `{"name":"a:echo","arguments":{"back":1}}`)
		return strings.Contains(string(m.Result), `{"back":1}`)
	})
	endShared(t, dir, tag, agg)
}

// The shared process's directory is the user's alone: a looser one is made private, one that
// is a link is refused, and the session then serves unshared, saying why.
func TestFaultSharePlace(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag)+`}}`)
	os.Mkdir(dir, 0o755)
	s := shareSession(t, path)
	if info, _ := os.Stat(dir); info.Mode().Perm() != 0o700 {
		t.Errorf("the directory has mode %v, want 0700", info.Mode().Perm())
	}
	if n := len(sharedProcs(dir)); n != 1 {
		t.Errorf("%d shared processes", n)
	}
	endSession(t, s, tag)
	nothingShared(t, dir, tag)

	os.RemoveAll(dir)
	os.Symlink(t.TempDir(), dir)
	s = shareSession(t, path)
	if m := s.call("tools/call", `{"name":"a:echo","arguments":{}}`); m.Error != nil {
		t.Errorf("unshared: %s", m.Line)
	}
	if !strings.Contains(s.stderr.String(), "is not a directory (a link, or a file): remove it") || !strings.Contains(s.stderr.String(), "this session runs its own servers") {
		t.Errorf("stderr: %s", s.stderr)
	}
	endSession(t, s, tag)
}

// Keys of one file with the same entry are as many servers, started at once: each session gets
// one process per key, never two keys on one process, and a second session takes one key per
// process too.
func TestFaultShareSameEntries(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	var keys []string
	for i := range 6 {
		keys = append(keys, fmt.Sprintf(`"k%d": %s`, i, tagged(tag)))
	}
	path := writeConfig(t, `{"mcpServers": {`+strings.Join(keys, ",")+`}}`)
	s0, s1 := shareSession(t, path), shareSession(t, path)
	if n := len(taggedProcs(tag)); n != 6 {
		t.Errorf("%d processes for two sessions of six keys of one entry, want 6", n)
	}
	out, _ := exec.Command(aggBinary, "check", "--config", path, "--json").Output()
	var rep struct {
		Shared struct {
			Servers []struct {
				Keys     []string `json:"keys"`
				Sessions int      `json:"sessions"`
			} `json:"servers"`
		} `json:"shared"`
	}
	json.Unmarshal(out, &rep)
	for _, s := range rep.Shared.Servers {
		if s.Sessions != 2 || len(s.Keys) != 1 {
			t.Errorf("a process of keys %v has %d sessions, want one key and 2", s.Keys, s.Sessions)
		}
	}
	endShared(t, dir, tag, s0, s1)
}

// A modern server shared by three sessions hears one listen, its process's setup's: each
// session gets its list changes and the updates of the resources it subscribed to, after
// another session's listen ended or asked for more (the go-sdk keeps one listen per kind and
// connection, and ends a kind's when any listen ends).
func TestFaultShareModernListen(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	quoted, _ := json.Marshal(gosdkBin)
	path := writeConfig(t, `{"mcpServers": {"m": {"command": `+string(quoted)+`, "env": {"FAULT_TAG": "`+tag+`"}}}}`)
	var cs []*sharedClient
	for i := range 3 {
		cs = append(cs, shareClient(t, path, fmt.Sprintf("s%d", i)))
	}
	if n := len(taggedProcs(tag)); n != 1 {
		t.Fatalf("%d processes for three sessions of a modern server, want 1", n)
	}
	grow := func(by *sharedClient, want []*sharedClient, n int) {
		t.Helper()
		by.call("tools/call", `{"name":"m:grow","arguments":{}}`)
		for _, c := range want {
			waitFor(t, c.name+"'s list change", func() bool {
				l, _ := c.got("notifications/tools/list_changed")
				return len(l) >= n
			})
			if _, names := tools(t, c.call("tools/list", "")); !slices.Contains(names, fmt.Sprintf("m:grown_%d", n)) {
				t.Errorf("%s lists %v", c.name, names)
			}
		}
	}
	grow(cs[0], cs, 1)
	// s1 subscribes: its session listens again for more; the others keep their changes.
	if m := cs[1].call("resources/subscribe", `{"uri":"gosdk://static/a"}`); m.Error != nil {
		t.Fatalf("subscribe: %s", m.Line)
	}
	cs[2].call("tools/call", `{"name":"m:touch","arguments":{"uri":"gosdk://static/a"}}`)
	waitFor(t, "s1's update", func() bool { u, _ := cs[1].got("notifications/resources/updated"); return len(u) == 1 })
	grow(cs[2], cs, 2)
	// s0 ends: the others keep their changes.
	cs[0].in.Close()
	exits(cs[0].cmd.Process.Pid, 20*time.Second)
	grow(cs[1], cs[1:], 3)
	for i, c := range cs {
		if u, _ := c.got("notifications/resources/updated"); len(u) != map[bool]int{true: 1}[i == 1] {
			t.Errorf("s%d got %d resource updates", i, len(u))
		}
	}
	for _, c := range cs[1:] {
		c.in.Close()
	}
	nothingShared(t, dir, tag)
}

// A modern server's change while the setup listens again (a session subscribes to a resource,
// so the process's listen must ask for more) reaches every session: between the old listen's
// end and the new one's start nothing is subscribed at the server, which tells no one of the
// change; once the new listen is acknowledged, the other sessions read their lists again (and
// the one that asked does so itself). The fixture answers the old listen a second after
// letting go of it, and the change is made in that second. The gaps follow the
// acknowledgement, not the wait of the session that asked: also when its client cancelled the
// subscription meanwhile.
func TestFaultShareModernListenGap(t *testing.T) {
	for _, cancels := range []bool{false, true} {
		t.Run(map[bool]string{false: "the asker waits", true: "the asker cancels"}[cancels], func(t *testing.T) {
			dir := shareDir(t)
			tag := newTag(t)
			quoted, _ := json.Marshal(gosdkBin)
			path := writeConfig(t, `{"mcpServers": {"m": {"command": `+string(quoted)+`, "args": ["-listen-answer-delay", "1s"], "env": {"FAULT_TAG": "`+tag+`"}}}}`)
			s0, s1 := shareClient(t, path, "s0"), shareClient(t, path, "s1")
			if n := len(taggedProcs(tag)); n != 1 {
				t.Fatalf("%d processes for two sessions of a modern server, want 1", n)
			}
			subscribed := s1.send("resources/subscribe", `{"uri":"gosdk://static/a"}`)
			s1.mu.Lock()
			id := s1.nextID
			s1.mu.Unlock()
			waitFor(t, "the server letting go of the setup's listen", func() bool {
				return strings.Contains(s0.stderr.String(), "gosdk: let go of a cancelled listen")
			})
			s0.call("tools/call", `{"name":"m:grow","arguments":{}}`)
			hear := []*sharedClient{s0, s1}
			if cancels { // before the old listen's end, a second after the server let go of it
				s1.writeLine(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, id))
				hear = hear[:1]
			} else if m := s1.wait(subscribed, "resources/subscribe"); m.Error != nil {
				t.Fatalf("subscribe: %s", m.Line)
			}
			for _, c := range hear {
				waitFor(t, c.name+"'s list change", func() bool {
					l, _ := c.got("notifications/tools/list_changed")
					return len(l) > 0
				})
				if _, names := tools(t, c.call("tools/list", "")); !slices.Contains(names, "m:grown_1") {
					t.Errorf("%s lists %v", c.name, names)
				}
			}
			endShared(t, dir, tag, s0.peer, s1.peer)
		})
	}
}

// A shared modern server that lets go of a replaced listen only after the setup stopped waiting
// for it (the go-sdk then ends the connection's list subscriptions, the new listen's with
// them): once the old one ends, the setup listens again, and a list change reaches every
// session again. Each round grows a tool and waits a while for both sessions to hear of it; a
// round whose change fell between the late end and the new listen is heard of by neither, so
// the next round is tried.
func TestFaultShareModernListenEndedLate(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	quoted, _ := json.Marshal(gosdkBin)
	path := writeConfig(t, `{"mcpServers": {"m": {"command": `+string(quoted)+`, "args": ["-listen-end-delay", "1s"], "env": {"FAULT_TAG": "`+tag+`"}}}}`)
	var ss []*peer
	for range 2 {
		ss = append(ss, shareSessionAs(t, path, shareInit, "--probe-timeout", "200ms"))
	}
	if n := len(taggedProcs(tag)); n != 1 {
		t.Fatalf("%d processes for two sessions of a modern server, want 1", n)
	}
	// s1 subscribes: the setup listens again, and stops waiting for the old listen's end, which
	// comes a second after it was cancelled.
	if m := ss[1].call("resources/subscribe", `{"uri":"gosdk://static/a"}`); m.Error != nil {
		t.Fatalf("subscribe: %s", m.Line)
	}
	waitSaid(t, ss[0], "gosdk: let go of a cancelled listen late", 1)
	heard := func(p *peer) bool {
		deadline := time.After(2 * time.Second)
		for {
			select {
			case m := <-p.notes:
				if m.Method == "notifications/tools/list_changed" {
					return true
				}
			case <-deadline:
				return false
			}
		}
	}
	deadline := time.Now().Add(testTimeout)
	for round := 1; ; round++ {
		for _, s := range ss {
			drain(s)
		}
		ss[0].call("tools/call", `{"name":"m:grow","arguments":{}}`)
		if heard(ss[0]) && heard(ss[1]) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d rounds, a list change no longer reaches the sessions: the listen that ended late took the new one's subscriptions, and nothing listened again", round)
		}
	}
	endShared(t, dir, tag, ss...)
}

// Sessions of different clients that start at once share a modern server: a session does not
// start a process of its own while the one another session started has not said its era.
func TestFaultShareModernAtOnce(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	quoted, _ := json.Marshal(gosdkBin)
	path := writeConfig(t, `{"mcpServers": {"m": {"command": `+string(quoted)+`, "args": ["-start-delay", "300ms"], "env": {"FAULT_TAG": "`+tag+`"}}}}`)
	var wg sync.WaitGroup
	sessions := make([]*peer, 3)
	for i := range sessions {
		wg.Go(func() {
			sessions[i] = startPeer(t, aggBinary, "--config", path, "--share", "--linger", "1s")
			sessions[i].initialize(fmt.Sprintf("client-%d", i))
		})
	}
	wg.Wait()
	if n := len(taggedProcs(tag)); n != 1 {
		t.Errorf("%d processes for three sessions of different clients of a modern server, want 1", n)
	}
	for i, s := range sessions {
		if m := s.call("tools/call", `{"name":"m:whoami","arguments":{}}`); !strings.Contains(string(m.Result), fmt.Sprintf(`"name":"client-%d"`, i)) {
			t.Errorf("session %d: %s", i, m.Result)
		}
		s.in.Close()
	}
	nothingShared(t, dir, tag)
}

// dirOfLength makes a directory whose path is n bytes long, and removes it at the end of the
// test.
func dirOfLength(t *testing.T, n int) string {
	t.Helper()
	dir, err := os.MkdirTemp(shortTemp(), "long")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	dir += "/" + strings.Repeat("x", n-len(dir)-1)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ownBuild is a copy of the program, which is another build: its sessions have a shared process
// of their own, wherever its place is (the short place in /tmp is the user's, shared with their
// other tests and sessions).
func ownBuild(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(aggBinary)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), "mcp-simple-aggregator")
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

// sharedProcsOf lists the live shared processes of the program exe, with their sockets.
func sharedProcsOf(exe string) map[int]string {
	out := map[int]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		if args := strings.Split(cmdline(pid), " "); len(args) >= 3 && args[0] == exe && args[1] == "__shared" && alive(pid) {
			out[pid] = args[2]
		}
	}
	return out
}

// macOS's TMPDIR (/var/folders/xx/.../T/, about 48 characters) and no XDG_RUNTIME_DIR: where the
// socket's path in the temporary directory would be too long, the sessions share through a
// short place of the user's in /tmp (issue #34), as private: three sessions, one process per
// server, and nothing left after them.
func TestFaultShareLongTMPDIR(t *testing.T) {
	for _, n := range []int{48, 60} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			exe := ownBuild(t)
			tag := newTag(t)
			path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag)+`, "b": `+tagged(tag)+`}}`)
			tmp := dirOfLength(t, n-1) + "/" // n characters, as macOS spells it
			t.Setenv("TMPDIR", tmp)
			t.Setenv("XDG_RUNTIME_DIR", "")
			os.Unsetenv("XDG_RUNTIME_DIR")

			var sessions []*peer
			for i := range 3 {
				s := startPeer(t, exe, "--config", path, "--share", "--linger", "1s")
				s.initialize("test")
				sessions = append(sessions, s)
				for _, key := range []string{"a", "b"} {
					if m := s.call("tools/call", fmt.Sprintf(`{"name":"%s:echo","arguments":{"session":%d}}`, key, i)); !strings.Contains(string(m.Result), fmt.Sprintf(`"structuredContent":{"session":%d}`, i)) {
						t.Errorf("session %d, %s:echo: %s", i, key, m.Line)
					}
				}
			}
			if got := len(taggedProcs(tag)); got != 2 {
				t.Errorf("%d server processes for three sessions of two servers, want 2", got)
			}
			daemons := sharedProcsOf(exe)
			if len(daemons) != 1 {
				t.Fatalf("shared processes %v, want 1", daemons)
			}
			// The socket is where a Unix socket can be: in the temporary directory when its path
			// is short enough there (root's uid is short), else in the short place in /tmp.
			dir := filepath.Join(tmp, fmt.Sprintf("mcp-simple-aggregator-%d", os.Getuid()))
			for _, socket := range daemons {
				if len(filepath.Join(dir, filepath.Base(socket))) > 100 {
					dir = filepath.Join("/tmp", filepath.Base(dir))
				}
				if filepath.Dir(socket) != dir || len(socket) > 100 {
					t.Errorf("the socket is %s, want one of at most 100 bytes in %s", socket, dir)
				}
				if info, err := os.Lstat(dir); err != nil {
					t.Error(err)
				} else if !info.IsDir() || info.Mode().Perm() != 0o700 {
					t.Errorf("the place %s has mode %v, want a directory of mode 0700", dir, info.Mode())
				}
				if info, err := os.Stat(socket); err != nil {
					t.Error(err)
				} else if info.Mode().Perm() != 0o600 {
					t.Errorf("the socket %s has mode %v, want 0600", socket, info.Mode())
				}
			}
			for i, s := range sessions {
				if strings.Contains(s.stderr.String(), "runs its own servers") {
					t.Errorf("session %d did not share:\n%s", i, s.stderr)
				}
				s.in.Close()
			}
			noneLeft(t, tag)
			waitFor(t, "the end of the shared process after its last session and the linger", func() bool { return len(sharedProcsOf(exe)) == 0 })
			for _, socket := range daemons {
				if _, err := os.Lstat(socket); err == nil {
					t.Errorf("the socket %s outlived its shared process", socket)
				}
			}
		})
	}
}

// A client that stops reading holds up its own session at most: the shared process reads a
// server for every session that uses it, and what it hands the stalled session for its client
// is left to a background writer, never waited for. The other sessions of the server go on,
// and the stalled client, once it reads, gets every answer.
func TestFaultShareStalledClient(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag)+`}}`)
	other := shareSession(t, path)

	// The stalled session: its stdout is a pipe that nobody reads until the end.
	stdout, w := testPipe(t)
	stderr := new(lockedBuffer)
	cmd, stdin := rawSession(t, path, w, stderr)
	w.Close()
	const calls, size = 8, 1 << 20 // far more than the pipes between it and its client hold
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1.0"}}}`, // as other's: a legacy server is shared by the same client
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
	}
	for i := range calls {
		lines = append(lines, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"a:big","arguments":{"bytes":%d}}}`, 2+i, size))
	}
	if _, err := stdin.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(stderr.String(), fmt.Sprintf("fixture: big: %d bytes written", size)) < calls {
		if time.Now().After(deadline) {
			t.Fatalf("the server did not write its %d answers for the stalled session:\n%s", calls, stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if procs := taggedProcs(tag); len(procs) != 1 {
		t.Fatalf("%d processes of the server, want the one both sessions share", len(procs))
	}
	for i := range 3 {
		if m := other.call("tools/call", fmt.Sprintf(`{"name":"a:echo","arguments":{"n":%d}}`, i)); !strings.Contains(string(m.Result), fmt.Sprintf(`{"n":%d}`, i)) {
			t.Fatalf("the other session, while a client of the server does not read: %s", m.Line)
		}
	}

	// The stalled client reads at last: every answer is there, whole.
	got := map[string]int{}
	dec := json.NewDecoder(stdout)
	for len(got) < 1+calls {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("reading the stalled client's answers (%d of %d): %v", len(got), 1+calls, err)
		}
		if len(m.Result.Content) > 0 {
			got[string(m.ID)] = len(m.Result.Content[0].Text)
		} else {
			got[string(m.ID)] = 0
		}
	}
	for i := range calls {
		if n := got[fmt.Sprint(2+i)]; n != size {
			t.Errorf("answer %d: %d bytes of text, want %d", 2+i, n, size)
		}
	}
	stdin.Close()
	cmd.Wait()
	other.in.Close()
	nothingShared(t, dir, tag)
}

// The shared process writes a session's messages to its client itself (the forwarder out of the
// way), and dies in the middle of a large answer that the client reads slowly: the client's
// output then stops in the middle of a line, which the forwarder ends before it answers the call
// with an error, so that the error reaches the client whole, and the session goes on.
func TestFaultShareKilledMidAnswer(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag)+`}}`)
	stdout, w := testPipe(t)
	stderr := new(lockedBuffer)
	cmd, stdin := rawSession(t, path, w, stderr)
	w.Close()
	send := func(line string) {
		if _, err := stdin.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	r := bufio.NewReaderSize(stdout, 4<<20)
	read := func(what string) string {
		stdout.SetReadDeadline(time.Now().Add(20 * time.Second))
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading %s: %v (stderr:\n%s)", what, err, stderr)
		}
		return line
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1.0"}}}`)
	if line := read("the answer to initialize"); !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":1,"result":`) {
		t.Fatalf("initialize: %s", line)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if !sharedBy(t, dir, cmd.Process.Pid) {
		t.Fatal("the session's client output is written by its forwarder, not the shared process")
	}
	daemons := sharedProcs(dir)
	if len(daemons) != 1 {
		t.Fatalf("%d shared processes", len(daemons))
	}
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a:big","arguments":{"bytes":1048576}}}`)
	// The answer's start is in the pipe to the client, which reads nothing more yet: the rest
	// waits (the receipts said so before the first byte of it: clientOut.Write).
	deadline := time.Now().Add(20 * time.Second)
	for {
		var n int
		rc, err := stdout.SyscallConn() // not Fd, which would end the read deadlines
		if err == nil {
			err = rc.Control(func(fd uintptr) { n, err = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }) // FIONREAD: what the pipe holds
		}
		if err != nil {
			t.Fatal(err)
		}
		if n >= 32<<10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the answer did not fill the client's pipe (%d bytes)", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	syscall.Kill(daemons[0], syscall.SIGKILL)

	if cut := read("the answer cut short"); !strings.HasPrefix(cut, `{"jsonrpc":"2.0","id":2,"result":`) || json.Valid([]byte(cut)) || len(cut) >= 1<<20 {
		t.Errorf("the answer the shared process was writing as it was killed: %d bytes, %.80q", len(cut), cut)
	}
	if line := read("the error"); !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":2,"error":`) || !json.Valid([]byte(line)) || !strings.Contains(line, "ended with the shared process that ran it") {
		t.Errorf("the call cut short was answered with %.200q", line)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a:echo","arguments":{"n":3}}}`)
	if line := read("a call after the restart"); !strings.HasPrefix(line, `{"jsonrpc":"2.0","id":3,"result":`) || !strings.Contains(line, `{"n":3}`) {
		logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		var sb strings.Builder
		for _, l := range logs {
			data, _ := os.ReadFile(l)
			sb.Write(data)
		}
		t.Errorf("a call after the restart: %.200q\nstderr:\n%s\nlog:\n%s", line, stderr, sb.String())
	}
	stdin.Close()
	cmd.Wait()
	nothingShared(t, dir, tag)
}

// sharedBy says whether the client output of the forwarder pid is open in the shared process
// of dir: the shared process writes to the client itself.
func sharedBy(t *testing.T, dir string, pid int) bool {
	t.Helper()
	out, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/1", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range sharedProcs(dir) {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", d))
		for _, fd := range fds {
			if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", d, fd.Name())); err == nil && l == out {
				return true
			}
		}
	}
	return false
}

// The shared process writes to the client's stdout itself only when it is a pipe or a socket of
// its own (it makes it non-blocking): a stdout that stderr shares, or a file, gets the session's
// messages through a pipe of the forwarder's, which copies them there, all of them by the time
// it exits.
func TestFaultShareOutputKinds(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag)+`}}`)
	requests := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1.0"}}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a:echo","arguments":{"n":2}}}` + "\n"
	// stdout and stderr one pipe, as "2>&1" makes them.
	r, w := testPipe(t)
	cmd, stdin := rawSession(t, path, w, w)
	w.Close()
	if _, err := io.WriteString(stdin, requests); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(r)
	lines.Buffer(nil, 1<<20)
	for answered := false; !answered; {
		r.SetReadDeadline(time.Now().Add(20 * time.Second))
		if !lines.Scan() {
			t.Fatalf("the session with stdout and stderr one pipe: %v", lines.Err())
		}
		answered = strings.HasPrefix(lines.Text(), `{"jsonrpc":"2.0","id":2,"result":`) && strings.Contains(lines.Text(), `{"n":2}`)
	}
	if sharedBy(t, dir, cmd.Process.Pid) {
		t.Error("the shared process writes to a stdout that stderr shares")
	}
	stdin.Close()
	cmd.Wait()

	// stdout a file.
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd, stdin = rawSession(t, path, out, nil)
	if _, err := io.WriteString(stdin, requests); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the call's answer in the file", func() bool {
		data, _ := os.ReadFile(out.Name())
		return strings.Contains(string(data), `"id":2,"result":`)
	})
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("the session writing to a file: %v", err)
	}
	data, _ := os.ReadFile(out.Name())
	if got := strings.Split(strings.TrimSpace(string(data)), "\n"); len(got) != 2 || !json.Valid([]byte(got[0])) || !json.Valid([]byte(got[1])) {
		t.Errorf("the file holds:\n%s", data)
	}
	nothingShared(t, dir, tag)
}

// rawSession starts a session with --share whose client is the test, writing raw lines to its
// stdin; stdout and stderr are the test's to give. It is killed at the end of the test.
func rawSession(t *testing.T, path string, stdout, stderr io.Writer) (*exec.Cmd, io.WriteCloser) {
	t.Helper()
	cmd := exec.Command(aggBinary, "--config", path, "--share", "--linger", "1s")
	cmd.Env = append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, stdin
}

// testPipe is a pipe for a session's stdout, which nobody reads until the test does; its read
// end is closed at the end of the test, its write end is the caller's to close once the session
// has it.
func testPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, w
}
