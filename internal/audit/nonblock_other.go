//go:build !unix

package audit

// nonblock is nothing where there are no FIFOs to wait for.
const nonblock = 0
