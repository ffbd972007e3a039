//go:build unix

package audit

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func setUmask(mask int) (restore func()) {
	old := syscall.Umask(mask)
	return func() { syscall.Umask(old) }
}

// readOnly makes path unwritable: by its mode, or for root, whom modes do not stop, with
// the immutable attribute (chattr +i, Linux), if the file system has it.
func readOnly(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() != 0 {
		if err := os.Chmod(path, 0o400); err != nil {
			t.Fatal(err)
		}
		return
	}
	if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
		t.Skipf("running as root, and chattr +i fails: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", path).Run() })
}

// TestDropsAndRecovery: a writer that cannot keep up (a FIFO nobody reads) drops events
// without holding up a call, warns once, and records how many it dropped in the log once it
// writes again.
func TestDropsAndRecovery(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "audit.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO: %v", err)
	}
	if _, err := Open(fifo, nil); err == nil {
		t.Fatal("a FIFO without a reader: no error (the start-up would wait for one)")
	}
	reader, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	w := newWarnings()
	l, err := Open(fifo, &Options{Queue: 16, Warn: w.warn})
	if err != nil {
		t.Fatal(err)
	}
	// The pipe holds 64 KiB; these are about 1 MiB. Nothing reads yet: the writer blocks,
	// the queue fills, and the rest is dropped; none of these calls may wait.
	const n = 5000
	for i := range n {
		l.Call(Call{Server: "s", Method: "tools/call", Tool: strings.Repeat("t", 150), Outcome: Result, RequestBytes: i})
	}
	if msg := <-w.c; !strings.Contains(msg, "dropped") {
		t.Errorf("warning %q", msg)
	}
	if l.Stats().Dropped == 0 {
		t.Fatal("nothing dropped")
	}
	lines := make(chan []string)
	go func() {
		var got []string
		sc := bufio.NewScanner(reader)
		for sc.Scan() {
			got = append(got, sc.Text())
		}
		lines <- got
	}()
	if err := syscall.SetNonblock(int(reader.Fd()), false); err != nil {
		t.Fatal(err)
	}
	l.Close()
	got := <-lines
	calls, dropped := 0, 0
	for _, line := range got {
		var e struct {
			Event   string
			Dropped int
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		switch e.Event {
		case "call":
			calls++
		case "lost":
			dropped += e.Dropped
		}
	}
	s := l.Stats()
	if calls != int(s.Written) || dropped != int(s.Dropped) || calls+dropped != n {
		t.Errorf("%d calls and %d dropped in the log, stats %+v, want %d in all", calls, dropped, s, n)
	}
	if ws := w.all(); len(ws) != 1 {
		t.Errorf("warnings %q, want one", ws)
	}
}
