//go:build unix

package audit

import "syscall"

// nonblock opens a FIFO without waiting for a reader (the open fails without one).
const nonblock = syscall.O_NONBLOCK
