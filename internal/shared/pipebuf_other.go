//go:build !linux

package shared

// pipeBuf is the most a write to a pipe carries whole (PIPE_BUF): POSIX's least, 512 bytes,
// which is macOS's and the BSDs'.
const pipeBuf = 512
