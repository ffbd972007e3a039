//go:build !unix

package stdio

import (
	"io"
	"os"
)

// blocksThread reports whether r is a file: where there is no O_NONBLOCK to ask, a file's
// reads are taken to block their thread (a yield before a read that does not costs little).
func blocksThread(r io.Reader) bool {
	_, ok := r.(*os.File)
	return ok
}
