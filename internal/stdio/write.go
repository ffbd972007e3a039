package stdio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// Writing: messages from raw parts, one line each; Send writes inline when the pipe takes it
// and leaves the rest to a background writer, so that no caller waits for a peer that does not
// read. Writes may be held during a reader's burst (burst.go); a write that is not held writes
// what is held first, so that the order of the messages to one peer is the order they were
// given in.

// Write writes msg (a message of the SDK's session) as one line, never held.
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
	return c.writeNow(data, []byte("\n"))
}

// WriteResponse writes the response to request id with an encoded result or error object,
// as they are; held during a burst of Options.HeldBy.
func (c *Conn) WriteResponse(id jsonrpc.ID, result, errObj json.RawMessage) error {
	// One allocation for the ID and the parts of the usual answer: one is written for every
	// call.
	r := new(responseParts)
	idJSON, err := appendID(r.id[:0], id)
	if err != nil {
		return err
	}
	r.parts = responseOf(idJSON, result, errObj)
	parts := r.parts[:]
	if c.inBatches.Load() == 0 && c.holdResponse(id, parts) {
		return nil
	}
	if c.opts.DrainOnEOF > 0 {
		defer c.answered(id)
	}
	return c.respond(id, parts...)
}

// holdResponse holds a response during a burst (small ones: a large one is written at once,
// after what is held); the request counts as answered once it is written.
func (c *Conn) holdResponse(id jsonrpc.ID, parts [][]byte) bool {
	if c.opts.DrainOnEOF <= 0 {
		id = jsonrpc.ID{} // no request to count as answered
	}
	return size(parts) <= sendInline && c.opts.HeldBy.hold(c, nil, id, parts)
}

// Response is the line answering the request whose ID is id (encoded) with a result, or with
// an error object when errObj is not nil, in parts: the values are parts of their own, never
// copied or re-encoded. It is the one place a response is built.
func Response(id, result, errObj json.RawMessage) [][]byte {
	parts := responseOf(id, result, errObj)
	return parts[:]
}

// responseOf is Response's parts, in an array.
func responseOf(id, result, errObj json.RawMessage) [5][]byte {
	if errObj != nil {
		return [5][]byte{responseHead, id, errorMember, errObj, lineEnd}
	}
	if len(result) == 0 {
		result = null // the peer sent neither: keep the line valid JSON
	}
	return [5][]byte{responseHead, id, resultMember, result, lineEnd}
}

// The constant parts of a response (never written to).
var (
	responseHead = []byte(`{"jsonrpc":"2.0","id":`)
	errorMember  = []byte(`,"error":`)
	resultMember = []byte(`,"result":`)
	lineEnd      = []byte("}\n")
	null         = []byte("null")
)

// ErrorObject is a JSON-RPC error object: its code, message and data (none when nil).
func ErrorObject(code int64, data json.RawMessage, msg string) json.RawMessage {
	b, _ := json.Marshal(&jsonrpc.Error{Code: code, Message: msg, Data: data})
	return b
}

// responseParts holds what WriteResponse builds: the parts, and room for the ID.
type responseParts struct {
	parts [5][]byte
	id    [24]byte
}

// EncodeID is a request ID as JSON: a number as it is, a string quoted.
func EncodeID(id jsonrpc.ID) (json.RawMessage, error) { return appendID(nil, id) }

// appendID is EncodeID appending to b (the common IDs; an unusual one is made anew).
func appendID(b []byte, id jsonrpc.ID) ([]byte, error) {
	switch v := id.Raw().(type) {
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case string:
		if plain(v) {
			b = slices.Grow(b, len(v)+2) // once, for a long one
			return append(append(append(b, '"'), v...), '"'), nil
		}
	}
	return json.Marshal(id.Raw())
}

