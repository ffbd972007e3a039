package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// No process started by the aggregator, or by its children, outlives it: after the end of its
// input, SIGTERM or SIGINT (with a child that ignores both EOF and SIGTERM, and one that
// leaves a grandchild holding its stdout), and after SIGKILL (Linux's parent-death signal and
// the watchdog).
func TestNoDescendantSurvives(t *testing.T) {
	const withGrandchild = `{"mcpServers": {"stubborn": {"command": "$FIXTURE", "args": ["-stubborn"]}, "parent": {"command": "$FIXTURE", "args": ["-grandchild"]}}}`
	for _, tc := range []struct {
		name   string
		config string
		end    func(p *peer)
	}{
		{"eof", withGrandchild,
			func(p *peer) { p.in.Close() }},
		{"sigterm", withGrandchild,
			func(p *peer) { p.cmd.Process.Signal(syscall.SIGTERM) }},
		{"sigint", withGrandchild,
			func(p *peer) { p.cmd.Process.Signal(syscall.SIGINT) }},
		// SIGKILL leaves no chance to clean up: the kernel's parent-death signal ends the
		// children, the watchdog the grandchild (which ignores the end of its input).
		{"sigkill", withGrandchild,
			func(p *peer) { p.cmd.Process.Kill() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			agg := startAggregator(t, tc.config)
			agg.initialize("test")
			// Everything is up once a call went through each child.
			for _, name := range []string{"stubborn:echo", "parent:echo"} {
				if m := agg.call("tools/call", `{"name":"`+name+`","arguments":{}}`); m.Error != nil {
					t.Fatalf("%s: %s", name, m.Line)
				}
			}
			family := descendants(agg.cmd.Process.Pid)
			want := 3 // two servers and the watchdog
			if strings.Contains(tc.config, "-grandchild") {
				want = 4
			}
			if len(family) != want {
				t.Fatalf("the aggregator has %d descendants %v, want %d", len(family), family, want)
			}

			start := time.Now()
			tc.end(agg)
			// Its stdout may close before it exits (at the end of input): wait for the
			// process itself.
			if !exits(agg.cmd.Process.Pid, 15*time.Second) {
				t.Fatal("the aggregator did not exit within 15s")
			}
			if d := time.Since(start); d > 8*time.Second {
				t.Errorf("the aggregator took %v to exit", d)
			}
			deadline := time.Now().Add(5 * time.Second)
			for _, pid := range family {
				for alive(pid) {
					if time.Now().After(deadline) {
						t.Fatalf("process %d (%s) outlived the aggregator", pid, cmdline(pid))
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
}

// descendants lists the processes below pid, from /proc.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name, in parentheses, may hold spaces: the fields follow its last ")".
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 {
			ppid, _ := strconv.Atoi(fields[1])
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// exits waits up to limit for pid to exit; it reports whether it did.
func exits(pid int, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// alive reports whether pid is a process that has not exited (zombies have exited).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return strings.ReplaceAll(string(b), "\x00", " ")
}
