package aggregator

import (
	"encoding/json"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// What goes to the client: answers, notifications, and the servers' requests (sampling,
// elicitation, roots), which are checked against what the client declared, recorded in the
// in-flight table, and wait in the queue until the client is ready; the client's answers go
// back to the server under its own ID.

// writeQueued writes one message that waited for the client; a server's request is checked
// against the client's capabilities now that they are known.
func (a *Aggregator) writeQueued(it queued) {
	if it.call == nil {
		a.writeClient([][]byte{it.msg})
		return
	}
	c := it.call
	if errObj := a.clientRefuses(c.method, it.msg); errObj != nil {
		if a.inflight.take(c) {
			c.from.conn.Send(nil, stdio.Response(encodeID(c.fromID), nil, errObj)...)
		}
		return
	}
	if a.inflight.deliver(c) {
		a.writeClient(request(c.toID, c.method, it.msg))
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
	if c.own() { // an input request of a modern server's (childera.go)
		c.done(resp.Result, encodeError(resp.Error))
		return
	}
	c.from.conn.SendHeld(nil, stdio.Response(encodeID(c.fromID), resp.Result, encodeError(resp.Error))...)
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

// clientLog sends a log message of the aggregator's own to the client. Not to a modern one:
// "The server MUST NOT emit notifications/message for a request that does not include"
// io.modelcontextprotocol/logLevel (server/utilities/logging.mdx), and these belong to none.
func (a *Aggregator) clientLog(level, text string) {
	if a.modernClient() {
		return
	}
	a.toClient(logNotification(level, text))
}

// answerClient answers the client's request id; a modern client's answer in its envelope.
func (a *Aggregator) answerClient(id jsonrpc.ID, result, errObj json.RawMessage) {
	if a.modernClient() {
		result, errObj = modernAnswer(result, errObj)
	}
	if err := a.client.WriteResponse(id, result, errObj); err != nil {
		a.log.Debug("writing an answer to the client", "error", err)
	}
}

// toClientRequest sends a server's request to the client under an ID of ours, or answers the
// server with an error when the client cannot take it. Before the client is ready it waits in
// the queue, in the table already (so that its server can cancel it or go down).
func (a *Aggregator) toClientRequest(s *server, m *jsonrpc.Request) {
	if a.modernClient() {
		a.inputRequest(s, m)
		return
	}
	c := &call{from: s, fromID: m.ID, to: nil, method: m.Method, doing: m.Method}
	params := m.Params
	token := tokenOf(params)
	if !a.queue.isReady() {
		newToken, res := a.inflight.add(c, token)
		if res != addOK {
			return // its server went down meanwhile: nobody waits for the answer
		}
		params = withToken(params, newToken)
		if held, refused := a.queue.hold([][]byte{params}, c); held {
			if refused && a.inflight.take(c) {
				s.conn.Send(nil, stdio.Response(encodeID(m.ID), nil, rpcError(jsonrpc.CodeInternalError, nil,
					"Internal error: %s is not connected yet, and too much is waiting for it; the request came through mcp-simple-aggregator", "the client"))...)
			}
			return
		}
		a.writeQueued(queued{msg: params, call: c}) // ready meanwhile
		return
	}
	if errObj := a.clientRefuses(m.Method, params); errObj != nil {
		s.conn.Send(nil, stdio.Response(encodeID(m.ID), nil, errObj)...)
		return
	}
	c.delivered = true
	newToken, res := a.inflight.add(c, token)
	if res != addOK {
		return // its server went down meanwhile: nobody waits for the answer
	}
	a.writeClient(request(c.toID, c.method, withToken(params, newToken)))
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

// clientRefuses returns the error for a server's request the client cannot take (it did not
// declare the capability); nil when it can.
func (a *Aggregator) clientRefuses(method string, params json.RawMessage) json.RawMessage {
	cs := a.session.Load()
	capability := serverRequests[method]
	declared, ok := cs.caps[capability]
	if !ok {
		return methodNotFound("%s does not support %s (it did not declare the %q capability); the request came through mcp-simple-aggregator", cs.label(), method, capability)
	}
	if method == "elicitation/create" && urlMode(params) && !rawjson.Has(declared, "url") {
		// The servers were told the client does URL elicitation too; this one does only forms.
		return invalidParams("%s does not support URL elicitation (its \"elicitation\" capability has no \"url\"); the request came through mcp-simple-aggregator", cs.label())
	}
	return nil
}

// urlMode reports whether the params of elicitation/create ask for URL mode.
func urlMode(params json.RawMessage) bool {
	mode, ok := rawjson.StringMember(params, "mode")
	return ok && mode == "url"
}
