// Package stdio carries newline-delimited JSON-RPC (the MCP stdio transport) over a pair of
// pipes, as an mcp.Connection for the SDK's sessions.
//
// It differs from the SDK's own stdio and IO transports where a proxy needs it to:
//   - a line that is not a JSON-RPC message does not end the session: it is handed to a
//     callback (which answers the client with a JSON-RPC error, or logs a child's garbage) and
//     reading goes on;
//   - the line limit is the caller's (the SDK's transport for child processes is fixed at
//     16 MiB), and a line over it is dropped and reported, not fatal;
//   - a result can be written exactly as it was received (see Conn.Raw), without the SDK
//     decoding and re-encoding it;
//   - a notification can be sent outside the SDK's session (see Conn.Notify);
//   - JSON-RPC batches can be allowed per session (see Options.Batches).
package stdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultMaxMessageSize is the default limit on one message, in bytes.
const DefaultMaxMessageSize = 128 << 20

// ErrTooLarge is given to Options.BadLine for a line longer than the limit.
var ErrTooLarge = errors.New("message larger than the limit")

// Options configure a Conn. The zero value is usable.
type Options struct {
	// MaxMessageSize limits one incoming line; 0 means DefaultMaxMessageSize.
	MaxMessageSize int
	// BadLine is called, from the reading goroutine, for each incoming line that is not a
	// JSON-RPC message (err says why) or is larger than MaxMessageSize (err is a
	// *TooLargeError, which is ErrTooLarge and carries the line's id, and line holds only the
	// beginning of it). When it returns a message, Read returns that in the
	// line's place (an error response for a request whose answer was too large, say);
	// otherwise reading goes on. Nil ignores bad lines.
	BadLine func(c *Conn, line []byte, err error) jsonrpc.Message
	// Received is called for every message read, before the session sees it. It must not
	// block.
	Received func(jsonrpc.Message)
	// Intercept, when it returns true, takes a message read away from the session: the
	// aggregator forwards tools/call itself, as raw JSON-RPC. It must not block.
	Intercept func(jsonrpc.Message) bool
	// DrainOnEOF, when positive, holds back the end of the input until every request read
	// has been answered, or for at most this long: a client that sends its requests and closes
	// its end of the pipe still gets its answers.
	DrainOnEOF time.Duration
	// Batches, when it returns true, accepts a JSON-RPC batch (an array of messages) on one
	// line: its messages are read one by one, and the answers to its requests are written
	// together as one array once the last is in. Otherwise a batch goes to BadLine.
	Batches func() bool
	// Answering, when set, sees every response Write is given before it is encoded, and may
	// change its result.
	Answering func(*jsonrpc.Response)
}

// Conn is an mcp.Connection over a reader and a writer carrying one JSON-RPC message per line.
// Its Read must be called from one goroutine at a time (the SDK does so); Write and Close may
// be called concurrently.
type Conn struct {
	opts Options
	r    *bufio.Reader
	rc   io.Closer
	w    io.Writer
	wc   io.Closer

	wmu  sync.Mutex
	wbuf []byte
	// For Send: the writer's deadline (nil when it has none, as on Windows pipes) and the
	// messages waiting for a background writer.
	deadline func(time.Time) error
	qmu      sync.Mutex
	queue    []queued
	flushers int
	closeMu  sync.Once
	closed   chan struct{}

	rawMu  sync.Mutex
	rawSeq atomic.Uint64
	raws   map[string][]byte

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

// readBufferSize is the size of the reader's buffer: lines up to this long are decoded where
// they were read.
const readBufferSize = 64 << 10

// New returns a Conn reading messages from r and writing them to w. Close closes both when
// they are io.Closers.
func New(r io.Reader, w io.Writer, opts *Options) *Conn {
	c := &Conn{r: bufio.NewReaderSize(r, readBufferSize), w: w, closed: make(chan struct{}), raws: map[string][]byte{}, pending: map[jsonrpc.ID]bool{}}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.MaxMessageSize <= 0 {
		c.opts.MaxMessageSize = DefaultMaxMessageSize
	}
	c.rc, _ = r.(io.Closer)
	c.wc, _ = w.(io.Closer)
	if d, ok := w.(interface{ SetWriteDeadline(time.Time) error }); ok && d.SetWriteDeadline(time.Time{}) == nil {
		c.deadline = d.SetWriteDeadline
	}
	return c
}

var _ mcp.Connection = (*Conn)(nil)

// Transport returns an mcp.Transport whose Connect returns c. A Conn, like a pipe, can be
// connected once.
func (c *Conn) Transport() mcp.Transport { return transport{c} }

type transport struct{ c *Conn }

func (t transport) Connect(context.Context) (mcp.Connection, error) { return t.c, nil }

// intercepted reports whether Options.Intercept took msg away from the session. Replacement
// messages from BadLine go through it too: the answer that fails an oversized response must
// reach whoever waits for it.
func (c *Conn) intercepted(msg jsonrpc.Message) bool {
	return c.opts.Intercept != nil && c.opts.Intercept(msg)
}

// SessionID implements mcp.Connection: stdio sessions have no ID.
func (c *Conn) SessionID() string { return "" }

// Read returns the next JSON-RPC message. Lines that are not messages go to Options.BadLine.
// At the end of the input it returns io.EOF.
func (c *Conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if len(c.batchQueue) > 0 {
			msg := c.batchQueue[0]
			c.batchQueue[0] = nil
			c.batchQueue = c.batchQueue[1:]
			if c.deliver(msg) {
				return msg, nil
			}
			continue
		}
		line, owned, err := c.readLine()
		if err != nil {
			select {
			case <-c.closed:
				return nil, io.EOF
			default:
			}
			if errors.Is(err, ErrTooLarge) {
				if msg := c.bad(line, err); msg != nil && !c.intercepted(msg) {
					return msg, nil
				}
				continue
			}
			if errors.Is(err, io.EOF) {
				c.drain()
			}
			return nil, err
		}
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
			if msg := c.bad(line, err); msg != nil && !c.intercepted(msg) {
				return msg, nil
			}
			continue
		}
		if c.deliver(msg) {
			return msg, nil
		}
	}
}

