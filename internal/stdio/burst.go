package stdio

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Bursts: a reader that has more messages waiting in its buffer holds back what it writes,
// and writes it together once its buffer is empty. Under load one read brings several
// messages; written one by one, each is a system call and a wake-up of the peer, which a
// byte-copying relay does not pay (it writes what it read in one go: BENCHMARKS.md, "Back to
// the floor"). A single message, the usual case, is never held.
//
// A Burst joins readers and writers: Options.Burst of a reading Conn begins the burst while
// that Conn has a whole message buffered beyond the one Read returns, and ends it at the next
// Read that would wait for input; writes marked as holdable (Conn.SendHeld, and every write of
// WriteResponse and WriteParts) to a Conn whose Options.HeldBy is that Burst, and those of
// Conn.SendHeldBy with it, are held while it is active. Every end of a burst writes everything
// held, so nothing waits longer than the readers' handling of what they already read. Order
// per Conn is kept: any write that is not held writes what is held first.
//
// Nothing must wait for a held write to arrive while a reader of its Burst waits for that:
// the aggregator holds only what it relays, never the requests it waits on itself.

// Burst is a set of readers whose bursts hold back writes. The zero value is ready to use.
type Burst struct {
	active atomic.Int32 // readers in a burst
	mu     sync.Mutex   // guards holding and ending, and held
	held   []*Conn      // the Conns with held writes
}

// begin starts a reader's burst.
func (b *Burst) begin() {
	b.mu.Lock()
	b.active.Add(1)
	b.mu.Unlock()
}

// end ends a reader's burst and writes everything held.
func (b *Burst) end() {
	b.mu.Lock()
	b.active.Add(-1)
	held := b.held
	if len(held) == 0 {
		b.mu.Unlock()
		return
	}
	b.held = nil
	b.mu.Unlock()
	for _, c := range held {
		c.flushHeld()
	}
	// Its array for the next burst's: a burst's list was otherwise made anew each time.
	clear(held)
	b.mu.Lock()
	if b.held == nil {
		b.held = held[:0]
	}
	b.mu.Unlock()
}

// Hold runs handle as a reader's burst: what it writes that is holdable (SendHeld...) to the
// Conns HeldBy b is held, and written together once handle returns (every end of a burst of b
// writes everything held, also what other bursts of it held). It is for a reader that is not a
// Conn: one handed several messages in one write (shared.input, which takes a session's burst
// of requests for a shared server).
func (b *Burst) Hold(handle func()) {
	b.begin()
	defer b.end()
	handle()
}

// hold adds parts to the writes held for c, when a burst is active; it reports false when none
// is, and the caller writes them now. id, when valid, is the request they answer, answered once
// written.
func (b *Burst) hold(c *Conn, failed WriteFailure, id jsonrpc.ID, parts [][]byte) bool {
	if b == nil || b.active.Load() == 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.active.Load() == 0 {
		return false
	}
	c.qmu.Lock()
	if c.flushers > 0 {
		// Its background writer is busy with earlier messages: this one goes after them.
		var ids []jsonrpc.ID
		if id.IsValid() {
			ids = []jsonrpc.ID{id}
		}
		c.queue = append(c.queue, queued{[][]byte{slices.Concat(parts...)}, failed, ids})
		c.qmu.Unlock()
		return true
	}
	if c.held.data == nil {
		c.held.data, c.spare = c.spare, nil
	}
	for _, p := range parts {
		c.held.data = append(c.held.data, p...)
	}
	if failed != nil {
		if c.held.failed == nil {
			c.held.failed = make([]WriteFailure, 0, burstWrites) // not grown write by write
		}
		c.held.failed = append(c.held.failed, failed)
	}
	if id.IsValid() {
		if c.held.ids == nil {
			c.held.ids = make([]jsonrpc.ID, 0, burstWrites)
		}
		c.held.ids = append(c.held.ids, id)
	}
	c.qmu.Unlock()
	// Listed in b even when another burst holds writes to c already (each session's burst
	// holds its requests in a shared server's one connection: SendHeldBy): the end of every
	// burst that held a write writes it, not only the end of the first.
	if !slices.Contains(b.held, c) {
		b.held = append(b.held, c)
	}
	return true
}

// burstWrites is room for the writes of a usual burst to one Conn (as many as eight callers
// at once make), made at its first.
const burstWrites = 8

// heldWrites are the writes a Conn holds for a burst: their bytes, in order, and the functions
// to tell should they fail. Guarded by Conn.qmu.
type heldWrites struct {
	data   []byte
	failed []WriteFailure
	ids    []jsonrpc.ID // responses among them, answered once written (Options.DrainOnEOF)
}

// recycle keeps data, the buffer of held writes that were written (copied), for the next
// burst's: a burst's writes were otherwise held in a buffer grown anew each time.
func (c *Conn) recycle(data []byte) {
	if cap(data) == 0 || cap(data) > sendInline {
		return
	}
	c.qmu.Lock()
	c.spare = data[:0]
	c.qmu.Unlock()
}

// take returns the held writes and clears them.
func (h *heldWrites) take() heldWrites {
	out := *h
	*h = heldWrites{}
	return out
}

// fail tells the held writes' senders that they could not be written.
func (h heldWrites) fail(err error) { failures(h.failed).WriteFailed(err) }

// failures is who fail tells, as one WriteFailure (nil for none), for a write of them queued.
func (h heldWrites) failures() WriteFailure {
	if len(h.failed) == 0 {
		return nil
	}
	return failures(h.failed)
}

// failures are several writes' WriteFailures, told together.
type failures []WriteFailure

func (fs failures) WriteFailed(err error) {
	for _, f := range fs {
		f.WriteFailed(err)
	}
}
