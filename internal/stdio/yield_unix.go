//go:build unix

package stdio

import (
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// blocksThread reports whether r is a file in blocking mode: the runtime reads it on a thread
// of its own, without its network poller.
func blocksThread(r io.Reader) bool {
	sc, ok := r.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	blocking := false
	if rc.Control(func(fd uintptr) {
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		blocking = err == nil && flags&unix.O_NONBLOCK == 0
	}) != nil {
		return false
	}
	return blocking
}
