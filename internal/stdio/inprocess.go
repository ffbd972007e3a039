package stdio

import (
	"io"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A peer in this process. The sessions a shared process hosts speak to the processes of their
// servers through the shared process's one reader and one writer of each (internal/shared),
// with no pipe between: what a session writes is handed over as it is written (an
// InlineWriter), and what is for the session is handed to it as a message (a Receiver), on the
// goroutine that read it from the server. No goroutine waits between them, as none does
// between a child's pipe and its reader.

// An InlineWriter takes every write at once without waiting for anyone: a peer in this
// process that handles each line as it is written. Send writes to it on the caller's
// goroutine, as it writes to a non-blocking pipe that takes the message at once: a message
// over 64 KiB, or one that finds a write queued before it, goes through the background writer.
type InlineWriter interface {
	io.Writer
	// WritesInline marks the writer; it does nothing.
	WritesInline()
}

// A TryWriter is a writer over a pipe that can also write what the pipe takes at once without
// waiting (TryWrite, which returns how much of b it took, with no error when that is not all),
// as the Conn does itself for a non-blocking pipe: Send calls TryWrite on the caller's
// goroutine and leaves the rest to its background writer, which calls Write. Both are called
// one at a time, in the order of the bytes.
type TryWriter interface {
	io.Writer
	TryWrite(b []byte) (int, error)
}

// TryWrite is a function that writes what the pipe w takes at once, with one non-blocking
// write(2), as Send does for a non-blocking pipe; nil when w is not a non-blocking file.
func TryWrite(w io.Writer) func(b []byte) (int, error) { return tryWriter(w) }

// A Receiver takes the messages of a peer in this process, in order, one call at a time.
type Receiver interface {
	// Message is the next message; it is the receiver's (its params or result are its own).
	// more says that another message follows at once, for this receiver or another: a burst
	// (Given), which the peer ends with Flush.
	Message(msg jsonrpc.Message, more bool)
	// Flush ends the burst that a Message with more began.
	Flush()
	// End says that no message follows: the peer's output ended.
	End()
}

// Given does for a message that a peer in this process handed over (Receiver.Message) what
// Read does for one it read: with more, a burst of Options.Burst begins, which EndBurst ends.
// Like Read, it is called from one goroutine at a time.
func (c *Conn) Given(more bool) {
	if more && c.opts.Burst != nil && !c.inBurst {
		c.inBurst = true
		c.opts.Burst.begin()
	}
}

// More reports whether a whole message is buffered beyond the one Read returned last: the
// next Read will not wait for input. It is for Read's caller.
func (c *Conn) More() bool { return c.moreBuffered() }

// Decode decodes one line as Read does (its params or result are copies: the line may be
// reused once it returns); an error is what Read returns as a BadLineError's.
func Decode(line []byte) (jsonrpc.Message, error) { return decodeMessage(line, false) }
