// Package stdio carries newline-delimited JSON-RPC (the MCP stdio transport) over a pair of
// pipes. It frames and writes messages and knows nothing of MCP or of aggregation: the
// aggregator reads each message with Read and decides what to do with it.
//
// It differs from the SDK's own stdio and IO transports where a proxy needs it to:
//   - a line that is not a JSON-RPC message does not end the connection: Read returns it as a
//     *BadLineError and the next Read goes on with the next line;
//   - the line limit is the caller's (the SDK's transport for child processes is fixed at
//     16 MiB), and a line over it is skipped (its id is still found, see TooLargeID);
//   - messages are written from raw parts, so that a result is written exactly as it was
//     received, and Send writes without waiting for a peer that does not read;
//   - JSON-RPC batches can be allowed per connection (see Options.Batches), and the end of
//     the input can wait for the answers to the requests read (Options.DrainOnEOF).
package stdio

import (
	"bufio"
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// DefaultMaxMessageSize is the default limit on one message, in bytes.
const DefaultMaxMessageSize = 128 << 20

// ErrTooLarge is the cause of a BadLineError for a line longer than the limit.
var ErrTooLarge = errors.New("message larger than the limit")

// BadLineError is what Read returns for a line that is not a JSON-RPC message, or that is
// larger than Options.MaxMessageSize (then Err is a *TooLargeError, which is ErrTooLarge, and
// Line holds only the beginning of the line). The connection stays usable: the next Read
// returns the next message.
type BadLineError struct {
	Line []byte
	Err  error
}

func (e *BadLineError) Error() string { return e.Err.Error() }
func (e *BadLineError) Unwrap() error { return e.Err }

// RaiseMaxMessageSize raises the limit on one incoming line to n, when n is larger; safe
// beside Read. A shared process reads a server with the largest limit of the sessions it
// serves, each of which holds the server's messages to its own (aggregator.Member).
func (c *Conn) RaiseMaxMessageSize(n int) {
	for {
		now := c.maxMessage.Load()
		if int64(n) <= now || c.maxMessage.CompareAndSwap(now, int64(n)) {
			return
		}
	}
}

// LastSize is the length in bytes of the line of the message Read returned last (of its
// batch, for a message of one).
func (c *Conn) LastSize() int { return c.lastSize }

// BadLine is the *BadLineError err is or wraps, or nil. A reader's loop asks it only of an
// error: the pointer errors.As fills is a variable of the heap, which a loop that declared it
// for every message would allocate for every message.
func BadLine(err error) *BadLineError {
	var bad *BadLineError
	if errors.As(err, &bad) {
		return bad
	}
	return nil
}

// Options configure a Conn. The zero value is usable.
type Options struct {
	// MaxMessageSize limits one incoming line; 0 means DefaultMaxMessageSize.
	MaxMessageSize int
	// DrainOnEOF, when positive, holds back the end of the input until every request read
	// has been answered, or for at most this long: a peer that sends its requests and closes
	// its end of the pipe still gets its answers.
	DrainOnEOF time.Duration
	// Batches, when it returns true, accepts a JSON-RPC batch (an array of messages) on one
	// line: its messages are read one by one, and the answers to its requests are written
	// together as one array once the last is in. Otherwise a batch is a bad line.
	Batches func() bool
	// Burst, when set, is active while this Conn has more whole messages buffered than the one
	// Read returned: the writes it holds (HeldBy of other Conns) are written together when
	// Read would wait for input (burst.go).
	Burst *Burst
	// HeldBy, when set, holds the holdable writes to this Conn while that Burst is active.
	HeldBy *Burst
	// NeverWait makes every write a Send: no writer waits for the peer to read, and a message
	// that the peer does not take at once is left to the background writer. It is for a hosted
	// session's client, which the shared process's readers of servers write to on the session's
	// behalf: one client that does not read must not hold up the sessions that share its
	// servers. Close then waits for the background writer to finish, for neverWaitClose at
	// most, and closes the writer, which ends a write that waits still.
	NeverWait bool
}

// Conn carries JSON-RPC messages, one per line, over a reader and a writer. Read must be
// called from one goroutine at a time; the writing methods and Close may be called
// concurrently.
type Conn struct {
	opts Options
	r    *bufio.Reader
	// maxMessage is the limit on one incoming line: Options.MaxMessageSize, or more once
	// raised (RaiseMaxMessageSize). lastSize is the length of the line of the message Read
	// returned last.
	maxMessage atomic.Int64
	lastSize   int
	rc         io.Closer
	w          io.Writer
	wc         io.Closer

	wmu  sync.Mutex
	wbuf []byte
	// For Send: a write that takes what the pipe takes at once (nil when the writer cannot
	// be written without waiting: see tryWriter), and the messages waiting for a background
	// writer.
	tryWrite func([]byte) (int, error)
	qmu      sync.Mutex
	queue    []queued
	flushers int
	idle     chan struct{} // closed when flushers comes back to 0, for a Close that waits (NeverWait)
	held     heldWrites    // during a burst of Options.HeldBy (burst.go)
	spare    []byte        // the buffer of held writes already written, for the next burst's
	// inBurst says that Read began a burst of Options.Burst that it has not ended; read by
	// the reader only.
	inBurst bool
	closeMu sync.Once
	closed  chan struct{}

	// Batches: messages of a batch not yet returned by Read, and the batch each request read
	// in one belongs to until it is answered.
	batchQueue []jsonrpc.Message
	batchMu    sync.Mutex
	batchOf    map[jsonrpc.ID]batchSlot
	inBatches  atomic.Int64 // len(batchOf), read without the lock on every write

	// Requests read and not yet answered, for DrainOnEOF.
	pendingMu sync.Mutex
	pending   map[jsonrpc.ID]bool
	drained   chan struct{} // closed when pending becomes empty, while draining
}

// New returns a Conn reading messages from r and writing them to w. Close closes both when
// they are io.Closers. r is nil for a Conn whose messages a peer in this process hands over
// (Receiver, Given): it is never Read.
func New(r io.Reader, w io.Writer, opts *Options) *Conn {
	c := &Conn{w: w, closed: make(chan struct{}), pending: map[jsonrpc.ID]bool{}}
	if r != nil { // nil for a Conn whose messages are handed to it (Given), never Read
		c.r = bufio.NewReaderSize(Yielding(r), readBufferSize)
	}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.MaxMessageSize <= 0 {
		c.opts.MaxMessageSize = DefaultMaxMessageSize
	}
	c.maxMessage.Store(int64(c.opts.MaxMessageSize))
	c.rc, _ = r.(io.Closer)
	c.wc, _ = w.(io.Closer)
	switch tw := w.(type) {
	case InlineWriter:
		c.tryWrite = tw.Write
	case TryWriter:
		c.tryWrite = tw.TryWrite
	default:
		c.tryWrite = tryWriter(w)
	}
	return c
}

// neverWaitClose bounds the wait of Close, with Options.NeverWait, for what was sent to be
// written (a variable for the tests).
var neverWaitClose = 5 * time.Second

// Close closes the reader and the writer. It may be called more than once.
func (c *Conn) Close() error {
	if c.opts.NeverWait {
		return c.closeNeverWait()
	}
	c.closeMu.Do(func() { close(c.closed) })
	c.wmu.Lock() // not in the middle of a write
	defer c.wmu.Unlock()
	return c.closeBoth()
}

// closeNeverWait is Close with Options.NeverWait: what was sent is written first, for
// neverWaitClose at most; then the writer is closed, which ends a background write that waits
// for a peer that does not read. A message being written inline (Send) is waited for too: its
// write does not wait, and, should the pipe take only part of it, its background writer is
// then waited for, so that no message is cut short by the close.
func (c *Conn) closeNeverWait() error {
	deadline := time.Now().Add(neverWaitClose)
	for {
		c.qmu.Lock()
		if c.flushers == 0 && c.wmu.TryLock() { // nothing is being written
			c.closeMu.Do(func() { close(c.closed) })
			c.qmu.Unlock()
			defer c.wmu.Unlock()
			return c.closeBoth()
		}
		var idle chan struct{}
		if c.flushers > 0 {
			if c.idle == nil {
				c.idle = make(chan struct{})
			}
			idle = c.idle
		}
		c.qmu.Unlock()
		switch {
		case time.Now().After(deadline):
			c.closeMu.Do(func() { close(c.closed) })
			return c.closeBoth()
		case idle == nil:
			closeWaits()
			runtime.Gosched() // a Send writing inline, which does not wait
			continue
		}
		select {
		case <-idle:
		case <-time.After(time.Until(deadline)):
		}
	}
}

// closeWaits is called when closeNeverWait finds a message being written inline (for the
// tests).
var closeWaits = func() {}

// closeBoth closes the writer and the reader.
func (c *Conn) closeBoth() error {
	var err error
	if c.wc != nil {
		err = c.wc.Close()
	}
	if c.rc != nil {
		if rerr := c.rc.Close(); err == nil {
			err = rerr
		}
	}
	return err
}

// CloseRead closes only the reader: no more messages are read, but the peer's input stays
// open (for a child, closing its stdin is part of stopping it, which is its owner's call).
func (c *Conn) CloseRead() error {
	c.closeMu.Do(func() { close(c.closed) })
	if c.rc != nil {
		return c.rc.Close()
	}
	return nil
}
