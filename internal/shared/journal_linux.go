package shared

import (
	"os"

	"golang.org/x/sys/unix"
)

// journalFile is a file in memory only, for a session's journal: nothing of it is left
// anywhere once the processes that map it end.
func journalFile(string) (*os.File, error) {
	fd, err := unix.MemfdCreate("mcp-simple-aggregator-journal", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), "the session's journal"), nil
}