// IDJSON is EncodeID for an ID that came decoded (every such ID encodes): null should one not.
func IDJSON(id jsonrpc.ID) json.RawMessage {
	b, err := EncodeID(id)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// ErrorJSON is the error object of a decoded response (its Error), as JSON; nil for none.
func ErrorJSON(e error) json.RawMessage {
	if e == nil {
		return nil
	}
	b, err := json.Marshal(e)
	if err != nil {
		return ErrorObject(int64(jsonrpc.CodeInternalError), nil, "Internal error: the peer's error could not be encoded")
	}
	return b
}

// plain reports whether s needs no escaping in JSON (printable ASCII without " and \, and
// none of the characters encoding/json escapes for HTML).
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// WriteParts writes the concatenation of parts as one message: one line of JSON that ends with
// a newline. It is held during a burst of Options.HeldBy (small messages only).
func (c *Conn) WriteParts(parts ...[]byte) error {
	if size(parts) <= sendInline && c.opts.HeldBy.hold(c, nil, jsonrpc.ID{}, parts) {
		return nil
	}
	return c.writeNow(parts...)
}

// writeNow writes parts now, after what is held, waiting for the peer to take them.
func (c *Conn) writeNow(parts ...[]byte) error {
	if c.opts.NeverWait {
		c.Send(nil, parts...)
		return nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(parts...)
}

// writeLocked writes what is held, then parts. Callers hold wmu.
func (c *Conn) writeLocked(parts ...[]byte) error {
	c.qmu.Lock()
	held := c.held.take()
	c.qmu.Unlock()
	err := c.writeParts(held.data, parts)
	c.recycle(held.data)
	if err != nil {
		held.fail(err)
	}
	c.answeredAll(held.ids)
	return err
}

// atomicWrite is the most a write to a pipe can carry whole: "Write requests of {PIPE_BUF}
// bytes or less shall not be interleaved with data from other processes" (POSIX write(2));
// PIPE_BUF is 4096 on Linux, and at least 512 everywhere. Should the aggregator be killed in
// the middle, its peer reads only whole lines of what was written in such writes.
const atomicWrite = 4096

// writeParts writes first (whole lines held during a burst) and then parts, as one write when
// they are small; held lines are written in writes of at most atomicWrite bytes, cut between
// lines, and a large part is written on its own instead of being copied. Callers hold wmu.
func (c *Conn) writeParts(first []byte, parts [][]byte) error {
	select {
	case <-c.closed:
		return fmt.Errorf("write: %w", io.ErrClosedPipe)
	default:
	}
	for len(first)+size(parts) > atomicWrite && len(first) > 0 {
		n := linesWithin(first, atomicWrite)
		if _, err := c.w.Write(first[:n]); err != nil {
			return err
		}
		first = first[n:]
	}
	buf := append(c.wbuf[:0], first...)
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

// queued is a message waiting for Send's background writer: its parts, who to tell should it
// fail, and the responses among what it holds, answered once it is written.
type queued struct {
	parts  [][]byte
	failed WriteFailure
	ids    []jsonrpc.ID
}

// A WriteFailure is told that a message given to Send could not be written. (An interface, not
// a function: the sender's record of the message, already made, can be told, and no function
// is made for every message.)
type WriteFailure interface {
	WriteFailed(err error)
}

// OnFailure is a function as a WriteFailure.
type OnFailure func(err error)

// WriteFailed calls f.
func (f OnFailure) WriteFailed(err error) { f(err) }

// sendInline is the largest message Send tries to write at once: what fits into a pipe. It is
// also the largest that is held during a burst.
const sendInline = 64 << 10

// Send writes the concatenation of parts as one message, like WriteParts, without keeping the
// caller waiting for a peer that does not read: a message that does not fit into the pipe at
// once is finished by a background writer, which also takes every later Send until it has
// caught up, so that messages stay whole and in order. The parts must not change afterwards.
// failed, when not nil, is called if the message cannot be written; it may be called from
// another goroutine. It is never held: see SendHeld.
//
// The aggregator forwards the client's calls with Send from the goroutine that reads the
// client: writing from a new goroutine instead cost a scheduler hop, 40 µs a call here.
func (c *Conn) Send(failed WriteFailure, parts ...[]byte) {
	c.qmu.Lock()
	if c.flushers > 0 || c.tryWrite == nil || size(parts)+len(c.held.data) > sendInline || !c.wmu.TryLock() {
		if held := c.held.take(); len(held.data) > 0 {
			c.queue = append(c.queue, queued{[][]byte{held.data}, held.failures(), held.ids})
		}
		if len(parts) > 0 {
			c.queue = append(c.queue, queued{parts, failed, nil})
		}
		start := c.flushers == 0 && len(c.queue) > 0
		if start {
			c.flushers++
		}
		c.qmu.Unlock()
		if start {
			go c.flush(false)
		}
		return
	}
	held := c.held.take()
	c.qmu.Unlock()
	// Holding wmu.
	select {
	case <-c.closed:
		c.wmu.Unlock()
		err := fmt.Errorf("write: %w", io.ErrClosedPipe)
		held.fail(err)
		if failed != nil {
			failed.WriteFailed(err)
		}
		return
	default:
	}
	buf := append(c.wbuf[:0], held.data...)
	c.recycle(held.data)
	for _, p := range parts {
		buf = append(buf, p...)
	}
	c.wbuf = buf[:0]
	if len(buf) == 0 {
		c.wmu.Unlock()
		return
	}
	n, err := c.tryWrite(buf)
	switch {
	case err == nil && n == len(buf):
		c.wmu.Unlock()
		c.answeredAll(held.ids)
	case err == nil:
		// The pipe is full (the peer is not reading): the rest of this message goes first,
		// written by a background writer that takes over the lock, so nothing else gets in
		// between.
		rest := append([]byte(nil), buf[n:]...)
		fail := func(err error) {
			held.fail(err)
			if failed != nil {
				failed.WriteFailed(err)
			}
		}
		c.qmu.Lock()
		first := []queued{{[][]byte{rest}, OnFailure(fail), held.ids}}
		// What a burst held while this was being written came after it, and goes after its
		// rest: left held, it would be written first, inside this message (writeLocked writes
		// what is held before its parts).
		if h := c.held.take(); len(h.data) > 0 {
			first = append(first, queued{[][]byte{h.data}, h.failures(), h.ids})
		}
		c.queue = append(first, c.queue...)
		c.flushers++
		c.qmu.Unlock()
		go c.flush(true)
	default:
		c.wmu.Unlock()
		c.answeredAll(held.ids)
		held.fail(err)
		if failed != nil {
			failed.WriteFailed(err)
		}
	}
}

// SendHeld is Send, held during a burst of Options.HeldBy (see Burst): for messages that
// nothing the burst's readers do waits on.
func (c *Conn) SendHeld(failed WriteFailure, parts ...[]byte) {
	c.SendHeldBy(c.opts.HeldBy, failed, parts...)
}

// SendHeldBy is SendHeld held during a burst of b instead (Send when b is nil): for a Conn that
// several readers write to, each held by a burst of its own (a shared server's connection, to
// which each session it serves writes its requests held by its client's burst). Any end of a
// burst that held writes to c writes all that c holds, the other bursts' too.
func (c *Conn) SendHeldBy(b *Burst, failed WriteFailure, parts ...[]byte) {
	if size(parts) <= sendInline && b.hold(c, failed, jsonrpc.ID{}, parts) {
		return
	}
	c.Send(failed, parts...)
}

// flushHeld writes what is held, at the end of a burst.
func (c *Conn) flushHeld() {
	if c.tryWrite != nil {
		c.Send(nil)
		return
	}
	_ = c.writeNow()
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
			if c.flushers == 0 && c.idle != nil {
				close(c.idle) // a Close waits for it
				c.idle = nil
			}
			c.qmu.Unlock()
			c.wmu.Unlock()
			return
		}
		q := c.queue[0]
		c.queue[0] = queued{}
		c.queue = c.queue[1:]
		c.qmu.Unlock()
		if err := c.writeLocked(q.parts...); err != nil && q.failed != nil {
			q.failed.WriteFailed(err)
		}
		c.answeredAll(q.ids)
	}
}

// linesWithin is the length of the longest run of whole lines at the start of data that fits in
// max bytes; the first line when it alone is longer (data ends with a newline).
func linesWithin(data []byte, max int) int {
	if len(data) <= max {
		return len(data)
	}
	if i := bytes.LastIndexByte(data[:max], '\n'); i >= 0 {
		return i + 1
	}
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1
	}
	return len(data)
}

