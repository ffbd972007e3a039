//go:build !unix

package stdio

import (
	"io"
	"os"
)

// blocksThread reports whether r is a file: where there is no O_NONBLOCK to ask, a file's
// reads are taken to block their thread. On Windows they do (os.Pipe makes synchronous pipes,
// so the servers' outputs are read blocking too, and yield as the client's input does).
func blocksThread(r io.Reader) bool {
	_, ok := r.(*os.File)
	return ok
}
