//go:build unix

package stdio

import (
	"errors"
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// tryWriter is a function that writes what the pipe w takes at once, with one non-blocking
// write(2), and never waits: nil when w is not a non-blocking file (a terminal, a blocking pipe
// such as an inherited stdout, an in-memory pipe), whose writes Send leaves to its background
// writer.
//
// It replaces a write with a deadline: setting a write deadline arms a runtime timer and
// wakes the network poller's thread, twice per message, which cost more than the write
// itself (BENCHMARKS.md, "Back to the floor").
func tryWriter(out io.Writer) func([]byte) (int, error) {
	rc, flags, ok := statusFlags(out)
	if !ok || flags&unix.O_NONBLOCK == 0 {
		return nil
	}
	w := &rawWriter{rc: rc}
	w.fn = w.write // made once: a closure per write would be an allocation per message
	return w.Write
}

// rawWriter makes one non-blocking write(2) at a time (Send calls it holding Conn.wmu).
type rawWriter struct {
	rc  syscall.RawConn
	fn  func(fd uintptr) bool
	buf []byte
	n   int
	err error
}

func (w *rawWriter) write(fd uintptr) bool {
	for {
		w.n, w.err = unix.Write(int(fd), w.buf)
		if !errors.Is(w.err, unix.EINTR) {
			return true // done either way: never wait for the peer
		}
	}
}

// Write writes what the pipe takes of b at once.
func (w *rawWriter) Write(b []byte) (int, error) {
	w.buf = b
	werr := w.rc.Write(w.fn)
	n, err := max(w.n, 0), w.err
	w.buf, w.n, w.err = nil, 0, nil
	if werr != nil {
		return 0, werr
	}
	if errors.Is(err, unix.EAGAIN) {
		err = nil // nothing fit: the caller queues the rest
	}
	return n, err
}

// statusFlags is the file status flags (F_GETFL: O_NONBLOCK among them) of the descriptor of x,
// a file, with its raw connection; ok is false when x has no descriptor.
func statusFlags(x any) (rc syscall.RawConn, flags int, ok bool) {
	sc, isConn := x.(syscall.Conn)
	if !isConn {
		return nil, 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, 0, false
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil || ferr != nil {
		return nil, 0, false
	}
	return rc, flags, true
}
