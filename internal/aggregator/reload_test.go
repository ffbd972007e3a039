package aggregator

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/logging"
)

// serveFile serves the configuration text (with "$FIXTURE" for the fixture server) from a real
// file, so that Reload reads it again; it returns the client and the file's path.
func serveFile(t *testing.T, text string) (*client, string) {
	t.Helper()
	return serveFileOpts(t, text, Options{})
}

func serveFileOpts(t *testing.T, text string, opts Options) (*client, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	writeFile(t, path, text)
	cfg, _, err := config.Load(path, os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	log := &lockedLog{}
	opts.Log, opts.Stderr = logging.New(log, slog.LevelDebug), log
	agg, err := Start(context.Background(), cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return connectClient(t, agg, log), path
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	quoted, _ := json.Marshal(fixtureBin)
	text = strings.ReplaceAll(text, `"$FIXTURE"`, string(quoted))
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// pid returns the process ID of the server behind the tool name (the fixture's pid tool).
func (c *client) pid(tool string) int {
	c.t.Helper()
	m := c.call("tools/call", `{"name":"`+tool+`"}`)
	var res struct {
		Structured struct {
			PID int `json:"pid"`
		} `json:"structuredContent"`
	}
	if json.Unmarshal(m.Result, &res) != nil || res.Structured.PID == 0 {
		c.t.Fatalf("%s: %s", tool, m.Line)
	}
	return res.Structured.PID
}

// noNote fails when a notification with method arrives within d.
func (c *client) noNote(method string, d time.Duration) {
	c.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case m := <-c.notes:
			if m.Method == method {
				c.t.Errorf("an unexpected %s", m.Line)
			}
		case <-deadline:
			return
		}
	}
}

// A reload applies the new file per key: added started, removed stopped, changed restarted,
// unchanged untouched (same process); one list_changed per list after it settles.
func TestReloadApplies(t *testing.T) {
	c, path := serveFile(t, `{"mcpServers": {
		"same": {"command": "$FIXTURE"},
		"changed": {"command": "$FIXTURE", "env": {"V": "1"}},
		"gone": {"command": "$FIXTURE"}}}`)
	c.initialize(`{}`)
	same, changed := c.pid("same:pid"), c.pid("changed:pid")
	gone := c.pid("gone:pid")

	writeFile(t, path, `{"mcpServers": {
		"same": {"command": "$FIXTURE"},
		"changed": {"command": "$FIXTURE", "env": {"V": "2"}},
		"new": {"command": "$FIXTURE", "args": ["-full"]},
		"gone": {"command": "$FIXTURE", "disabled": true}}}`)
	c.agg.Reload()
	c.note("notifications/tools/list_changed")
	c.note("notifications/prompts/list_changed")
	// A second one would come from the debouncer's timer (changes.go), which no answer to a
	// request of the client's is ordered with: nothing marks its absence but time, twenty of
	// its 10 ms delays.
	c.noNote("notifications/tools/list_changed", 200*time.Millisecond)
	if got := c.pid("same:pid"); got != same {
		t.Errorf("the unchanged server was restarted: pid %d, then %d", same, got)
	}
	if got := c.pid("changed:pid"); got == changed {
		t.Errorf("the changed server kept its process %d", got)
	}
	if m := c.call("tools/call", `{"name":"changed:getenv","arguments":{"name":"V"}}`); !strings.Contains(m.Line, `"value":"2"`) {
		t.Errorf("the restarted server: %s", m.Line)
	}
	wantError(t, c.call("tools/call", `{"name":"gone:pid"}`), -32602, "Unknown tool: gone:pid")
	if got := c.pid("new:pid"); got == 0 {
		t.Errorf("the added server does not serve")
	}
	if m := c.call("prompts/list", ""); !strings.Contains(m.Line, `"new:greet"`) {
		t.Errorf("prompts/list after the reload: %s", m.Line)
	}
	waitGone(t, changed)
	waitGone(t, gone)
	if !strings.Contains(c.log.String(), "reload: 1 added, 1 removed, 1 restarted, 0 refiltered, 1 unchanged") {
		t.Errorf("no summary line in the log:\n%s", c.log)
	}
}

// waitGone waits until the process pid has exited.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Errorf("process %d still runs", pid)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Nothing in flight is lost: a call in flight to a server being restarted is answered by the
// old process; a call that arrives meanwhile waits for the new one.
func TestReloadKeepsCallsInFlight(t *testing.T) {
	c, path := serveFile(t, `{"mcpServers": {"a": {"command": "$FIXTURE", "env": {"V": "1"}}}}`)
	c.initialize(`{}`)
	old := c.pid("a:pid")
	slow := c.send("tools/call", `{"name":"a:sleep","arguments":{"ms":400}}`)
	waitFor(t, "the slow call in flight before the reload decides", func() bool { return c.agg.inflight.inFlight() > 0 })
	writeFile(t, path, `{"mcpServers": {"a": {"command": "$FIXTURE", "env": {"V": "2"}}}}`)
	done := make(chan struct{})
	go func() { c.agg.Reload(); close(done) }()
	c.waitDraining("a")
	late := c.send("tools/call", `{"name":"a:pid"}`)
	if m := c.wait(slow, "the call in flight"); m.Error != nil || !strings.Contains(m.Line, "slept 400 ms") {
		t.Errorf("the call in flight: %s", m.Line)
	}
	m := c.wait(late, "the call that came during the reload")
	var res struct {
		Structured struct {
			PID int `json:"pid"`
		} `json:"structuredContent"`
	}
	if json.Unmarshal(m.Result, &res) != nil || res.Structured.PID == 0 || res.Structured.PID == old {
		t.Errorf("the call during the reload: %s (old process %d)", m.Line, old)
	}
	<-done
	waitGone(t, old)
}

// waitDraining waits until a reload drains the serving server key, from the log of the move
// (roster.go: move): a drain with nothing in flight can be over before a poll of the state
// sees it. Calls that come after it wait for the new process.
func (c *client) waitDraining(key string) {
	c.t.Helper()
	c.waitLog("state server=" + key + " from=serving to=draining")
}

// A file that cannot be used changes nothing; the client and the log are told.
func TestReloadInvalidChangesNothing(t *testing.T) {
	c, path := serveFile(t, `{"mcpServers": {"a": {"command": "$FIXTURE"}}}`)
	c.initialize(`{}`)
	before := c.pid("a:pid")
	for _, bad := range []string{`{"mcpServers": {"a": {"command": `, `{"mcpServers": {"a": {"command": "$FIXTURE", "env": {"T": "${NOT_SET_FOR_RELOAD}"}}}}`} {
		writeFile(t, path, bad)
		c.agg.Reload()
		if m := c.note("notifications/message"); !strings.Contains(string(m.Params), "reload: ") || !strings.Contains(string(m.Params), "the servers keep running as they were") {
			t.Errorf("the client was told: %s", m.Line)
		}
		if got := c.pid("a:pid"); got != before {
			t.Errorf("the server changed: %d, then %d", before, got)
		}
	}
}

// A server that crashed comes back with a reload of the same file; a change of filters only
// updates the list, with the same process.
func TestReloadBringsBackAndRefilters(t *testing.T) {
	c, path := serveFileOpts(t, `{"mcpServers": {"a": {"command": "$FIXTURE"}, "b": {"command": "$FIXTURE"}}}`, Options{MaxRestarts: 0})
	c.initialize(`{}`)
	wantError(t, c.call("tools/call", `{"name":"a:crash"}`), -32603, `server "a"`)
	c.note("notifications/tools/list_changed")
	wantError(t, c.call("tools/call", `{"name":"a:pid"}`), -32602, "Unknown tool")
	c.agg.Reload()
	c.note("notifications/tools/list_changed")
	if got := c.pid("a:pid"); got == 0 {
		t.Errorf("the crashed server did not come back")
	}
	b := c.pid("b:pid")
	writeFile(t, path, `{"mcpServers": {"a": {"command": "$FIXTURE"}, "b": {"command": "$FIXTURE", "excludeTools": ["echo"]}}}`)
	c.agg.Reload()
	c.note("notifications/tools/list_changed")
	wantError(t, c.call("tools/call", `{"name":"b:echo"}`), -32602, `hidden by "excludeTools"`)
	if got := c.pid("b:pid"); got != b {
		t.Errorf("a change of filters restarted the server: %d, then %d", b, got)
	}
}

// A reload before the client has initialized respawns what changed; the client's initialize
// then initializes the new set.
func TestReloadBeforeClient(t *testing.T) {
	c, path := serveFile(t, `{"mcpServers": {"a": {"command": "$FIXTURE"}}}`)
	writeFile(t, path, `{"mcpServers": {"a": {"command": "$FIXTURE", "env": {"V": "2"}}, "b": {"command": "/no/such/server"}, "c": {"command": "$FIXTURE"}}}`)
	c.agg.Reload()
	c.initialize(`{}`)
	if m := c.call("tools/call", `{"name":"a:getenv","arguments":{"name":"V"}}`); !strings.Contains(m.Line, `"value":"2"`) {
		t.Errorf("a after the reload: %s", m.Line)
	}
	if c.pid("c:pid") == 0 {
		t.Errorf("c does not serve")
	}
	if m := c.note("notifications/message"); !strings.Contains(string(m.Params), `server \"b\" could not start`) {
		t.Errorf("b's failure: %s", m.Line)
	}
}

// A change of filters alone that would expose a name twice is refused: the old filters stay,
// the catalog stays whole, and the reload says why.
func TestReloadRefilterCollision(t *testing.T) {
	c, path := serveFile(t, `{"mcpServers": {"a": {"command": "$FIXTURE", "args": ["-prefix", "x:"], "excludeTools": ["*"]}, "a:x": {"command": "$FIXTURE"}}}`)
	c.initialize(`{}`)
	writeFile(t, path, `{"mcpServers": {"a": {"command": "$FIXTURE", "args": ["-prefix", "x:"]}, "a:x": {"command": "$FIXTURE"}}}`)
	c.agg.Reload()
	if got := names(t, c.call("tools/list", ""), "tools"); len(got) != 13 {
		t.Errorf("tools/list after the refused refilter: %d tools, want a:x's 13", len(got))
	}
	if m := c.note("notifications/message"); !strings.Contains(string(m.Params), `server \"a\" keeps its previous tool filters`) {
		t.Errorf("the client was told: %s", m.Line)
	}
}

// A restarted server's waiting calls are released as soon as it is back, not when every other
// server of the reload is (one here never answers initialize).
func TestReloadReleasesEachKey(t *testing.T) {
	c, path := serveFileOpts(t, `{"mcpServers": {"a": {"command": "$FIXTURE", "env": {"V": "1"}}}}`, Options{StartupTimeout: 3 * time.Second})
	c.initialize(`{}`)
	writeFile(t, path, `{"mcpServers": {"a": {"command": "$FIXTURE", "env": {"V": "2"}}, "slow": {"command": "$FIXTURE", "args": ["-hang-at-start"]}}}`)
	done := make(chan struct{})
	go func() { c.agg.Reload(); close(done) }()
	c.waitDraining("a")
	start := time.Now()
	m := c.call("tools/call", `{"name":"a:getenv","arguments":{"name":"V"}}`)
	if !strings.Contains(m.Line, `"value":"2"`) || time.Since(start) > 2*time.Second {
		t.Errorf("after %v: %s", time.Since(start), m.Line)
	}
	<-done
}

// A list change of another server while one restarts leaves the restarting server's tools in
// place (its calls wait, they do not become unknown).
func TestReloadRefreshDuringRestart(t *testing.T) {
	c, path := serveFileOpts(t, `{"mcpServers": {"a": {"command": "$FIXTURE", "env": {"V": "1"}}, "b": {"command": "$FIXTURE"}}}`, Options{StartupTimeout: 3 * time.Second})
	c.initialize(`{}`)
	writeFile(t, path, `{"mcpServers": {"a": {"command": "$FIXTURE", "env": {"V": "2"}}, "b": {"command": "$FIXTURE"}, "slow": {"command": "$FIXTURE", "args": ["-hang-at-start"]}}}`)
	done := make(chan struct{})
	go func() { c.agg.Reload(); close(done) }()
	c.waitDraining("a")
	c.call("tools/call", `{"name":"b:grow"}`) // b announces a list change
	if m := c.call("tools/call", `{"name":"a:pid"}`); m.Error != nil {
		t.Errorf("a call of the restarting server: %s", m.Line)
	}
	<-done
	if got := names(t, c.call("tools/list", ""), "tools"); !slices.Contains(got, "b:grown_1") || !slices.Contains(got, "a:pid") {
		t.Errorf("after the reload: %v", got)
	}
}

// A call held for a restart whose new process cannot start is told so.
func TestReloadRestartFails(t *testing.T) {
	c, path := serveFile(t, `{"mcpServers": {"a": {"command": "$FIXTURE"}}}`)
	c.initialize(`{}`)
	slow := c.send("tools/call", `{"name":"a:sleep","arguments":{"ms":300}}`)
	waitFor(t, "the slow call in flight before the reload decides", func() bool { return c.agg.inflight.inFlight() > 0 })
	writeFile(t, path, `{"mcpServers": {"a": {"command": "/no/such/server"}}}`)
	done := make(chan struct{})
	go func() { c.agg.Reload(); close(done) }()
	c.waitDraining("a")
	held := c.send("tools/call", `{"name":"a:echo"}`)
	if m := c.wait(slow, "the call in flight"); m.Error != nil {
		t.Errorf("the call in flight: %s", m.Line)
	}
	wantError(t, c.wait(held, "the held call"), -32603, `Server unavailable: server "a" could not start: start "/no/such/server": `)
	<-done
}
