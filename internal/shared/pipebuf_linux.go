package shared

// pipeBuf is the most a write to a pipe carries whole (PIPE_BUF): 4096 bytes on Linux.
const pipeBuf = 4096
