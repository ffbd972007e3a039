package child

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The watchdog is a small process (the program itself, re-executed) that outlives the
// aggregator only to clean up after it: the aggregator tells it, over a pipe, the process group
// of every child it starts and every group it has ended. When the pipe ends without a clean
// shutdown (the aggregator was killed with SIGKILL, or crashed), the watchdog ends the groups
// still listed: SIGTERM, a grace period, SIGKILL. That reaches what the kernel's parent-death
// signal cannot: grandchildren (the server behind npx or uvx, say) and, on macOS, which has no
// parent-death signal, the children themselves. On Windows the job object does this job.

// WatchdogArg is the first argument that makes the program run as the watchdog.
const WatchdogArg = "__watchdog"

var watchdog struct {
	mu  sync.Mutex
	w   io.WriteCloser
	cmd *exec.Cmd
}

// StartWatchdog starts the watchdog, exe run with WatchdogArg, in a process group of its own
// (so that a signal to the aggregator's group does not take it along). Without one (an error,
// or Windows), children are still ended by Stop and by the parent-death signal.
func StartWatchdog(exe string, stderr io.Writer) error {
	if !watchdogSupported {
		return nil
	}
	cmd := exec.Command(exe, WatchdogArg)
	cmd.Stderr = stderr
	prepareWatchdog(cmd)
	w, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	watchdog.mu.Lock()
	watchdog.w, watchdog.cmd = w, cmd
	watchdog.mu.Unlock()
	return nil
}

// StopWatchdog ends the watchdog after a clean shutdown (every child stopped) and waits for it.
func StopWatchdog() {
	watchdog.mu.Lock()
	w, cmd := watchdog.w, watchdog.cmd
	watchdog.w, watchdog.cmd = nil, nil
	watchdog.mu.Unlock()
	if w == nil {
		return
	}
	w.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
	}
}

// tellWatchdog sends one line ("+pgid" or "-pgid").
func tellWatchdog(line string) {
	watchdog.mu.Lock()
	defer watchdog.mu.Unlock()
	if watchdog.w != nil {
		if _, err := io.WriteString(watchdog.w, line+"\n"); err != nil {
			watchdog.w.Close()
			watchdog.w = nil
		}
	}
}

// RunWatchdog is the watchdog's side: it reads the groups from in until it ends, then ends
// the groups still listed. grace is the time between SIGTERM and SIGKILL.
func RunWatchdog(in io.Reader, stderr io.Writer, grace time.Duration) {
	ignoreSignals()
	groups := map[int]bool{}
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if len(line) < 2 {
			continue
		}
		pgid, err := strconv.Atoi(line[1:])
		if err != nil || pgid <= 1 {
			continue
		}
		switch line[0] {
		case '+':
			groups[pgid] = true
		case '-':
			delete(groups, pgid)
		}
	}
	var alive []int
	for g := range groups {
		if signalGroup(g, false) {
			alive = append(alive, g)
		}
	}
	if len(alive) == 0 {
		return
	}
	fmt.Fprintf(stderr, "mcp-simple-aggregator: warning: the aggregator ended without stopping its servers; the watchdog is ending %d process groups\n", len(alive))
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		left := alive[:0]
		for _, g := range alive {
			if groupExists(g) {
				left = append(left, g)
			}
		}
		alive = left
		if len(alive) == 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, g := range alive {
		signalGroup(g, true)
	}
}

// WatchdogDefaultGrace is the watchdog's time between SIGTERM and SIGKILL.
const WatchdogDefaultGrace = 2 * time.Second
