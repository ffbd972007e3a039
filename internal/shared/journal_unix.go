//go:build unix

package shared

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The journal of a session's input. The shared process reads the client's messages itself,
// from the client's stdin (the forwarder hands it over with the hello when it is a pipe or a
// socket of its own; otherwise a pipe the forwarder copies it to, which outlives the shared
// process), so that no process lies between the client and its session in that direction: a
// forwarder that copied each message cost a third of the path's CPU with eight callers
// (BENCHMARKS.md, "Shared servers"). But the forwarder must know what the client sent, to carry
// it over a restart of the shared process (what it set up; which of its requests are
// unanswered): a message the shared process took from the client's input is the forwarder's to
// answer should the shared process die before answering it.
//
// So the shared process reads the client's input into memory that the forwarder maps too (a
// file in memory only, MAP_SHARED, handed over with the hello): the journal, a ring of
// journalSize bytes. read(2) copies the bytes there before it returns, and so before the shared
// process can do anything with them; it then publishes how far it read (head). The forwarder
// takes what was published (seldom: when asked, journalDrainAt), notes it as it noted what it
// copied before, zeroes it and publishes how far it took (tail), which makes room again. A
// SIGKILL can come between a read and its publication: the bytes are in the journal all the
// same, past head, up to the first zero byte (a client's message is JSON, which holds no zero
// byte), and the forwarder takes them too once the process is gone. Nothing the shared process
// took from the client is lost to the forwarder, without a system call per message on either
// side. The journal holds a second ring, the other way: the session's receipts of what it
// answered, which the shared process writes and the forwarder takes with the input
// (clientout.go). Both rings are ring.go's.

const (
	journalHead  = 0   // where the input's head is: what the shared process read and published (uint64)
	journalTail  = 64  // where the input's tail is: what the forwarder took (uint64), in a cache line apart
	receiptsHead = 128 // where the receipts' head is: what the shared process wrote and published
	receiptsTail = 192 // where the receipts' tail is: what the forwarder took
	journalData  = 256 // where the input's ring starts; the receipts' follows it
	// journalSize is the input's ring's size: room for what the client sends while the
	// forwarder takes what was asked of it (three times what it holds when asked). Its pages
	// are the session's, in both processes, once the client has sent that much.
	journalSize = 256 << 10
	// journalDrainAt is what the input's ring holds when the shared process asks the forwarder
	// to take it (it takes the receipts then too).
	journalDrainAt = 64 << 10
	// receiptsData is where the receipts' ring starts (clientout.go: receiptsSize).
	receiptsData    = journalData + journalSize
	journalFileSize = receiptsData + receiptsSize
)

// journal is a session's journal, mapped: the ring of the client's input and the ring of the
// session's receipts (clientout.go). In the shared process two hold it, the session's reader of
// its input and its output to the client, and the last to release it unmaps it.
type journal struct {
	mem             []byte
	input, receipts ring
	refs            atomic.Int32
}

// newJournal makes a journal for the forwarder: the file to hand over, and its mapping. dir is
// the place's private directory, where a system without files in memory only makes one, gone
// from the directory at once.
func newJournal(dir string) (*journal, *os.File, error) {
	f, err := journalFile(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("the session's journal: %w", err)
	}
	if err := f.Truncate(journalFileSize); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("the session's journal: %w", err)
	}
	j, err := mapJournal(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return j, f, nil
}

// mapJournal maps a journal's file, checking its size. The mapping has one holder, the caller.
func mapJournal(f *os.File) (*journal, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("the session's journal: %w", err)
	}
	if st.Size() != journalFileSize {
		return nil, fmt.Errorf("the session's journal has %d bytes, not %d", st.Size(), journalFileSize)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, journalFileSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("the session's journal: %w", err)
	}
	word := func(at int) *uint64 { return (*uint64)(unsafe.Pointer(&mem[at])) }
	j := &journal{mem: mem,
		input:    ring{head: word(journalHead), tail: word(journalTail), data: mem[journalData:receiptsData]},
		receipts: ring{head: word(receiptsHead), tail: word(receiptsTail), data: mem[receiptsData:journalFileSize]}}
	j.refs.Store(1)
	return j, nil
}

// hold adds a holder of the mapping; release drops one, the last unmapping it.
func (j *journal) hold() { j.refs.Add(1) }

