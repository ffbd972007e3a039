package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stopCommand runs "mcp-simple-aggregator stop" and returns its stdout; it must exit with 0 and
// say nothing on stderr.
func stopCommand(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(aggBinary, "stop")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("stop: %v\nstdout: %s\nstderr: %s", err, out, stderr.String())
	}
	return string(out)
}

// stampedLine is a line of the shared process's log: it starts with its time.
var stampedLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(Z|[+-]\d\d:\d\d) `)

// sharedLog is the text of the shared process's log in dir; every line must start with its time.
func sharedLog(t *testing.T, dir string) string {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "shared-*.log"))
	if len(logs) != 1 {
		t.Fatalf("%d logs of a shared process in %s, want 1", len(logs), dir)
	}
	data, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if !stampedLine.MatchString(line) {
			t.Errorf("a line of the shared process's log without its time: %q", line)
		}
	}
	return string(data)
}

// stop ends the user's shared process gracefully: it says what it stopped (and that none runs
// when none does), the shared process and its servers end, and a session still attached goes
// on as after a crash of the shared process, in a new one. Every line of the shared process's
// log starts with its time.
func TestFaultShareStop(t *testing.T) {
	dir := shareDir(t)
	if out := stopCommand(t); out != "No shared process runs.\n" {
		t.Errorf("stop with no shared process: %q", out)
	}
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag)+`}}`)
	s0 := shareClient(t, path, "s0")
	if m := s0.call("tools/call", `{"name":"a:echo","arguments":{"back":1}}`); !strings.Contains(string(m.Result), `{"back":1}`) {
		t.Fatalf("a call before the stop: %s", m.Line)
	}
	old, daemons := taggedProcs(tag), sharedProcs(dir)
	if len(old) != 1 || len(daemons) != 1 {
		t.Fatalf("%d servers, %d shared processes", len(old), len(daemons))
	}
	if log := sharedLog(t, dir); !strings.Contains(log, "a session began") {
		t.Errorf("the shared process's log does not say a session began:\n%s", log)
	}

	out := stopCommand(t)
	want := "Stopped the shared process " + strconv.Itoa(daemons[0]) + " ("
	if !strings.HasPrefix(out, want) || !strings.Contains(out, "1 session was attached, 1 server stopped: a (") ||
		!strings.Contains(out, "pid "+strconv.Itoa(old[0])+")") {
		t.Errorf("stop said %q, want %q..., the session, and the server a with its pid %d", out, want, old[0])
	}
	// stop returns once the servers have ended; the shared process exits with them.
	if alive(old[0]) && !exits(old[0], time.Second) {
		t.Errorf("the server %d runs after stop returned", old[0])
	}
	if !exits(daemons[0], 10*time.Second) {
		t.Errorf("the shared process %d outlived stop", daemons[0])
	}

	// The session goes on, in a new shared process with a new server.
	waitFor(t, "a call after the stop", func() bool {
		m := s0.call("tools/call", `{"name":"a:echo","arguments":{"back":2}}`)
		return strings.Contains(string(m.Result), `{"back":2}`)
	})
	if n := len(sharedProcs(dir)); n != 1 {
		t.Errorf("%d shared processes after the stop, want 1", n)
	}
	if now := taggedProcs(tag); len(now) != 1 || now[0] == old[0] {
		t.Errorf("servers after the stop: %v (before: %v), want one new", now, old)
	}
	sharedLog(t, dir)
	s0.in.Close()
	nothingShared(t, dir, tag)
}

// stop ends the shared processes of other builds beside this build's (an older copy of the
// program, after an update), each with its servers.
func TestFaultShareStopOtherBuild(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag)+`}}`)
	other := filepath.Join(t.TempDir(), "mcp-simple-aggregator")
	data, err := os.ReadFile(aggBinary)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, data, 0o755); err != nil {
		t.Fatal(err)
	}
	this := shareClient(t, path, "this")
	older := startPeer(t, other, "--config", path, "--share", "--linger", "1s")
	older.initialize("older")
	for _, p := range []*peer{this.peer, older} {
		if m := p.call("tools/call", `{"name":"a:echo","arguments":{"back":1}}`); !strings.Contains(string(m.Result), `{"back":1}`) {
			t.Fatalf("a call: %s", m.Line)
		}
	}
	daemons := sharedProcs(dir)
	if len(daemons) != 2 {
		t.Fatalf("%d shared processes for two builds, want 2", len(daemons))
	}
	out := stopCommand(t)
	if n := strings.Count(out, "Stopped the shared process "); n != 2 {
		t.Errorf("stop stopped %d shared processes, want 2:\n%s", n, out)
	}
	for _, pid := range daemons {
		if !strings.Contains(out, "Stopped the shared process "+strconv.Itoa(pid)+" ") {
			t.Errorf("stop does not name the shared process %d:\n%s", pid, out)
		}
		if !exits(pid, 10*time.Second) {
			t.Errorf("the shared process %d outlived stop", pid)
		}
	}
	this.in.Close()
	older.in.Close()
	nothingShared(t, dir, tag)
}