// deliver does the bookkeeping for a message read, and reports whether it goes to the session
// (Options.Intercept did not take it).
func (c *Conn) deliver(msg jsonrpc.Message) bool {
	if c.opts.Received != nil {
		c.opts.Received(msg)
	}
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "notifications/cancelled" && c.inBatches.Load() > 0 {
		// A cancelled request gets no answer: its batch is complete without it.
		if id, ok := cancelledID(req.Params); ok {
			c.batchAnswer(id, nil)
		}
	}
	if req, ok := msg.(*jsonrpc.Request); ok && c.opts.DrainOnEOF > 0 {
		switch {
		case req.IsCall():
			c.pendingMu.Lock()
			c.pending[req.ID] = true
			c.pendingMu.Unlock()
		case req.Method == "notifications/cancelled":
			// "Receivers of a cancellation notification SHOULD ... not send a response
			// for the cancelled request": stop waiting for it.
			if id, ok := cancelledID(req.Params); ok {
				c.answered(id)
			}
		}
	}
	// After the bookkeeping above: an intercepted request may be answered at once.
	return !c.intercepted(msg)
}

// cancelledID is the request ID in the params of notifications/cancelled.
func cancelledID(params json.RawMessage) (jsonrpc.ID, bool) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	return id, err == nil && id.IsValid()
}

// wireMessage is a JSON-RPC message as it is on the wire.
type wireMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
}

// decodeMessage decodes one message by the rules of the SDK's jsonrpc.DecodeMessage (version
// "2.0"; a "method" makes a request, even an empty one; a response needs an ID). It exists
// because the SDK's decoder allocates a large buffer for every message, which made garbage
// collection the aggregator's main cost (see BENCHMARKS.md). owned says that line belongs to
// the message: its params or result then point into it instead of being copied (an 8 MiB
// result is not held twice).
func decodeMessage(line []byte, owned bool) (jsonrpc.Message, error) {
	if !json.Valid(line) {
		return decodeSlow(line) // for encoding/json's error message
	}
	var (
		version, id, method, params, result, errObj []byte
		slow                                        bool
	)
	ok := rawjson.Object(line, func(key []byte, start, end int) bool {
		v := line[start:end]
		switch string(key) {
		case "jsonrpc":
			version = v
		case "id":
			id = v
		case "method":
			method = v
		case "params":
			params = v
		case "result":
			result = v
		case "error":
			errObj = v
		default:
			// encoding/json matches keys without regard to case: leave such oddities to it.
			for _, k := range wireKeys {
				if bytes.EqualFold(key, []byte(k)) {
					slow = true
					return false
				}
			}
		}
		return true
	})
	if !ok || slow {
		return decodeSlow(line)
	}
	if string(version) != `"2.0"` {
		return decodeSlow(line)
	}
	msgID, fast := fastID(id)
	if !fast {
		return decodeSlow(line)
	}
	keep := func(v []byte) json.RawMessage {
		if v == nil || owned {
			return v
		}
		return bytes.Clone(v)
	}
	if method != nil && string(method) != "null" {
		name, ok := rawjson.String(method)
		if !ok {
			return decodeSlow(line)
		}
		return &jsonrpc.Request{ID: msgID, Method: string(name), Params: keep(params)}, nil
	}
	if !msgID.IsValid() {
		return nil, errors.New("invalid request: a response without an id")
	}
	resp := &jsonrpc.Response{ID: msgID, Result: keep(result)}
	if errObj != nil && string(errObj) != "null" {
		var e jsonrpc.Error
		if err := json.Unmarshal(errObj, &e); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		resp.Error = &e
	}
	return resp, nil
}

