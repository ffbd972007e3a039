package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Restarts (issue #20), with the real binary: a crashed server comes back under the same names,
// what it had in flight fails once with the crash, a crash loop is bounded and given up, and
// nothing is left running.

// restartFlags make restarts quick: tries after 100 ms, 200 ms, 400 ms, ...
var restartFlags = []string{"--restart-delay", "100ms"}

// A crash during a call: the call fails with the crash, the server is back with its tools under
// the same names (no list change: the new process lists the same), one process each.
func TestFaultRestartAfterCrash(t *testing.T) {
	tag := newTag(t)
	agg := startAggregator(t, `{"mcpServers": {"victim": `+tagged(tag)+`, "other": `+tagged(tag)+`}}`, append(restartFlags, "--debug")...)
	agg.initialize("test")
	_, before := tools(t, agg.call("tools/list", ""))
	old := pidOf(agg, "victim:pid")
	m := agg.call("tools/call", `{"name":"victim:crash","arguments":{}}`)
	if !strings.Contains(string(m.Error), `server \"victim\" exited with status 3 while calling tool \"crash\"; it is restarted in 100ms`) {
		t.Errorf("the call in flight: %s", m.Line)
	}
	// A call made while it restarts waits for the new process.
	if m := agg.call("tools/call", `{"name":"victim:echo","arguments":{"k":1}}`); m.Error != nil || !strings.Contains(string(m.Result), `"structuredContent":{"k":1}`) {
		t.Errorf("a call during the restart: %s", m.Line)
	}
	if pid := pidOf(agg, "victim:pid"); pid == 0 || pid == old {
		t.Errorf("the server's process: %d, then %d", old, pid)
	}
	if !exits(old, 5*time.Second) {
		t.Errorf("the crashed process %d still runs", old)
	}
	_, after := tools(t, agg.call("tools/list", ""))
	if strings.Join(before, ",") != strings.Join(after, ",") {
		t.Errorf("tools/list after the restart:\n%v\nbefore:\n%v", after, before)
	}
	// A list_changed would come from the aggregator's debouncer timer, which no answer is
	// ordered with: nothing marks its absence but time, thirty of its 10 ms delays.
	if agg.note("notifications/tools/list_changed", 300*time.Millisecond) {
		t.Errorf("a list_changed for a restart that lists the same")
	}
	if n := len(taggedProcs(tag)); n != 2 {
		t.Errorf("%d processes run, want 2", n)
	}
	stderr := agg.stderr.String()
	if strings.Count(stderr, `server "victim" exited with status 3; it is restarted in 100ms (try 1 of 5)`) != 1 ||
		strings.Count(stderr, `server "victim" was restarted (try 1) and serves again`) != 1 ||
		!strings.Contains(stderr, `debug: state server=victim from=serving to="waiting to restart" why="exited with status 3" tries=0`) ||
		!strings.Contains(stderr, `debug: restarting server=victim try=1 of=5`) ||
		!strings.Contains(stderr, `debug: state server=victim from=starting to=serving why="" tries=1`) {
		t.Errorf("stderr:\n%s", stderr)
	}
	endSession(t, agg, tag)
}

// A server that dies at once on every restart is given up after --max-restarts tries, within
// the backoff's time, with one line per try: its tools leave the list, and a reload (SIGHUP)
// brings it back once it can start.
func TestFaultRestartGivesUp(t *testing.T) {
	tag := newTag(t)
	dieFile := filepath.Join(t.TempDir(), "die")
	agg := startAggregator(t, `{"mcpServers": {"loop": `+tagged(tag, "-exit-at-start-if", dieFile)+`, "other": `+tagged(tag)+`}}`,
		"--restart-delay", "50ms", "--max-restarts", "4")
	agg.initialize("test")
	os.WriteFile(dieFile, nil, 0o600)
	start := time.Now()
	agg.call("tools/call", `{"name":"loop:crash","arguments":{}}`)
	if !agg.note("notifications/tools/list_changed", 10*time.Second) {
		t.Fatalf("no list_changed after giving up; stderr:\n%s", agg.stderr)
	}
	// Tries after 50, 100, 200 and 400 ms: 750 ms of waiting, plus four starts.
	if took := time.Since(start); took < 750*time.Millisecond || took > 8*time.Second {
		t.Errorf("given up after %v", took)
	}
	// stderr is read apart from stdout: the lines of the give-up and of the last start may
	// still be on their way when list_changed is here.
	waitSaid(t, agg, `is given up after 4 restarts in a row`, 1)
	waitSaid(t, agg, "[loop] fixture: exiting at start", 4)
	stderr := agg.stderr.String()
	if n := strings.Count(stderr, `server "loop": restart try`); n != 3 {
		t.Errorf("%d failed tries reported before the last, want 3:\n%s", n, stderr)
	}
	if n := strings.Count(stderr, `is given up after 4 restarts in a row (--max-restarts 4)`); n != 1 {
		t.Errorf("%d give-ups reported, want 1:\n%s", n, stderr)
	}
	// A try is one start: the key's last process served in the legacy era, so its new ones
	// get initialize without a probe, and a process that exits at once is not started twice.
	if n := strings.Count(stderr, "[loop] fixture: exiting at start"); n != 4 {
		t.Errorf("%d starts for --max-restarts 4, want 4:\n%s", n, stderr)
	}
	wantErrorText(t, agg.call("tools/call", `{"name":"loop:echo","arguments":{}}`), "Unknown tool: loop:echo")
	if pidOf(agg, "other:pid") == 0 {
		t.Errorf("the other server does not serve")
	}
	os.Remove(dieFile)
	agg.cmd.Process.Signal(syscall.SIGHUP)
	waitTool(t, agg, "loop:echo", true)
	if pidOf(agg, "loop:pid") == 0 {
		t.Errorf("the server did not come back with the reload")
	}
	endSession(t, agg, tag)
}

// --max-restarts N means N starts: with 1, a server that dies at once on every start is started
// once after its crash, not twice (once for the probe, once for initialize).
func TestFaultRestartTryIsOneStart(t *testing.T) {
	tag := newTag(t)
	dieFile := filepath.Join(t.TempDir(), "die")
	agg := startAggregator(t, `{"mcpServers": {"loop": `+tagged(tag, "-exit-at-start-if", dieFile)+`}}`,
		"--restart-delay", "50ms", "--max-restarts", "1", "--debug")
	agg.initialize("test")
	os.WriteFile(dieFile, nil, 0o600)
	agg.call("tools/call", `{"name":"loop:crash","arguments":{}}`)
	if !agg.note("notifications/tools/list_changed", 10*time.Second) {
		t.Fatalf("no list_changed after giving up; stderr:\n%s", agg.stderr)
	}
	waitSaid(t, agg, "given up after 1 restarts in a row", 1) // stderr comes apart from list_changed
	waitSaid(t, agg, "[loop] fixture: exiting at start", 1)
	stderr := agg.stderr.String()
	if n := strings.Count(stderr, "[loop] fixture: exiting at start"); n != 1 {
		t.Errorf("%d starts for --max-restarts 1, want 1:\n%s", n, stderr)
	}
	if !strings.Contains(stderr, "era: legacy (its last process served in the legacy era; not probed) server=loop") {
		t.Errorf("the try was probed:\n%s", stderr)
	}
	endSession(t, agg, tag)
}

// A call the client cancels while it is held for a restarting server is never sent (a
// destructive tool the user stopped must not run once the server is back), and the calls held
// beside it go on.
func TestFaultCancelledHeldCall(t *testing.T) {
	tag := newTag(t)
	record := filepath.Join(t.TempDir(), "calls")
	agg := startAggregator(t, `{"mcpServers": {"s": `+tagged(tag, "-record", record)+`}}`, "--restart-delay", "500ms", "--debug")
	agg.initialize("test")
	if m := agg.call("tools/call", `{"name":"s:crash","arguments":{}}`); m.Error == nil {
		t.Fatalf("the crash: %s", m.Line)
	}
	stopped := agg.send("tools/call", `{"name":"s:echo","arguments":{"tag":"stopped"}}`)
	agg.mu.Lock()
	stoppedID := agg.nextID
	agg.mu.Unlock()
	kept := agg.send("tools/call", `{"name":"s:echo","arguments":{"tag":"kept"}}`)
	agg.writeLine(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"the user stopped it"}}`, stoppedID))
	if m := agg.wait(kept, "the call held beside it"); m.Error != nil || !strings.Contains(string(m.Result), `"tag":"kept"`) {
		t.Errorf("the call held beside the cancelled one: %s", m.Line)
	}
	// A marker call: the held calls were released together, in order, before it is even sent,
	// and the server answers an echo as soon as it reads it, so an answer to the cancelled call
	// (the aggregator's, or the server's had it been sent) would have come before the marker's.
	if m := agg.call("tools/call", `{"name":"s:echo","arguments":{"tag":"marker"}}`); m.Error != nil {
		t.Errorf("the marker call: %s", m.Line)
	}
	select {
	case m := <-stopped:
		t.Errorf("the cancelled call was answered: %s", m.Line)
	default:
	}
	calls, _ := os.ReadFile(record)
	if strings.Contains(string(calls), "stopped") || !strings.Contains(string(calls), "kept") {
		t.Errorf("the server was asked:\n%s", calls)
	}
	if !strings.Contains(agg.stderr.String(), "the client cancelled a call held for its server: it is not sent") {
		t.Errorf("stderr:\n%s", agg.stderr)
	}
	endSession(t, agg, tag)
}

// A server that stops answering its health probes is restarted like one that crashed.
func TestFaultRestartHungServer(t *testing.T) {
	tag := newTag(t)
	agg := startAggregator(t, `{"mcpServers": {"deaf": `+tagged(tag, "-ignore-pings")+`}}`,
		"--ping-interval", "100ms", "--ping-failures", "2", "--restart-delay", "100ms", "--max-restarts", "1000")
	agg.initialize("test")
	first := pidOf(agg, "deaf:pid")
	if !exits(first, 5*time.Second) {
		t.Fatalf("the hung server %d was not stopped; stderr:\n%s", first, agg.stderr)
	}
	waitFor(t, "a new process of deaf", func() bool { pid := pidOf(agg, "deaf:pid"); return pid != 0 && pid != first })
	if !strings.Contains(agg.stderr.String(), `server "deaf" did not answer 2 pings in a row (--ping-interval 100ms, --ping-failures 2); it is restarted in 100ms`) {
		t.Errorf("stderr:\n%s", agg.stderr)
	}
	endSession(t, agg, tag)
}

// --max-restarts 0: a crashed server stays down until the file is saved.
func TestFaultRestartsOff(t *testing.T) {
	tag := newTag(t)
	path := filepath.Join(t.TempDir(), "config.json")
	os.WriteFile(path, []byte(reloadConfig(tag, "a", "b")), 0o600)
	agg := startPeer(t, aggBinary, "--config", path, "--max-restarts", "0", "--restart-delay", "10ms")
	agg.initialize("test")
	agg.call("tools/call", `{"name":"a:crash","arguments":{}}`)
	waitTool(t, agg, "a:echo", false)
	// A restart would come --restart-delay after the crash, from a timer that no answer is
	// ordered with: nothing marks its absence but time, fifty of those delays.
	time.Sleep(500 * time.Millisecond)
	if len(taggedProcs(tag)) != 1 {
		t.Errorf("a crashed server was restarted with --max-restarts 0")
	}
	wantErrorText(t, agg.call("tools/call", `{"name":"a:echo","arguments":{}}`), "Unknown tool: a:echo")
	os.WriteFile(path, []byte(reloadConfig(tag, "a", "b")), 0o600) // saved as it was
	waitTool(t, agg, "a:echo", true)
	endSession(t, agg, tag)
}

// What the client set up on a server is set up again on its new process: its resource
// subscriptions and its log level.
func TestFaultRestartKeepsSetup(t *testing.T) {
	tag := newTag(t)
	agg := startAggregator(t, `{"mcpServers": {"s": `+tagged(tag, "-full")+`}}`, restartFlags...)
	agg.initialize("test")
	if m := agg.call("resources/subscribe", `{"uri":"fixture://static/a"}`); m.Error != nil {
		t.Fatalf("subscribe: %s", m.Line)
	}
	if m := agg.call("logging/setLevel", `{"level":"error"}`); m.Error != nil {
		t.Fatalf("setLevel: %s", m.Line)
	}
	old := pidOf(agg, "s:pid")
	agg.call("tools/call", `{"name":"s:crash","arguments":{}}`)
	waitFor(t, "a new process of s", func() bool { pid := pidOf(agg, "s:pid"); return pid != 0 && pid != old })
	drain(agg)
	if m := agg.call("tools/call", `{"name":"s:touch","arguments":{"uri":"fixture://static/a"}}`); !strings.Contains(string(m.Result), `"subscribed":true`) {
		t.Errorf("the new process is not subscribed: %s", m.Line)
	}
	if !agg.note("notifications/resources/updated", 5*time.Second) {
		t.Errorf("no notifications/resources/updated from the new process")
	}
	agg.call("tools/call", `{"name":"s:log","arguments":{}}`)
	// The server writes its messages before its answer, and the aggregator passes a server's
	// lines on in order (fromserver.go: readServer): they are all in before the answer.
	levels := map[string]bool{}
	for {
		select {
		case m := <-agg.notes:
			if m.Method == "notifications/message" && strings.Contains(string(m.Params), `"logger":"s"`) {
				var p struct{ Level string }
				json.Unmarshal(m.Params, &p)
				levels[p.Level] = true
			}
			continue
		default:
		}
		break
	}
	if levels["warning"] || levels["info"] || !levels["error"] {
		t.Errorf("the levels the new process logged at: %v (the client asked for error and above)", levels)
	}
	endSession(t, agg, tag)
}

// Eight callers through a crash and its restart (under -race with `make faults`): every call is
// answered exactly once, with its result or with the crash error; nothing is left running.
func TestFaultRestartUnderLoad(t *testing.T) {
	tag := newTag(t)
	agg := startAggregator(t, `{"mcpServers": {"a": `+tagged(tag)+`}}`, restartFlags...)
	agg.initialize("test")
	old := pidOf(agg, "a:pid")
	var calls, crashed atomic.Int64
	load := startCallers(t, 8, func(g int) {
		m := agg.call("tools/call", `{"name":"a:echo","arguments":{"g":`+itoa(g)+`}}`)
		calls.Add(1)
		switch {
		case m.Error == nil && strings.Contains(string(m.Result), `"structuredContent":{"g":`+itoa(g)+`}`):
		case strings.Contains(string(m.Error), `server \"a\" exited with status 3 while calling tool \"echo\"`):
			crashed.Add(1)
		default:
			t.Errorf("a call through the restart: %s", m.Line)
		}
	})
	load.waitAnswered(t, "the callers' first calls")
	agg.call("tools/call", `{"name":"a:crash","arguments":{}}`)
	waitFor(t, "a new process of a", func() bool { pid := pidOf(agg, "a:pid"); return pid != 0 && pid != old })
	load.waitAnswered(t, "the callers' calls to the new process")
	load.end()
	agg.mu.Lock()
	left := len(agg.waiting)
	agg.mu.Unlock()
	if left != 0 {
		t.Errorf("%d calls unanswered", left)
	}
	t.Logf("%d calls, %d failed by the crash", calls.Load(), crashed.Load())
	endSession(t, agg, tag)
}

