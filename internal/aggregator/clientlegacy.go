package aggregator

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// A client of the legacy era (it sent initialize): its session is the SDK's handshake (sdk.go)
// and then raw JSON-RPC; the servers' requests reach it as requests, their notifications as
// notifications, and nothing it is sent carries the modern envelope.

// legacyClient is the clientSide of a legacy session.
type legacyClient struct{ se *session }

func (legacyClient) era() era.Era { return era.Legacy }

// request routes the client's request (clientRequests), or hands it to the SDK's session
// (ping, unknown methods).
func (l legacyClient) request(m *jsonrpc.Request) {
	if h := clientRequests[m.Method]; h != nil {
		h(l.se, m)
		return
	}
	l.se.sdk.deliver(m)
}

func (l legacyClient) notification(m *jsonrpc.Request) bool {
	h := clientNotifications[m.Method]
	return h != nil && h(l.se, m)
}

// serverRequest sends a server's request to the client under an ID of ours, or answers the
// server with an error when the client cannot take it.
func (l legacyClient) serverRequest(s *server, m *jsonrpc.Request) {
	se := l.se
	if errObj := se.clientRefuses(m.Method, m.Params); errObj != nil {
		s.conn.Send(nil, stdio.Response(stdio.IDJSON(m.ID), nil, errObj)...)
		return
	}
	c := &call{from: s, fromID: m.ID, method: m.Method, doing: m.Method}
	newToken, res := se.a.inflight.add(c, tokenOf(m.Params))
	if res != addOK {
		se.a.notTaken(s, m.ID) // its server went down (for the session) meanwhile
		return
	}
	se.writeClient(stdio.Request(c.toID, c.method, withToken(m.Params, newToken)))
}

// ready writes what waited for the client, in order, once it says it is initialized: a
// server's request is checked against the client's capabilities now that they are known.
func (l legacyClient) ready() {
	se := l.se
	dropped := se.queue.flush(func(it queued) {
		if it.call == nil {
			se.writeClient([][]byte{it.msg})
			return
		}
		c := it.call
		if errObj := se.clientRefuses(c.method, it.msg); errObj != nil {
			if se.a.inflight.take(c) {
				c.from.conn.Send(nil, stdio.Response(stdio.IDJSON(c.fromID), nil, errObj)...)
			}
			return
		}
		if se.a.inflight.deliver(c) {
			se.writeClient(stdio.Request(c.toID, c.method, it.msg))
		}
	})
	if dropped > 0 {
		se.a.log.Warn(droppedWarning(dropped))
	}
}

func (l legacyClient) listChanged(method string) { l.se.writeClient(stdio.Notification(method, nil)) }

func (l legacyClient) resourceUpdated(params json.RawMessage) {
	l.se.toClient(stdio.Notification("notifications/resources/updated", params))
}

func (legacyClient) serverLog(*server, json.RawMessage) bool { return true }

func (l legacyClient) log(level, text string) { l.se.toClient(logNotification(level, text)) }

func (legacyClient) relay(*call) {}

func (legacyClient) progress(*call) bool { return true }

func (legacyClient) taskStatus() bool { return true }

func (legacyClient) answered(_ *call, result, errObj json.RawMessage) (json.RawMessage, json.RawMessage, bool) {
	return result, errObj, false
}

func (legacyClient) end() {}

// clientRefuses returns the error for a server's request the client cannot take (it did not
// declare the capability); nil when it can.
func (se *session) clientRefuses(method string, params json.RawMessage) json.RawMessage {
	cs := se.hello.Load()
	capability := era.ServerRequests[method]
	declared, ok := cs.caps[capability]
	if !ok {
		return methodNotFound("%s does not support %s (it did not declare the %q capability); the request came through mcp-simple-aggregator", cs.label(), method, capability)
	}
	if method == "elicitation/create" && era.URLMode(params) && !rawjson.Has(declared, "url") {
		// The servers were told the client does URL elicitation too; this one does only forms.
		return invalidParams("%s does not support URL elicitation (its \"elicitation\" capability has no \"url\"); the request came through mcp-simple-aggregator", cs.label())
	}
	return nil
}

// clientReady flushes what waited for the client once it says it is initialized, and warns
// when it is a client known to reject some of the tool names. The SDK's session sees the
// notification too.
func (se *session) clientReady(*jsonrpc.Request) bool {
	if se.queue.isReady() {
		return false
	}
	se.side().ready()
	cs := se.hello.Load()
	if client := strictClient(cs.name); client != "" {
		if bad := se.a.catalog.Load().rejectedNames(); len(bad) > 0 {
			se.a.log.Warn(fmt.Sprintf("the client is %s (%q), which rejects %d of the tool names (%s); restart with --separator __ to avoid it",
				client, cs.name, len(bad), quoteList(bad[:min(3, len(bad))])))
		}
	}
	return false
}
