package stdio

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Writing: messages from raw parts, one line each; Send writes inline when the pipe takes it
// and leaves the rest to a background writer, so that no caller waits for a peer that does not
// read.

// Write writes msg (a message of the SDK's session) as one line.
func (c *Conn) Write(msg jsonrpc.Message) error {
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	if resp, ok := msg.(*jsonrpc.Response); ok {
		if c.opts.DrainOnEOF > 0 {
			defer c.answered(resp.ID)
		}
		return c.respond(resp.ID, data, []byte("\n"))
	}
	return c.WriteParts(data, []byte("\n"))
}

// WriteResponse writes the response to request id with an encoded result or error object,
// as they are.
func (c *Conn) WriteResponse(id jsonrpc.ID, result, errObj json.RawMessage) error {
	if c.opts.DrainOnEOF > 0 {
		defer c.answered(id)
	}
	idJSON, err := json.Marshal(id.Raw())
	if err != nil {
		return err
	}
	return c.respond(id, Response(idJSON, result, errObj)...)
}

// Response is the line answering the request whose ID is id (encoded) with a result, or with
// an error object when errObj is not nil, in parts: the values are parts of their own, never
// copied or re-encoded. It is the one place a response is built.
func Response(id, result, errObj json.RawMessage) [][]byte {
	if errObj != nil {
		return [][]byte{[]byte(`{"jsonrpc":"2.0","id":`), id, []byte(`,"error":`), errObj, []byte("}\n")}
	}
	if len(result) == 0 {
		result = json.RawMessage("null") // the peer sent neither: keep the line valid JSON
	}
	return [][]byte{[]byte(`{"jsonrpc":"2.0","id":`), id, []byte(`,"result":`), result, []byte("}\n")}
}

// WriteParts writes the concatenation of parts as one message: one line of JSON that ends with
// a newline.
func (c *Conn) WriteParts(parts ...[]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(parts...)
}

func (c *Conn) writeLocked(parts ...[]byte) error {
	select {
	case <-c.closed:
		return fmt.Errorf("write: %w", io.ErrClosedPipe)
	default:
	}
	// Small messages are joined into one write; a large part is written on its own instead of
	// being copied.
	buf := c.wbuf[:0]
	for _, p := range parts {
		if len(p) > 64<<10 {
			if len(buf) > 0 {
				if _, err := c.w.Write(buf); err != nil {
					return err
				}
				buf = buf[:0]
			}
			if _, err := c.w.Write(p); err != nil {
				return err
			}
			continue
		}
		buf = append(buf, p...)
	}
	if len(buf) > 0 {
		if _, err := c.w.Write(buf); err != nil {
			return err
		}
	}
	if cap(buf) <= 1<<20 {
		c.wbuf = buf[:0]
	}
	return nil
}

// queued is a message waiting for Send's background writer.
type queued struct {
	parts  [][]byte
	failed func(error)
}

// sendWait is how long Send lets its caller wait for a peer that is not reading.
const sendWait = time.Millisecond

// sendInline is the largest message Send tries to write at once: what fits into a pipe.
const sendInline = 64 << 10

// Send writes the concatenation of parts as one message, like WriteParts, without keeping the
// caller waiting for a peer that does not read: a message that does not fit into the pipe at
// once is finished by a background writer, which also takes every later Send until it has
// caught up, so that messages stay whole and in order. The parts must not change afterwards.
// failed, when not nil, is called if the message cannot be written; it may be called from
// another goroutine.
//
// The aggregator forwards the client's calls with Send from the goroutine that reads the
// client: writing from a new goroutine instead cost a scheduler hop, 40 µs a call here.
func (c *Conn) Send(failed func(error), parts ...[]byte) {
	size := 0
	for _, p := range parts {
		size += len(p)
	}
	c.qmu.Lock()
	if c.flushers > 0 || c.deadline == nil || size > sendInline || !c.wmu.TryLock() {
		c.queue = append(c.queue, queued{parts, failed})
		start := c.flushers == 0
		if start {
			c.flushers++
		}
		c.qmu.Unlock()
		if start {
			go c.flush(false)
		}
		return
	}
	c.qmu.Unlock()
	// Holding wmu.
	select {
	case <-c.closed:
		c.wmu.Unlock()
		if failed != nil {
			failed(fmt.Errorf("write: %w", io.ErrClosedPipe))
		}
		return
	default:
	}
	buf := c.wbuf[:0]
	for _, p := range parts {
		buf = append(buf, p...)
	}
	c.wbuf = buf[:0]
	_ = c.deadline(time.Now().Add(sendWait))
	n, err := c.w.Write(buf)
	_ = c.deadline(time.Time{})
	switch {
	case err == nil:
		c.wmu.Unlock()
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The peer is not reading: the rest of this message goes first, written by a
		// background writer that takes over the lock, so nothing else gets in between.
		rest := append([]byte(nil), buf[n:]...)
		c.qmu.Lock()
		c.queue = append([]queued{{[][]byte{rest}, failed}}, c.queue...)
		c.flushers++
		c.qmu.Unlock()
		go c.flush(true)
	default:
		c.wmu.Unlock()
		if failed != nil {
			failed(err)
		}
	}
}

// flush writes the queued messages in order until none is left. locked says whether the
// caller already holds wmu for it.
func (c *Conn) flush(locked bool) {
	if !locked {
		c.wmu.Lock()
	}
	for {
		c.qmu.Lock()
		if len(c.queue) == 0 {
			c.flushers--
			c.qmu.Unlock()
			c.wmu.Unlock()
			return
		}
		q := c.queue[0]
		c.queue[0] = queued{}
		c.queue = c.queue[1:]
		c.qmu.Unlock()
		if err := c.writeLocked(q.parts...); err != nil && q.failed != nil {
			q.failed(err)
		}
	}
}