var wireKeys = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// fastID decodes the common IDs, absent, null, small integers and strings without escapes,
// exactly as decodeSlow would; fast is false for the others.
func fastID(v []byte) (id jsonrpc.ID, fast bool) {
	if v == nil || string(v) == "null" {
		return jsonrpc.ID{}, true
	}
	if s, ok := rawjson.String(v); ok {
		id, err := jsonrpc.MakeID(string(s))
		return id, err == nil
	}
	// Integers of up to 15 digits survive decodeSlow's float64 unchanged.
	if len(v) <= 15 {
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			id, err := jsonrpc.MakeID(float64(n))
			return id, err == nil
		}
	}
	return jsonrpc.ID{}, false
}

// decodeSlow decodes a message with encoding/json: messages with unusual IDs, escaped method
// names, keys in other cases, and invalid ones.
func decodeSlow(line []byte) (jsonrpc.Message, error) {
	var w wireMessage
	if err := json.Unmarshal(line, &w); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if w.JSONRPC != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected \"2.0\"", w.JSONRPC)
	}
	var id jsonrpc.ID
	if len(w.ID) > 0 && string(w.ID) != "null" {
		var raw any
		if err := json.Unmarshal(w.ID, &raw); err != nil {
			return nil, err
		}
		var err error
		if id, err = jsonrpc.MakeID(raw); err != nil {
			return nil, err
		}
	}
	if w.Method != nil {
		return &jsonrpc.Request{ID: id, Method: *w.Method, Params: w.Params}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("invalid request: a response without an id")
	}
	resp := &jsonrpc.Response{ID: id, Result: w.Result}
	if w.Error != nil {
		resp.Error = w.Error
	}
	return resp, nil
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

func (c *Conn) bad(line []byte, err error) jsonrpc.Message {
	if c.opts.BadLine != nil {
		return c.opts.BadLine(c, line, err)
	}
	return nil
}

// readLine returns the next line without its newline. A line over the limit is consumed up to
// its end and returned truncated with ErrTooLarge. The returned slice may point into the
// reader's buffer: it is valid until the next call, unless owned says it was allocated for
// this line alone.
func (c *Conn) readLine() (line []byte, owned bool, err error) {
	frag, err := c.r.ReadSlice('\n')
	if err == nil {
		if len(frag)-1 > c.opts.MaxMessageSize {
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
	for {
		frag, err = c.r.ReadSlice('\n')
		if total+len(frag) > c.opts.MaxMessageSize+1 {
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

// Write writes msg as one line. A response whose result is a placeholder from Raw is written
// with the placeholder's bytes as its result.
func (c *Conn) Write(_ context.Context, msg jsonrpc.Message) error {
	resp, isResp := msg.(*jsonrpc.Response)
	if isResp && c.opts.DrainOnEOF > 0 {
		defer c.answered(resp.ID)
	}
	if isResp && c.opts.Answering != nil {
		c.opts.Answering(resp)
	}
	if isResp && resp.Error == nil && bytes.HasPrefix(resp.Result, rawPrefix) {
		c.rawMu.Lock()
		data, found := c.raws[string(resp.Result)]
		delete(c.raws, string(resp.Result))
		c.rawMu.Unlock()
		if found {
			id, err := json.Marshal(resp.ID.Raw())
			if err != nil {
				return err
			}
			return c.respond(resp.ID, []byte(`{"jsonrpc":"2.0","id":`), id, []byte(`,"result":`), data, []byte("}\n"))
		}
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	if isResp {
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
	if errObj != nil {
		return c.respond(id, []byte(`{"jsonrpc":"2.0","id":`), idJSON, []byte(`,"error":`), errObj, []byte("}\n"))
	}
	if len(result) == 0 {
		result = json.RawMessage("null") // the peer sent neither: keep the line valid JSON
	}
	return c.respond(id, []byte(`{"jsonrpc":"2.0","id":`), idJSON, []byte(`,"result":`), result, []byte("}\n"))
}

// WriteRaw writes an already encoded message (one line of JSON, without its newline).
func (c *Conn) WriteRaw(data []byte) error { return c.WriteParts(data, []byte("\n")) }

// Notify writes a notification outside any session, such as the aggregator's own
// "notifications/tools/list_changed".
func (c *Conn) Notify(method string) error {
	return c.WriteRaw([]byte(`{"jsonrpc":"2.0","method":` + strconv.Quote(method) + `}`))
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

var rawPrefix = []byte(`"\u0000raw:`)

// Raw returns a placeholder for data, an encoded JSON value: when a response whose result
// encodes as the placeholder is written by this Conn, data is written in its place, as it is.
// The SDK's encoder would otherwise re-scan and copy every result (twice), and compact its
// whitespace. Call it from the result's MarshalJSON, which the SDK calls just before it writes
// the response, so that no placeholder outlives its response.
func (c *Conn) Raw(data []byte) json.RawMessage {
	key := string(rawPrefix) + strconv.FormatUint(c.rawSeq.Add(1), 10) + `"`
	c.rawMu.Lock()
	c.raws[key] = data
	c.rawMu.Unlock()
	return json.RawMessage(key)
}

// Close closes the reader and the writer. It may be called more than once.
func (c *Conn) Close() error {
	c.closeMu.Do(func() { close(c.closed) })
	c.wmu.Lock() // not in the middle of a write
	defer c.wmu.Unlock()
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
