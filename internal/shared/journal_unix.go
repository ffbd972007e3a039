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
// side.

const (
	journalHead = 0   // where head is: what the shared process read and published (uint64)
	journalTail = 64  // where tail is: what the forwarder took (uint64), in a cache line apart
	journalData = 128 // where the ring starts
	// journalSize is the ring's size: room for what the client sends while the forwarder
	// takes what was asked of it (three times what it holds when asked). Its pages are the
	// session's, in both processes, once the client has sent that much.
	journalSize = 256 << 10
	// journalDrainAt is what the ring holds when the shared process asks the forwarder to take
	// it: the forwarder reads the receipts then too, and the receipts of what a client sends
	// in 64 KiB stay well within what their pipe holds (receiptsPipe).
	journalDrainAt = 64 << 10
)

// journal is a session's journal, mapped.
type journal struct {
	mem []byte
}

// newJournal makes a journal for the forwarder: the file to hand over, and its mapping. dir is
// the place's private directory, where a system without files in memory only makes one, gone
// from the directory at once.
func newJournal(dir string) (*journal, *os.File, error) {
	f, err := journalFile(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("the session's journal: %w", err)
	}
	if err := f.Truncate(journalData + journalSize); err != nil {
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

// mapJournal maps a journal's file, checking its size.
func mapJournal(f *os.File) (*journal, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("the session's journal: %w", err)
	}
	if st.Size() != journalData+journalSize {
		return nil, fmt.Errorf("the session's journal has %d bytes, not %d", st.Size(), journalData+journalSize)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, journalData+journalSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("the session's journal: %w", err)
	}
	return &journal{mem: mem}, nil
}

func (j *journal) head() *uint64 { return (*uint64)(unsafe.Pointer(&j.mem[journalHead])) }
func (j *journal) tail() *uint64 { return (*uint64)(unsafe.Pointer(&j.mem[journalTail])) }
func (j *journal) data() []byte  { return j.mem[journalData:] }

func (j *journal) unmap() { _ = unix.Munmap(j.mem) }

// take passes what the shared process published since from (its tail) to each, part by part
// in order, zeroes it and publishes the new tail, which it returns. With ended (the shared
// process is gone) it passes also what was read and not published: what follows head up to the
// first zero byte, within the part that read could have filled.
func (j *journal) take(from uint64, ended bool, each func([]byte)) uint64 {
	head := atomic.LoadUint64(j.head())
	data := j.data()
	to := from
	for to < head {
		off := to % journalSize
		part := data[off:min(journalSize, off+(head-to))]
		each(part)
		clear(part)
		to += uint64(len(part))
	}
	if ended {
		off := to % journalSize
		end := off
		for end < journalSize && data[end] != 0 {
			end++
		}
		if end > off {
			each(data[off:end])
			clear(data[off:end])
			to += end - off
		}
	}
	atomic.StoreUint64(j.tail(), to)
	return to
}

// errStopped is a journalReader's error once stopped.
var errStopped = errors.New("the session stopped reading its client")

// journalReader is the shared process's reading of a session's input (in, non-blocking) through
// its journal, for one goroutine's reads at a time (a bufio.Reader's). It waits for input in
// poll(2), beside the read end of a pipe that stop closes: a session that ends, or a shared
// process that stops, stops reading the client at once, so that a new shared process is the
// only reader of the client's input (a read blocked in read(2) could not be stopped).
type journalReader struct {
	in    *os.File
	fd    int
	j     *journal
	head  uint64    // what was published
	asked uint64    // the tail when the forwarder was last asked to take the journal, +1
	dry   bool      // the last read took less than it could
	last  time.Time // the last yield (stdio.Yielding says why)
	drain func(wait bool)

	mu      sync.Mutex // held by a read under way
	stopR   *os.File   // polled beside the input: stop closes stopW
	stopW   *os.File
	stopped atomic.Bool
	done    chan struct{} // closed by stop
	room    chan struct{} // the forwarder took what it was asked to
}

// newJournalReader reads in through j, asking the forwarder with drain to take the journal.
func newJournalReader(in *os.File, j *journal, drain func(wait bool)) (*journalReader, error) {
	stopR, stopW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	rc, err := in.SyscallConn()
	if err != nil {
		stopR.Close()
		stopW.Close()
		return nil, err
	}
	fd := -1
	_ = rc.Control(func(f uintptr) { fd = int(f) })
	if err := unix.SetNonblock(fd, true); err != nil {
		stopR.Close()
		stopW.Close()
		return nil, err
	}
	return &journalReader{in: in, fd: fd, j: j, head: atomic.LoadUint64(j.head()), drain: drain,
		stopR: stopR, stopW: stopW, done: make(chan struct{}), room: make(chan struct{}, 1)}, nil
}

// Read reads what the client's input holds, at most len(p) bytes, through the journal.
func (r *journalReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(p) == 0 {
		return 0, nil
	}
	if now := time.Now(); now.Sub(r.last) >= 5*time.Millisecond {
		r.last = now
		runtime.Gosched() // stdio.Yielding says why
	}
	for {
		if r.stopped.Load() {
			return 0, errStopped
		}
		tail := atomic.LoadUint64(r.j.tail())
		used := r.head - tail
		if used >= journalDrainAt && r.asked != tail+1 {
			r.asked = tail + 1
			r.drain(false)
		}
		if used == journalSize {
			r.drain(true)
			if !r.wait(-1, true) {
				return 0, errStopped
			}
			continue
		}
		// A read that took less than it could left the input empty, most likely: the next
		// waits for input first (a read that finds none is a system call for nothing).
		if r.dry && !r.wait(r.fd, false) {
			return 0, errStopped
		}
		off := r.head % journalSize
		buf := r.j.data()[off:min(journalSize, off+(journalSize-used), off+uint64(len(p)))]
		n, err := unix.Read(r.fd, buf)
		r.dry = err == unix.EAGAIN || (err == nil && n < len(buf))
		switch {
		case err == unix.EINTR || err == unix.EAGAIN:
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, io.EOF
		}
		copy(p, buf[:n])
		r.head += uint64(n)
		atomic.StoreUint64(r.j.head(), r.head)
		return n, nil
	}
}

// wait waits for fd to be readable, or with room for the forwarder to have taken the journal;
// false once stopped.
func (r *journalReader) wait(fd int, room bool) bool {
	if room {
		select {
		case <-r.room:
			return true
		case <-r.done:
			return false
		}
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(r.stopR.Fd()), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		return err == nil && fds[1].Revents == 0
	}
}

// roomMade tells a read waiting for room that the forwarder took the journal.
func (r *journalReader) roomMade() {
	select {
	case r.room <- struct{}{}:
	default:
	}
}

// stop stops the reading, waiting for a read under way to end (it ends at once): what was read
// is published, and nothing more is read from the client's input here. It closes the input and
// unmaps the journal.
func (r *journalReader) stop() {
	if r.stopped.Swap(true) {
		return
	}
	close(r.done)
	r.stopW.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopR.Close()
	r.in.Close()
	r.j.unmap()
}
