//go:build unix

package stdio

import (
	"bytes"
	"io"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// blockingPipe is a pipe in blocking mode, as a client passes stdin: Go reads it on a thread of
// its own, without the network poller.
func blockingPipe(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	var fds [2]int
	if err := unix.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	unix.CloseOnExec(fds[0])
	unix.CloseOnExec(fds[1])
	r, w := os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// Yielding wraps what is read blocking, and only that: a pipe Go polls, a reader in memory are
// returned as they are. What is read through it is what was written.
func TestYieldingWrapsBlockingFilesOnly(t *testing.T) {
	r, w := blockingPipe(t)
	y := Yielding(r)
	if _, ok := y.(*yieldingReader); !ok {
		t.Fatalf("Yielding(a blocking pipe) = %T, want a *yieldingReader", y)
	}
	if _, err := w.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 16)
	n, err := y.Read(buf)
	if err != nil || string(buf[:n]) != "hello\n" {
		t.Fatalf("read %q, %v; want %q", buf[:n], err, "hello\n")
	}

	pr, pw, err := os.Pipe() // non-blocking: the poller's
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	for _, plain := range []io.Reader{pr, bytes.NewReader(nil)} {
		if got := Yielding(plain); got != plain {
			t.Errorf("Yielding(%T) = %T, want it as it is", plain, got)
		}
	}
}

// A read through it passes through the scheduler first (which moves the runtime monitor's tick
// on: yield.go), at most once every yieldEvery. With one processor, a goroutine made ready
// before the read runs before the read returns when the read yielded (almost always: the
// scheduler may take the reader back first, and a system call that stalls may lose its
// processor), so each way is counted over many reads.
func TestYieldingYieldsAtMostOnceEvery(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer func(d time.Duration) { yieldEvery = d }(yieldEvery)
	r, w := blockingPipe(t)
	y := Yielding(r)
	buf := make([]byte, 16)
	const reads = 40
	readsRan := func() int {
		t.Helper()
		n := 0
		for range reads {
			if _, err := w.Write([]byte("x")); err != nil { // there to read: the read does not block
				t.Fatal(err)
			}
			var ran atomic.Bool
			done := make(chan struct{})
			go func() { ran.Store(true); close(done) }()
			if _, err := y.Read(buf); err != nil {
				t.Fatal(err)
			}
			if ran.Load() {
				n++
			}
			<-done
		}
		return n
	}
	yieldEvery = 0
	if n := readsRan(); n < reads*3/4 {
		t.Errorf("reads after yieldEvery: a ready goroutine ran first in %d of %d, want nearly all", n, reads)
	}
	yieldEvery = time.Hour // the last yield was just now
	if n := readsRan(); n > reads/4 {
		t.Errorf("reads within yieldEvery of the last yield: a ready goroutine ran first in %d of %d, want nearly none", n, reads)
	}
}

// A Conn reads a blocking file through Yielding: a Read that has to read the file yields first.
func TestConnReadsBlockingFileYielding(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	defer func(d time.Duration) { yieldEvery = d }(yieldEvery)
	yieldEvery = 0
	r, w := blockingPipe(t)
	c := New(r, io.Discard, nil)
	const reads = 40
	n := 0
	for range reads {
		if _, err := w.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")); err != nil {
			t.Fatal(err)
		}
		var ran atomic.Bool
		done := make(chan struct{})
		go func() { ran.Store(true); close(done) }()
		if _, err := c.Read(); err != nil {
			t.Fatal(err)
		}
		if ran.Load() {
			n++
		}
		<-done
	}
	if n < reads*3/4 {
		t.Errorf("a ready goroutine ran before the Conn's read of a blocking pipe returned in %d of %d reads, want nearly all", n, reads)
	}
}