func (j *journal) release() {
	if j.refs.Add(-1) == 0 {
		_ = unix.Munmap(j.mem)
	}
}

// errStopped is a journalReader's error once stopped.
var errStopped = errors.New("the session stopped reading its client")

// journalReader is the shared process's reading of a session's input (in, in blocking mode)
// through its journal, for one goroutine's reads at a time (a bufio.Reader's). It reads as an
// unshared session reads its stdin: a blocking read(2) on a thread of its own, which wakes
// nothing else (a read through poll(2) cost a system call more a message). Such a read cannot
// be stopped (the runtime's signal handlers restart it): a session that stops reading (its end,
// or the shared process's) leaves a read under way to end when the client writes or closes its
// input; what it read then is published all the same. So a new shared process must not read
// the client while this one lives: the forwarder sees a shared process that stops end only
// once it exits (closeHosted).
type journalReader struct {
	in    *os.File
	fd    int
	j     *journal
	head  uint64    // what was published
	asked uint64    // the tail when the forwarder was last asked to take the journal, +1
	last  time.Time // the last yield (stdio.Yielding says why)
	drain func(wait bool)
	room  chan struct{} // the forwarder took what it was asked to
	done  chan struct{} // closed by stop

	mu      sync.Mutex
	reading bool // a read is under way (it ends the reading, when stopped meanwhile)
	stopped bool
}

// newJournalReader reads in through j (holding it until the reading ends), asking the forwarder
// with drain to take the journal.
func newJournalReader(in *os.File, j *journal, drain func(wait bool)) (*journalReader, error) {
	rc, err := in.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	_ = rc.Control(func(f uintptr) { fd = int(f) })
	if err := unix.SetNonblock(fd, false); err != nil {
		return nil, err
	}
	j.hold()
	return &journalReader{in: in, fd: fd, j: j, head: atomic.LoadUint64(j.input.head), drain: drain,
		room: make(chan struct{}, 1), done: make(chan struct{})}, nil
}

// Read reads what the client's input holds, at most len(p) bytes, through the journal.
func (r *journalReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if now := time.Now(); now.Sub(r.last) >= 5*time.Millisecond {
		r.last = now
		runtime.Gosched() // stdio.Yielding says why
	}
	for {
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			return 0, errStopped
		}
		r.reading = true
		r.mu.Unlock()
		tail := atomic.LoadUint64(r.j.input.tail)
		used := r.head - tail
		if used >= journalDrainAt && r.asked != tail+1 {
			r.asked = tail + 1
			r.drain(false)
		}
		if used == journalSize {
			r.drain(true)
			if !r.end(r.waitRoom()) {
				return 0, errStopped
			}
			continue
		}
		off := r.head % journalSize
		buf := r.j.input.data[off:min(journalSize, off+(journalSize-used), off+uint64(len(p)))]
		n, err := unix.Read(r.fd, buf)
		if n > 0 {
			copy(p, buf[:n])
			r.head += uint64(n)
			atomic.StoreUint64(r.j.input.head, r.head)
		}
		if err != unix.EAGAIN && !r.end(true) {
			return 0, errStopped
		}
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN: // something that shares the open file made it non-blocking
			if !r.end(r.readable()) {
				return 0, errStopped
			}
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// end ends a read step; false when the reader was stopped meanwhile (or ok is false), which
// ends the reading.
func (r *journalReader) end(ok bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reading = false
	if r.stopped {
		r.release()
		return false
	}
	return ok
}

// readable waits for the input to hold something, or to end; false on an error.
func (r *journalReader) readable() bool {
	fds := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if err != unix.EINTR {
			return err == nil
		}
	}
}

// waitRoom waits for the forwarder to have taken the journal; false once stopped.
func (r *journalReader) waitRoom() bool {
	select {
	case <-r.room:
		return true
	case <-r.done:
		return false
	}
}

// roomMade tells a read waiting for room that the forwarder took the journal.
func (r *journalReader) roomMade() {
	select {
	case r.room <- struct{}{}:
	default:
	}
}

// stop stops the reading: nothing more is read from the client's input here once a read under
// way ends, and it ends the reading then (at once when none is).
func (r *journalReader) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.stopped = true
	close(r.done)
	if !r.reading {
		r.release()
	}
}

// release closes the input and releases the journal. Callers hold r.mu.
func (r *journalReader) release() {
	r.in.Close()
	r.j.release()
}
