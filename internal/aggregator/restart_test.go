package aggregator

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Restarts racing reloads and Close (found in review): a bare command is looked up in the login
// shell's PATH (internal/child), so a fake $SHELL that sleeps first makes a restart's spawn take
// as long as the test needs.

// slowShell is a fake login shell that writes its process ID beside itself (see lookupPID),
// waits sleep, then prints the PATH holding the fixture.
func slowShell(t *testing.T, sleep string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "shell")
	script := "#!/bin/sh\necho $$ > " + p + ".pid\nsleep " + sleep + "\nPATH=" + filepath.Dir(fixtureBin) + ":$PATH exec /bin/sh -c \"$4\"\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// lookupPID waits until the slow shell runs (a lookup of a bare command asks it), and returns
// its process ID: the lookup is over when that process is.
func lookupPID(t *testing.T, shell string) int {
	t.Helper()
	var pid int
	waitFor(t, "a lookup asking the login shell "+shell, func() bool {
		b, err := os.ReadFile(shell + ".pid")
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	return pid
}

// startedPIDs are the process IDs of the log's "started" lines of the server key whose
// command is command, in order.
func startedPIDs(log, key, command string) []int {
	var pids []int
	for _, line := range strings.Split(log, "\n") {
		var pid int
		var got string
		if _, err := fmt.Sscanf(line, "mcp-simple-aggregator: debug: started server="+key+" pid=%d command=%s", &pid, &got); err == nil && got == command {
			pids = append(pids, pid)
		}
	}
	return pids
}

// A reload while a restart's try is spawning: the reload's process serves the new entry, and
// the try's process is stopped when it comes (never left running, never in the reload's place).
func TestRestartRacesReload(t *testing.T) {
	if !alive(os.Getpid()) {
		t.Skip("no /proc")
	}
	t.Setenv("SHELL", slowShell(t, "0"))
	c, path := serveFileOpts(t, `{"mcpServers": {"a": {"command": "fixture-server"}}}`,
		Options{MaxRestarts: 5, RestartDelay: 20 * time.Millisecond, StartupTimeout: 10 * time.Second})
	c.initialize(`{}`)
	first := c.pid("a:pid")
	shell := slowShell(t, "1.5") // the try's lookup of the bare command takes 1.5 s
	t.Setenv("SHELL", shell)
	c.send("tools/call", `{"name":"a:crash"}`)
	waitGone(t, first)
	lookupPID(t, shell) // the try is spawning the old entry
	writeFile(t, path, `{"mcpServers": {"a": {"command": "$FIXTURE", "env": {"V": "2"}}}}`)
	c.agg.Reload()
	reloaded := c.pid("a:pid")
	// The try's spawn is over: its process (of the old entry's bare command; the first is
	// the one that crashed) came, and is stopped.
	var tried []int
	waitFor(t, "the process of the try", func() bool {
		tried = startedPIDs(c.log.String(), "a", "fixture-server")
		return len(tried) == 2
	})
	waitGone(t, tried[1])
	if m := c.call("tools/call", `{"name":"a:getenv","arguments":{"name":"V"}}`); !strings.Contains(m.Line, `"value":"2"`) {
		t.Errorf("after the reload, a runs the old entry: %s", m.Line)
	}
	if now := c.pid("a:pid"); now != reloaded {
		t.Errorf("the reload's process %d was replaced by %d", reloaded, now)
	}
}

// Close while a restart's try is spawning: the try's process does not outlive Close.
func TestCloseDuringRestart(t *testing.T) {
	if !alive(os.Getpid()) {
		t.Skip("no /proc")
	}
	t.Setenv("SHELL", slowShell(t, "0"))
	c, _ := serveFileOpts(t, `{"mcpServers": {"a": {"command": "fixture-server", "args": ["-stubborn"]}}}`,
		Options{MaxRestarts: 5, RestartDelay: 20 * time.Millisecond, ShutdownGrace: 500 * time.Millisecond})
	c.initialize(`{}`)
	first := c.pid("a:pid")
	shell := slowShell(t, "1")
	t.Setenv("SHELL", shell)
	c.send("tools/call", `{"name":"a:crash"}`)
	waitGone(t, first)
	lookup := lookupPID(t, shell) // the try is spawning
	c.agg.Close()
	// Close waited for the try: its lookup is over (a spawn left running would still be in
	// it, a second long), and what it started is stopped.
	if alive(lookup) {
		t.Errorf("the try's lookup (the login shell, pid %d) still runs after Close returned", lookup)
	}
	if pids := fixtureChildren(); len(pids) > 0 {
		t.Errorf("processes of the fixture run after Close returned: %v", pids)
	}
}

// A restart waits until the process it replaces is stopped: the two never run at once.
func TestRestartAfterOldStopped(t *testing.T) {
	if !alive(os.Getpid()) {
		t.Skip("no /proc")
	}
	c := serve(t, Options{MaxRestarts: 5, RestartDelay: 20 * time.Millisecond, PingInterval: 100 * time.Millisecond,
		PingFailures: 2, ShutdownGrace: 500 * time.Millisecond}, fx("a", "-deaf", "-stubborn"))
	c.initialize(`{}`)
	old := c.pid("a:pid")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pid := c.agg.procOf("a"); pid != 0 && pid != old {
			if alive(old) {
				t.Fatalf("a new process of a (%d) runs while the old one (%d) still does", pid, old)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a was not restarted")
		}
		time.Sleep(time.Millisecond)
	}
}

// procOf is the process ID of the key's current process; 0 when it has none.
func (a *Aggregator) procOf(key string) int {
	a.roster.mu.Lock()
	defer a.roster.mu.Unlock()
	if sl := a.roster.slots[key]; sl != nil && sl.proc != nil {
		return sl.proc.proc.PID()
	}
	return 0
}

// fixtureChildren are the live children of this process that run the fixture.
func fixtureChildren() []int {
	var out []int
	self := itoa(os.Getpid())
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) > 1 && fields[1] == self && strings.Contains(string(stat), "fixture-server") && fields[0] != "Z" {
			pid, _ := strconv.Atoi(e.Name())
			out = append(out, pid)
		}
	}
	return out
}
