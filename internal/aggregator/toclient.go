package aggregator

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// What goes to the client: answers, notifications, and the servers' requests (sampling,
// elicitation, roots), which wait in the queue until the client is ready and are then given to
// the client's side; the client's answers go back to the server under its own ID.

// side is the client's side of the session; nil before the session's first request.
func (se *session) side() clientSide {
	if cs := se.hello.Load(); cs != nil {
		return cs.side
	}
	return nil
}

// answerCall answers the client's request c, relayed to a server, with the server's answer:
// the one place a relayed call is answered. The client's side may keep it (a modern client's
// request suspended for its input), and the answer is translated from the server's era to the
// client's (era.Translate: byte for byte when they are the same).
func (se *session) answerCall(c *call, result, errObj json.RawMessage) {
	result, errObj, done := se.side().answered(c, result, errObj)
	if done {
		return
	}
	// Recorded before the client has the answer, so that the lines of a client's requests made
	// one after another come in the order it made them.
	if se.a.debug || se.a.audit != nil {
		se.a.completed(c, result, errObj) // audit.go
	}
	se.writeAnswer(c.fromID, c.method, c.to.side().era(), result, errObj)
}

// answerClient answers the client's request id with an answer of the aggregator's own (of the
// legacy era's shape: era.Translate gives a modern client its envelope).
func (se *session) answerClient(id jsonrpc.ID, result, errObj json.RawMessage) {
	se.writeAnswer(id, "", era.Legacy, result, errObj)
}

// writeAnswer writes an answer of era from to the client's request id (of method), in the
// client's era.
func (se *session) writeAnswer(id jsonrpc.ID, method string, from era.Era, result, errObj json.RawMessage) {
	to := era.Legacy
	if side := se.side(); side != nil {
		to = side.era()
	}
	result, errObj = era.Translate(method, from, to, result, errObj)
	if err := se.client.WriteResponse(id, result, errObj); err != nil {
		se.a.log.Debug("writing an answer to the client", "error", err)
	}
}

// clientAnswer takes the client's answer to a server's request and passes it to that server
// under the server's own ID.
func (se *session) clientAnswer(resp *jsonrpc.Response) {
	id, _ := resp.ID.Raw().(string)
	c := se.a.inflight.answered(nil, id)
	if c == nil {
		se.a.log.Debug("dropped an answer of the client to no request in flight", "id", resp.ID.Raw())
		return
	}
	if c.own() { // an input request of a modern server's (fulfil.go)
		c.done(resp.Result, stdio.ErrorJSON(resp.Error))
		return
	}
	c.from.conn.SendHeld(nil, stdio.Response(stdio.IDJSON(c.fromID), resp.Result, stdio.ErrorJSON(resp.Error))...)
}

// toClient writes a notification to the client, or queues it until the client is ready.
func (se *session) toClient(msg [][]byte) {
	if held, _ := se.queue.hold(msg, nil); held {
		return
	}
	se.writeClient(msg)
}

// writeClient writes a message to the client.
func (se *session) writeClient(msg [][]byte) {
	if err := se.client.WriteParts(msg...); err != nil {
		se.a.log.Debug("writing to the client", "error", err)
	}
}

// clientLog sends a log message of the aggregator's own to the client, where its era allows.
func (se *session) clientLog(level, text string) {
	if side := se.side(); side != nil {
		side.log(level, text)
		return
	}
	se.toClient(logNotification(level, text)) // before the session: queued for a legacy one
}

// listChanged tells the client that the list of method changed, once the changes of the next
// few milliseconds are in (the debouncer), and once it is ready.
func (se *session) listChanged(method string) { se.notify.trigger(method) }

// toClientRequest takes a server's request for the client (sampling, elicitation, roots).
// Before the client is ready it waits in the queue, in the table already (so that its server
// can cancel it or go down meanwhile); then the client's side takes it.
func (se *session) toClientRequest(s *server, m *jsonrpc.Request) {
	if !se.queue.isReady() {
		c := &call{from: s, fromID: m.ID, method: m.Method, doing: m.Method, stage: inQueue}
		newToken, res := se.a.inflight.add(c, tokenOf(m.Params))
		if res != addOK {
			se.a.notTaken(s, m.ID) // its server went down (for the session) meanwhile
			return
		}
		params := withToken(m.Params, newToken)
		if held, refused := se.queue.hold([][]byte{params}, c); held {
			if refused && se.a.inflight.take(c) {
				s.conn.Send(nil, stdio.Response(stdio.IDJSON(m.ID), nil, rpcError(jsonrpc.CodeInternalError, nil,
					"Internal error: %s is not connected yet, and too much is waiting for it; the request came through mcp-simple-aggregator", "the client"))...)
			}
			return
		}
		se.a.inflight.take(c) // ready meanwhile: the client's side takes it as it came
	}
	se.side().serverRequest(s, m)
}

// withToken puts the progress token newToken into params' _meta; params unchanged when nil.
func withToken(params, newToken []byte) []byte {
	if newToken == nil {
		return params
	}
	ms, me, _ := rawjson.Member(params, "_meta")
	ts, te, _ := rawjson.Member(params[ms:me], "progressToken")
	return rawjson.Replace(params, ms+ts, ms+te, newToken)
}