// size is the length of the message parts make.
func size(parts [][]byte) int {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	return n
}

// Request is a request under id, a string ID of the sender's own that has nothing to escape
// ("agg-7"), with params in parts (none, or one empty part, for no params).
func Request(id, method string, params ...[]byte) [][]byte {
	if len(params) == 1 && len(params[0]) == 0 {
		params = nil
	}
	// One allocation for the head and the parts of the usual request (a call's params are one
	// part, or three where the tool's name is replaced): a request is built for every call.
	r := new(requestParts)
	head := append(append(append(r.head[:0], `{"jsonrpc":"2.0","id":"`...), id...), `","method":`...)
	head = appendString(head, method)
	if len(params) == 0 {
		return append(r.parts[:0], append(head, "}\n"...))
	}
	parts := append(r.parts[:0], append(head, `,"params":`...))
	parts = append(parts, params...)
	return append(parts, closeLine)
}

// requestParts holds what Request builds: the head, and the parts after it.
type requestParts struct {
	parts [5][]byte
	head  [96]byte
}

// appendString appends s as a JSON string: as it is in the common case, where it has nothing
// to escape.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return append(b, rawjson.Marshal(s)...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}

// closeLine ends a message whose last part is a value (never written to).
var closeLine = []byte("}\n")

// Notification is a notification with raw params (none when empty).
func Notification(method string, params json.RawMessage) [][]byte {
	if len(params) == 0 {
		return [][]byte{[]byte(`{"jsonrpc":"2.0","method":` + strconv.Quote(method) + "}\n")}
	}
	return [][]byte{[]byte(`{"jsonrpc":"2.0","method":` + strconv.Quote(method) + `,"params":`), params, []byte("}\n")}
}

// Cancelled is notifications/cancelled for the request id (a string ID of the sender's own),
// with the reason when there is one.
func Cancelled(id, reason string) [][]byte {
	params, _ := json.Marshal(struct {
		RequestID string `json:"requestId"`
		Reason    string `json:"reason,omitempty"`
	}{id, reason})
	return Notification("notifications/cancelled", params)
}
