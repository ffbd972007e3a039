package aggregator

import (
	"bytes"
	"context"
	"encoding/json"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// A client of the modern era (2026-07-28): no initialize; every request carries its protocol
// version, the client's capabilities and clientInfo in _meta, and is served on its own. The
// session is modern from its first request that is server/discover or carries a modern
// protocol version in _meta; the servers are started with what that request says of the
// client (startModern), as a legacy client's initialize would. Then, here:
//
//	server/discover        the aggregator's versions, capabilities, instructions
//	subscriptions/listen   list changes and resource updates, tagged with the listen's ID
//	                       (streams.go)
//	removed methods        ping, logging/setLevel, resources/(un)subscribe, tasks/*: Method
//	                       not found (era.RemovedMethods)
//	a retry of ours        the answers for a legacy server's requests (suspend.go)
//	everything else        routed as for a legacy client (clientRequests); the answer gets
//	                       the modern result envelope (era.Translate)
//
// A legacy server's requests reach it as InputRequiredResults (suspend.go); its log messages
// only for the requests that asked for them; the aggregator's own log lines never.

// modernClient is the clientSide of a modern session.
type modernClient struct {
	se *session
	// last is the last _meta found good, and what it says: a client sends the same envelope
	// with each request, which is then read once. Its envelope is shared: read only.
	last atomic.Pointer[parsedEnvelope]
}

type parsedEnvelope struct {
	raw []byte
	env era.Envelope
}

func (*modernClient) era() era.Era { return era.Modern }

// envelope reads and checks the _meta of a modern request (the last one found good is not read
// again).
func (m *modernClient) envelope(params json.RawMessage) (era.Envelope, json.RawMessage) {
	ms, me, ok := rawjson.Member(params, "_meta")
	if last := m.last.Load(); ok && last != nil && bytes.Equal(last.raw, params[ms:me]) {
		return last.env, nil
	}
	var raw json.RawMessage
	if ok {
		raw = params[ms:me]
	}
	env, errObj := era.ReadEnvelope(raw)
	if errObj == nil && ok {
		env.Info = bytes.Clone(env.Info)
		m.last.Store(&parsedEnvelope{raw: bytes.Clone(raw), env: env})
	}
	return env, errObj
}

// request takes a request of the session.
func (m *modernClient) request(req *jsonrpc.Request) {
	se := m.se
	if req.Method == "initialize" {
		// A dual-era client probes, and falls back to initialize when it finds no version it
		// speaks (basic/transports/stdio.mdx): a legacy session takes the place of this one.
		se.initialize(req)
		return
	}
	env, errObj := m.envelope(req.Params)
	if errObj != nil {
		se.answerClient(req.ID, nil, errObj)
		return
	}
	switch {
	case se.ownRetry(req):
		se.resume(req) // suspend.go
	case req.Method == "server/discover":
		se.answerClient(req.ID, se.discover, nil)
	case req.Method == "subscriptions/listen":
		se.listen(req) // streams.go
	case era.TaskMethods[req.Method]:
		if !se.offersTasksExtension() {
			se.answerClient(req.ID, nil, methodNotFound("no server offers the tasks extension (%s)", era.TasksExtension))
			return
		}
		se.routeTask(req)
	case era.RemovedMethods[req.Method] != "":
		se.answerClient(req.ID, nil, methodNotFound("%s", era.RemovedMethods[req.Method]))
	case era.InputMethods[req.Method] && se.carryParked(req, env):
		// answered with the input a legacy server asked for outside any request (suspend.go)
	case clientRequests[req.Method] != nil:
		clientRequests[req.Method](se, req)
	default:
		se.answerClient(req.ID, nil, methodNotFound("%s is not a method of protocol version %s", req.Method, env.Version))
	}
}

// notification takes a notification of a modern client: a cancellation (of a request, or of
// a subscriptions/listen stream); the others have nothing to act on (notifications/initialized
// and roots/list_changed are not of this era, progress is only for requests of ours, which a
// modern client never gets).
func (m *modernClient) notification(n *jsonrpc.Request) bool {
	if n.Method == "notifications/cancelled" {
		m.se.clientCancelled(n)
	}
	return true
}

// serverRequest takes a legacy server's request for input (suspend.go).
func (m *modernClient) serverRequest(s *server, req *jsonrpc.Request) { m.se.inputRequest(s, req) }

// ready deals with what waited for the client: notifications are dropped (a modern client gets
// log messages only for its requests, and lists fresh), and a server's request, which has no
// request of the client's to ride on, waits for the next one (parked, suspend.go).
func (m *modernClient) ready() {
	m.se.queue.flush(func(it queued) {
		if it.call != nil {
			m.se.park(it.call, it.msg)
		}
	})
}

func (m *modernClient) listChanged(method string) { m.se.streamListChanged(method) }

func (m *modernClient) resourceUpdated(params json.RawMessage) { m.se.streamResourceUpdated(params) }

// serverLog: "notifications/message is request-scoped" (logging.mdx): a message reaches the
// client while a request of its with a logLevel at or below the message's is in flight to
// the server.
func (m *modernClient) serverLog(s *server, params json.RawMessage) bool {
	return m.se.a.inflight.wantsLog(s, params)
}

// log: "The server MUST NOT emit notifications/message for a request that does not include"
// io.modelcontextprotocol/logLevel (server/utilities/logging.mdx), and the aggregator's own
// lines belong to no request.
func (*modernClient) log(string, string) {}

// relay notes that the request carries the envelope (a modern server takes it as it is, a
// legacy one without it), and the log level it asks for.
func (*modernClient) relay(c *call) {
	c.enveloped = true
	c.logLevel = era.LogRank(era.LogLevelOf(c.req.Params))
}

// progress: the progress of a request answered with input_required has no request to go to
// ("the initial request terminated").
func (m *modernClient) progress(c *call) bool { return !m.se.a.inflight.suspendedCall(c) }

// taskStatus: the legacy era's tasks are not offered to a modern client.
func (*modernClient) taskStatus() bool { return false }

// answered takes a relayed call's answer: the task a modern server's tools/call created is
// noted (its tasks/get goes to it), an answer that comes while the request is suspended is kept
// for the client's retry, and a legacy server's URLElicitationRequiredError becomes an
// InputRequiredResult (suspend.go).
func (m *modernClient) answered(c *call, result, errObj json.RawMessage) (json.RawMessage, json.RawMessage, bool) {
	se := m.se
	if errObj == nil && c.method == "tools/call" && se.offersTasksExtension() {
		se.a.inflight.setTask(era.TaskID(result), c.to, true) // CreateTaskResult is flat
	}
	if c.to.side().era() == era.Modern {
		return result, errObj, false // it asks no input of its own: nothing is held
	}
	id, kept := se.a.inflight.outcome(c, result, errObj)
	if kept {
		return nil, nil, true
	}
	c.fromID = id
	if errObj != nil && c.req != nil && era.InputMethods[c.method] && se.urlRequired(id, c, errObj) {
		return nil, nil, true
	}
	return result, errObj, false
}

// end answers the legacy servers' requests that wait for a request of the client's to ride on.
func (m *modernClient) end() { m.se.unpark("the client's session ended") }

// startModern starts the session of a modern client from its first request: the servers are
// initialized with what the request's _meta says of the client (as initialize would), and what
// discover answers is made. On failure (no server could start) the request is answered with
// the error and the session ends.
func (se *session) startModern(req *jsonrpc.Request) bool {
	side := &modernClient{se: se}
	env, errObj := side.envelope(req.Params)
	if errObj != nil {
		se.answerClient(req.ID, nil, errObj)
		return false
	}
	var info struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	_ = json.Unmarshal(env.Info, &info)
	cs := &clientSession{side: side, version: env.Version, caps: env.Caps, info: env.Info, name: info.Name, clientVersion: info.Version}
	se.a.log.Debug("client's first request", "method", req.Method, "client", cs.name, "version", cs.clientVersion, "protocol", cs.version)
	instructions, err := se.a.startup(context.Background(), se, cs)
	if err != nil {
		se.a.startErr = err
		se.answerClient(req.ID, nil, rpcError(jsonrpc.CodeInternalError, nil, "Internal error: %v", err))
		return false
	}
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(se.a.caps, &caps)
	delete(caps, "tasks") // the legacy tasks; the tasks extension is offered in extensions
	se.discover = era.DiscoverResult(caps, instructions, se.a.selfInfo())
	// Nothing waits for an initialized notification.
	side.ready()
	return true
}

// outsideRequest is the error for a server's request to a modern client that cannot ride on a
// request of the client's.
func outsideRequest(method, why string) json.RawMessage {
	return rpcError(-32603, nil,
		"Internal error: %s cannot reach the client: it speaks protocol version %s, where a server asks for input only in its answer to a request (tools/call, prompts/get, resources/read), and %s; the request came through mcp-simple-aggregator",
		method, era.Latest(era.Modern), why)
}

// offersTasksExtension reports whether the aggregator offers the tasks extension (some server
// does).
func (se *session) offersTasksExtension() bool {
	es, ee, ok := rawjson.Member(se.a.caps, "extensions")
	return ok && rawjson.Has(se.a.caps[es:ee], era.TasksExtension)
}