// callers are goroutines that call without pause, each counting its calls, until the end.
type callers struct {
	stop  atomic.Bool
	wg    sync.WaitGroup
	calls []atomic.Int64 // by caller: the calls made and answered
}

// startCallers starts n callers, caller g running call(g) again and again (it waits for its
// answer); they end with the test at the latest.
func startCallers(t *testing.T, n int, call func(g int)) *callers {
	c := &callers{calls: make([]atomic.Int64, n)}
	for g := range n {
		c.wg.Go(func() {
			for !c.stop.Load() {
				call(g)
				c.calls[g].Add(1)
			}
		})
	}
	t.Cleanup(c.end)
	return c
}

// waitAnswered waits until every caller has had the answer to a call it made after
// waitAnswered was called (two more calls: the one under way then may have been sent before).
func (c *callers) waitAnswered(t *testing.T, what string) {
	t.Helper()
	since := make([]int64, len(c.calls))
	for g := range c.calls {
		since[g] = c.calls[g].Load()
	}
	waitFor(t, what, func() bool {
		for g := range c.calls {
			if c.calls[g].Load() < since[g]+2 {
				return false
			}
		}
		return true
	})
}

// end stops the callers and waits for their last calls.
func (c *callers) end() {
	c.stop.Store(true)
	c.wg.Wait()
}

// drain empties the notifications received so far.
func drain(agg *peer) {
	for {
		select {
		case <-agg.notes:
		default:
			return
		}
	}
}

// wantErrorText fails unless m is an error whose message contains text.
func wantErrorText(t *testing.T, m message, text string) {
	t.Helper()
	var e struct{ Message string }
	if json.Unmarshal(m.Error, &e) != nil || !strings.Contains(e.Message, text) {
		t.Errorf("want an error with %q: %s", text, m.Line)
	}
}
