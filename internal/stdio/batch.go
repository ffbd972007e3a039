package stdio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// JSON-RPC batches (protocol 2025-03-26 and before: "implementations MUST support receiving
// JSON-RPC batches"): the messages of a batch are read one by one like any others, and the
// answers to its requests are collected and written as one array, in the order of the
// requests, once the last is in. A batch with no requests gets no answer; a cancelled request
// gets none either, and its batch is complete without it.

// batch collects the answers to the requests of one batch.
type batch struct {
	answers [][]byte // in the order of the batch's requests; nil while waiting, or when none
	waiting int
}

// batchSlot is where the answer to one request of a batch goes.
type batchSlot struct {
	b *batch
	i int
}

// readBatch takes a batch (a valid JSON array) apart: its messages are queued for Read, its
// requests are recorded, and the elements that are not messages are answered with errors in
// the batch's answer.
func (c *Conn) readBatch(line []byte) {
	var elems []json.RawMessage
	if err := json.Unmarshal(line, &elems); err != nil || len(elems) == 0 {
		c.writeBatchLine([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: an empty batch"}}`))
		return
	}
	b := &batch{}
	msgs := make([]jsonrpc.Message, 0, len(elems))
	c.batchMu.Lock()
	if c.batchOf == nil {
		c.batchOf = map[jsonrpc.ID]batchSlot{}
	}
	for _, e := range elems {
		msg, err := decodeMessage(e, true)
		if err != nil {
			b.answers = append(b.answers, errorLine(RequestID(e), jsonrpc.CodeInvalidRequest, "Invalid Request: "+err.Error()))
			continue
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			if _, dup := c.batchOf[req.ID]; dup {
				id, _ := json.Marshal(req.ID.Raw())
				b.answers = append(b.answers, errorLine(id, jsonrpc.CodeInvalidRequest, fmt.Sprintf("Invalid Request: the request ID %s is already in use by a request in a batch", id)))
				continue
			}
			c.batchOf[req.ID] = batchSlot{b, len(b.answers)}
			b.answers = append(b.answers, nil)
			b.waiting++
		}
		msgs = append(msgs, msg)
	}
	c.inBatches.Store(int64(len(c.batchOf)))
	done := b.waiting == 0
	c.batchMu.Unlock()
	if done {
		c.writeBatch(b)
	}
	c.batchQueue = msgs
}

// batchAnswer puts the answer to request id (one encoded response, without newline; nil for
// none) into its batch, and writes the batch when it is complete. It reports false when id is
// not a request of a batch.
func (c *Conn) batchAnswer(id jsonrpc.ID, resp []byte) bool {
	if c.inBatches.Load() == 0 {
		return false
	}
	c.batchMu.Lock()
	slot, ok := c.batchOf[id]
	if !ok {
		c.batchMu.Unlock()
		return false
	}
	delete(c.batchOf, id)
	c.inBatches.Store(int64(len(c.batchOf)))
	slot.b.answers[slot.i] = resp
	slot.b.waiting--
	done := slot.b.waiting == 0
	c.batchMu.Unlock()
	if done {
		c.writeBatch(slot.b)
	}
	return true
}

// writeBatch writes the answers of a complete batch as one array; nothing when it has none.
func (c *Conn) writeBatch(b *batch) {
	parts := make([][]byte, 0, 2*len(b.answers)+1)
	for _, a := range b.answers {
		if a == nil {
			continue
		}
		sep := []byte(",")
		if len(parts) == 0 {
			sep = []byte("[")
		}
		parts = append(parts, sep, a)
	}
	if len(parts) == 0 {
		return
	}
	parts = append(parts, []byte("]\n"))
	// In one part: written in one write, however large its answers (writeParts writes a large
	// part on its own), so that a reader of the output sees the array whole (a shared
	// process's receipts name each request it answers).
	_ = c.WriteParts(slices.Concat(parts...))
}

func (c *Conn) writeBatchLine(line []byte) { _ = c.WriteParts(line, []byte("\n")) }

// respond writes a response to request id (parts make one line, newline included), or puts it
// into the batch the request came in.
func (c *Conn) respond(id jsonrpc.ID, parts ...[]byte) error {
	if c.inBatches.Load() > 0 {
		resp := bytes.TrimSuffix(slices.Concat(parts...), []byte("\n"))
		if c.batchAnswer(id, resp) {
			return nil
		}
	}
	return c.writeNow(parts...)
}

// errorLine encodes an error response.
func errorLine(id json.RawMessage, code int64, msg string) []byte {
	errObj, _ := json.Marshal(jsonrpc.Error{Code: code, Message: msg})
	return bytes.TrimSuffix(bytes.Join(Response(id, nil, errObj), nil), []byte("\n"))
}

// RequestID is the "id" of a message that could not be decoded, as JSON, when it is one a
// response can carry (a string or a number); otherwise null.
func RequestID(line []byte) json.RawMessage {
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(line, &probe) == nil && len(probe.ID) > 0 && (probe.ID[0] == '"' || probe.ID[0] == '-' || probe.ID[0] >= '0' && probe.ID[0] <= '9') {
		return probe.ID
	}
	return json.RawMessage("null")
}
