package shared

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// releaseImage drops from this process's page tables the pages of the program's own file that
// its start-up touched (the code and read-only data of every package's initialization, the
// flags, the handshake): a forwarder runs for as long as its client, once per session, and
// copies bytes with a small part of them. The pages stay in the page cache, shared by every
// process of the program, and the few the forwarder uses come back on first use; only the
// file's read-only mappings are released, never a page the process could have written.
func releaseImage() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	for line := range bytes.Lines(maps) {
		// start-end perms offset dev inode path
		f := bytes.Fields(line)
		if len(f) < 6 || string(f[5]) != exe || (string(f[1]) != "r-xp" && string(f[1]) != "r--p") {
			continue
		}
		lo, hi, ok := bytes.Cut(f[0], []byte("-"))
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		_, _, _ = unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), unix.MADV_DONTNEED)
	}
}
