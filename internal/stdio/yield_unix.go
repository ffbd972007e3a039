//go:build unix

package stdio

import (
	"io"

	"golang.org/x/sys/unix"
)

// blocksThread reports whether r is a file in blocking mode: the runtime reads it on a thread
// of its own, without its network poller.
func blocksThread(r io.Reader) bool {
	_, flags, ok := statusFlags(r)
	return ok && flags&unix.O_NONBLOCK == 0
}
