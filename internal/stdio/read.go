package stdio

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Reading: one line at a time, any length up to the limit, with the end of the input held
// until the requests read are answered (Options.DrainOnEOF).

// readBufferSize is the size of the reader's buffer: lines up to this long are decoded where
// they were read.
const readBufferSize = 64 << 10

// Read returns the next JSON-RPC message. A line that is not one (or is too large) is
// returned as a *BadLineError; the next Read goes on after it. At the end of the input it
// returns io.EOF, after waiting for the answers to the requests read when Options.DrainOnEOF
// says so; once Close or CloseRead was called, io.EOF too.
func (c *Conn) Read() (jsonrpc.Message, error) {
	if c.inBurst && !c.moreBuffered() {
		c.EndBurst()
	}
	msg, err := c.read()
	if err != nil {
		c.EndBurst()
	} else if c.opts.Burst != nil && !c.inBurst && c.moreBuffered() {
		c.inBurst = true
		c.opts.Burst.begin()
	}
	return msg, err
}

// EndBurst ends the burst Read began, if any: what it held is written. Read does it before it
// waits for input; a reader that stops calling Read while a burst may be under way calls it.
func (c *Conn) EndBurst() {
	if c.inBurst {
		c.inBurst = false
		c.opts.Burst.end()
	}
}

// moreBuffered reports whether a whole message is buffered beyond the one Read returned last:
// the next Read will not wait for input.
func (c *Conn) moreBuffered() bool {
	if len(c.batchQueue) > 0 {
		return true
	}
	n := c.r.Buffered()
	if n == 0 {
		return false
	}
	buf, _ := c.r.Peek(n)
	return bytes.IndexByte(buf, '\n') >= 0
}

// read is Read without the bursts.
func (c *Conn) read() (jsonrpc.Message, error) {
	for {
		if len(c.batchQueue) > 0 {
			msg := c.batchQueue[0]
			c.batchQueue[0] = nil
			c.batchQueue = c.batchQueue[1:]
			c.deliver(msg)
			return msg, nil
		}
		line, owned, err := c.readLine()
		if err != nil {
			select {
			case <-c.closed:
				return nil, io.EOF
			default:
			}
			if errors.Is(err, ErrTooLarge) {
				return nil, &BadLineError{Line: line, Err: err}
			}
			if errors.Is(err, io.EOF) {
				c.drain()
			}
			return nil, err
		}
		c.lastSize = len(line) // as the limit counts it
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue // blank lines carry nothing
		}
		if line[0] == '[' && c.opts.Batches != nil && json.Valid(line) && c.opts.Batches() {
			c.readBatch(line)
			continue
		}
		msg, err := decodeMessage(line, owned)
		if err != nil {
			if !owned {
				line = bytes.Clone(line) // it points into the reader's buffer
			}
			return nil, &BadLineError{Line: line, Err: err}
		}
		c.deliver(msg)
		return msg, nil
	}
}

// deliver does the bookkeeping for a message read: batches, and the requests that wait for
// an answer before the end of the input.
func (c *Conn) deliver(msg jsonrpc.Message) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok {
		return
	}
	if req.Method == "notifications/cancelled" && c.inBatches.Load() > 0 {
		// A cancelled request gets no answer: its batch is complete without it.
		if id, _, ok := ParseCancel(req.Params); ok {
			c.batchAnswer(id, nil)
		}
	}
	if c.opts.DrainOnEOF > 0 {
		switch {
		case req.IsCall():
			c.pendingMu.Lock()
			c.pending[req.ID] = true
			c.pendingMu.Unlock()
		case req.Method == "notifications/cancelled":
			// "Receivers of a cancellation notification SHOULD ... not send a response
			// for the cancelled request": stop waiting for it.
			if id, _, ok := ParseCancel(req.Params); ok {
				c.answered(id)
			}
		}
	}
}

