package shared

import "golang.org/x/sys/unix"

// growPipe asks for the pipe of fd to hold size bytes (F_SETPIPE_SZ); it keeps its size when the
// system allows less (/proc/sys/fs/pipe-max-size).
func growPipe(fd, size int) { _, _ = unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, size) }
