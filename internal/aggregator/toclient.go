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
func (a *Aggregator) side() clientSide {
	if cs := a.session.Load(); cs != nil {
		return cs.side
	}
	return nil
}

// answerCall answers the client's request c, relayed to a server, with the server's answer:
// the one place a relayed call is answered. The client's side may keep it (a modern client's
// request suspended for its input), and the answer is translated from the server's era to the
// client's (era.Translate: byte for byte when they are the same).
func (a *Aggregator) answerCall(c *call, result, errObj json.RawMessage) {
	result, errObj, done := a.side().answered(c, result, errObj)
	if done {
		return
	}
	// Recorded before the client has the answer, so that the lines of a client's requests made
	// one after another come in the order it made them.
	if a.debug || a.audit != nil {
		a.completed(c, result, errObj) // audit.go
	}
	a.writeAnswer(c.fromID, c.method, c.to.side().era(), result, errObj)
}

// answerClient answers the client's request id with an answer of the aggregator's own (of the
// legacy era's shape: era.Translate gives a modern client its envelope).
func (a *Aggregator) answerClient(id jsonrpc.ID, result, errObj json.RawMessage) {
	a.writeAnswer(id, "", era.Legacy, result, errObj)
}

// writeAnswer writes an answer of era from to the client's request id (of method), in the
// client's era.
func (a *Aggregator) writeAnswer(id jsonrpc.ID, method string, from era.Era, result, errObj json.RawMessage) {
	to := era.Legacy
	if side := a.side(); side != nil {
		to = side.era()
	}
	result, errObj = era.Translate(method, from, to, result, errObj)
	if err := a.client.WriteResponse(id, result, errObj); err != nil {
		a.log.Debug("writing an answer to the client", "error", err)
	}
}

// clientAnswer takes the client's answer to a server's request and passes it to that server
// under the server's own ID.
func (a *Aggregator) clientAnswer(resp *jsonrpc.Response) {
	id, _ := resp.ID.Raw().(string)
	c := a.inflight.answered(nil, id)
	if c == nil {
		a.log.Debug("dropped an answer of the client to no request in flight", "id", resp.ID.Raw())
		return
	}
	if c.own() { // an input request of a modern server's (fulfil.go)
		c.done(resp.Result, stdio.ErrorJSON(resp.Error))
		return
	}
	c.from.conn.SendHeld(nil, stdio.Response(stdio.IDJSON(c.fromID), resp.Result, stdio.ErrorJSON(resp.Error))...)
}

// toClient writes a notification to the client, or queues it until the client is ready.
func (a *Aggregator) toClient(msg [][]byte) {
	if held, _ := a.queue.hold(msg, nil); held {
		return
	}
	a.writeClient(msg)
}

// writeClient writes a message to the client.
func (a *Aggregator) writeClient(msg [][]byte) {
	if err := a.client.WriteParts(msg...); err != nil {
		a.log.Debug("writing to the client", "error", err)
	}
}

// clientLog sends a log message of the aggregator's own to the client, where its era allows.
func (a *Aggregator) clientLog(level, text string) {
	if side := a.side(); side != nil {
		side.log(level, text)
		return
	}
	a.toClient(logNotification(level, text)) // before the session: queued for a legacy one
}

// toClientRequest takes a server's request for the client (sampling, elicitation, roots).
// Before the client is ready it waits in the queue, in the table already (so that its server
// can cancel it or go down meanwhile); then the client's side takes it.
func (a *Aggregator) toClientRequest(s *server, m *jsonrpc.Request) {
	if !a.queue.isReady() {
		c := &call{from: s, fromID: m.ID, method: m.Method, doing: m.Method, stage: inQueue}
		newToken, res := a.inflight.add(c, tokenOf(m.Params))
		if res != addOK {
			return // its server went down meanwhile: nobody waits for the answer
		}
		params := withToken(m.Params, newToken)
		if held, refused := a.queue.hold([][]byte{params}, c); held {
			if refused && a.inflight.take(c) {
				s.conn.Send(nil, stdio.Response(stdio.IDJSON(m.ID), nil, rpcError(jsonrpc.CodeInternalError, nil,
					"Internal error: %s is not connected yet, and too much is waiting for it; the request came through mcp-simple-aggregator", "the client"))...)
			}
			return
		}
		a.inflight.take(c) // ready meanwhile: the client's side takes it as it came
	}
	a.side().serverRequest(s, m)
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