// ParseCancel reads the params of notifications/cancelled: the ID of the request cancelled, and
// the reason when one is given. It is the one place they are read.
func ParseCancel(params json.RawMessage) (id jsonrpc.ID, reason string, ok bool) {
	var p struct {
		RequestID any    `json:"requestId"`
		Reason    string `json:"reason,omitempty"`
	}
	if json.Unmarshal(params, &p) != nil {
		return id, "", false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	return id, p.Reason, err == nil && id.IsValid()
}

// drain waits until every request read has been answered, for at most Options.DrainOnEOF.
func (c *Conn) drain() {
	if c.opts.DrainOnEOF <= 0 {
		return
	}
	c.pendingMu.Lock()
	if len(c.pending) == 0 {
		c.pendingMu.Unlock()
		return
	}
	c.drained = make(chan struct{})
	done := c.drained
	c.pendingMu.Unlock()
	select {
	case <-done:
	case <-c.closed:
	case <-time.After(c.opts.DrainOnEOF):
	}
}

// Standing notes that the request id read stays open until the peer ends it (a
// subscriptions/listen stream, which is answered only when it is cancelled): the end of the
// input does not wait for its answer (Options.DrainOnEOF).
func (c *Conn) Standing(id jsonrpc.ID) { c.answered(id) }

// answeredAll notes that the requests ids have been answered.
func (c *Conn) answeredAll(ids []jsonrpc.ID) {
	for _, id := range ids {
		c.answered(id)
	}
}

// answered notes that the request id has been answered.
func (c *Conn) answered(id jsonrpc.ID) {
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	if !c.pending[id] {
		return
	}
	delete(c.pending, id)
	if len(c.pending) == 0 && c.drained != nil {
		close(c.drained)
		c.drained = nil
	}
}

// readLine returns the next line without its newline. A line over the limit is consumed up to
// its end and returned truncated with ErrTooLarge. The returned slice may point into the
// reader's buffer: it is valid until the next call, unless owned says it was allocated for
// this line alone.
func (c *Conn) readLine() (line []byte, owned bool, err error) {
	frag, err := c.r.ReadSlice('\n')
	if err == nil {
		if int64(len(frag)-1) > c.maxMessage.Load() {
			var ids idScanner
			ids.feed(frag)
			return frag[:min(len(frag), 256)], false, &TooLargeError{ID: ids.id}
		}
		return frag[:len(frag)-1], false, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		if len(frag) > 0 && errors.Is(err, io.EOF) {
			return frag, false, nil // a last line without newline
		}
		return nil, false, err
	}
	// A line longer than the buffer: collect it in chunks, then copy it once into a slice of
	// its exact size. Growing one slice instead allocated about five times the line's size
	// on the way (append grows big slices by a quarter), which set the peak memory of large
	// results (BENCHMARKS.md).
	chunks := []*[]byte{chunk(frag)}
	total := len(frag)
	defer func() {
		for _, c := range chunks {
			*c = (*c)[:0]
			chunkPool.Put(c)
		}
	}()
	limit := c.maxMessage.Load()
	for {
		frag, err = c.r.ReadSlice('\n')
		if int64(total+len(frag)) > limit+1 {
			first := *chunks[0]
			head := bytes.Clone(first[:min(len(first), 256)])
			// Skip the rest of the line, looking for its id on the way.
			var ids idScanner
			for _, ch := range chunks {
				ids.feed(*ch)
			}
			ids.feed(frag)
			for errors.Is(err, bufio.ErrBufferFull) {
				frag, err = c.r.ReadSlice('\n')
				ids.feed(frag)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, false, err
			}
			return head, false, &TooLargeError{ID: ids.id}
		}
		chunks = append(chunks, chunk(frag))
		total += len(frag)
		switch {
		case err == nil:
			return join(chunks, total)[:total-1], true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return join(chunks, total), true, nil
		default:
			return nil, false, err
		}
	}
}

// chunkPool holds the buffers long lines are collected in, each the size of the reader's
// buffer.
var chunkPool = sync.Pool{New: func() any { b := make([]byte, 0, readBufferSize); return &b }}

func chunk(frag []byte) *[]byte {
	c := chunkPool.Get().(*[]byte)
	*c = append((*c)[:0], frag...)
	return c
}

func join(chunks []*[]byte, total int) []byte {
	line := make([]byte, 0, total)
	for _, c := range chunks {
		line = append(line, *c...)
	}
	return line
}
