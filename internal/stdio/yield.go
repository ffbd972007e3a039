package stdio

import (
	"io"
	"runtime"
	"time"
)

// A goroutine that reads a file whose reads block their thread (a pipe in blocking mode: the
// client's stdin as most clients pass it, the pipe a forwarder writes a hosted session's
// messages to) goes from one read(2) to the next without passing through the scheduler, so
// the runtime's monitor (sysmon) sees its processor on the same scheduling tick for as long as
// the client keeps calling. After 10 ms on one tick the monitor preempts the goroutine, and
// when it finds it in a read then, takes its processor; each time it takes one it goes back to
// waking every 20 µs, for the next millisecond and more. With a client that calls more often
// than every 10 ms that is most of the time: it cost each such process a sixth to a fifth of
// its CPU (BENCHMARKS.md, "The monitor's wake-ups"). A yield before a read (runtime.Gosched: a
// pass through the scheduler) moves the tick on, and the monitor backs off to 10 ms. Not before
// every read: a yield wakes an idle thread to look for work (two futex calls), so one every
// yieldEvery at most, well within the monitor's 10 ms. (A read that waits 10 ms or more loses
// its processor anyway, and the monitor wakes often for a while after it: a client that calls
// seldom costs little either way.)

// yieldEvery is the longest a yieldingReader reads without yielding, while it reads (a
// variable for the tests). 5 ms is the most that keeps the tick moving within 10 ms for any
// client that calls more often than every 10 ms: one that calls every d ≥ 5 ms yields at every
// call, one that calls every d < 5 ms at least every 5 ms + d; at 8 ms, one that called every 6
// ms would yield every 12.
var yieldEvery = 5 * time.Millisecond

// Yielding is r, made to yield to the scheduler before a read when its reads block their
// thread (blocksThread); any other reader is returned as it is. It is for one goroutine's
// reads at a time, as a bufio.Reader's.
func Yielding(r io.Reader) io.Reader {
	if blocksThread(r) {
		return &yieldingReader{r: r}
	}
	return r
}

type yieldingReader struct {
	r    io.Reader
	last time.Time // the last yield
}

func (y *yieldingReader) Read(p []byte) (int, error) {
	if now := time.Now(); now.Sub(y.last) >= yieldEvery {
		y.last = now
		runtime.Gosched()
	}
	return y.r.Read(p)
}
