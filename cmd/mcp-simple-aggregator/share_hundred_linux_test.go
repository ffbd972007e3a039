package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A hundred sessions of one configuration at once (issue #34): every session is initialized,
// lists the tools and gets its own answers; three server processes serve them all; the
// program's processes (the sessions, the shared process, its watchdog) hold less than
// 1,100 MiB; and nothing is left after the last session and the linger. The sessions connect
// together: their initializes are all written before the first answer is read.
func TestFaultShareHundred(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag)+`, "b": `+tagged(tag)+`, "c": `+tagged(tag)+`}}`)
	const n = 100
	sessions := make([]*peer, n)
	pending := make([]<-chan message, n)
	for i := range sessions {
		sessions[i] = startPeer(t, aggBinary, "--config", path, "--share", "--linger", "1s")
		pending[i] = sessions[i].send("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1.0"}}`)
	}
	for i, s := range sessions {
		if m := s.wait(pending[i], "initialize"); m.Error != nil {
			t.Fatalf("session %d: initialize: %s", i, m.Line)
		}
		s.writeLine(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		pending[i] = s.send("tools/list", "")
	}
	var list []byte
	for i, s := range sessions {
		m := s.wait(pending[i], "tools/list")
		switch {
		case m.Error != nil || !strings.Contains(string(m.Result), `"name":"c:echo"`):
			t.Fatalf("session %d: tools/list: %s", i, m.Line)
		case list == nil:
			list = m.Result
		case string(m.Result) != string(list):
			t.Errorf("session %d lists\n%s\nsession 0:\n%s", i, m.Result, list)
		}
		pending[i] = s.send("tools/call", fmt.Sprintf(`{"name":"%c:echo","arguments":{"session":%d}}`, "abc"[i%3], i))
	}
	for i, s := range sessions {
		if m := s.wait(pending[i], "tools/call"); !strings.Contains(string(m.Result), fmt.Sprintf(`"structuredContent":{"session":%d}`, i)) {
			t.Errorf("session %d got %s, want its own echo", i, m.Line)
		}
	}

	if got := len(taggedProcs(tag)); got != 3 {
		t.Errorf("%d server processes for a hundred sessions of three servers, want 3", got)
	}
	shared := sharedProcs(dir)
	if len(shared) != 1 {
		t.Fatalf("%d shared processes, want 1", len(shared))
	}
	pids := append(shared, childrenNamed(shared[0], "__watchdog")...)
	for _, s := range sessions {
		pids = append(pids, s.cmd.Process.Pid)
	}
	var total int64
	for _, pid := range pids {
		total += statusNumber(pid, "VmRSS")
	}
	// Under the race detector every process carries the detector's shadow memory.
	if limit := int64(1100 << 10); !raceEnabled && total > limit {
		t.Errorf("the program's %d processes hold %d MiB, want under %d MiB", len(pids), total>>10, limit>>10)
	}
	t.Logf("the program's %d processes hold %d MiB", len(pids), total>>10)

	for _, s := range sessions {
		s.in.Close()
	}
	for i, s := range sessions {
		if !exits(s.cmd.Process.Pid, 20*time.Second) {
			t.Errorf("session %d did not exit once its input ended", i)
		}
	}
	nothingShared(t, dir, tag)
}

// childrenNamed are the processes started by pid whose first argument is name.
func childrenNamed(pid int, name string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if args := strings.Fields(cmdline(child)); len(args) >= 2 && args[1] == name && statusNumber(child, "PPid") == int64(pid) {
			out = append(out, child)
		}
	}
	return out
}

// statusNumber is the number in the field of /proc/PID/status (VmRSS: KiB; PPid); 0 when there
// is none.
func statusNumber(pid int, field string) int64 {
	data, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
