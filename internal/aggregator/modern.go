package aggregator

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// A client of the modern era (2026-07-28): no initialize; every request carries its protocol
// version, the client's capabilities and clientInfo in _meta, and is served on its own. The
// session is modern from its first request that is server/discover or carries a modern
// protocol version in _meta; the servers are started with what that request says of the
// client (startModern), as a legacy client's initialize would. Then, here:
//
//	server/discover        the aggregator's versions, capabilities, instructions (discover)
//	subscriptions/listen   list changes and resource updates, tagged with the listen's ID
//	                       (listen.go)
//	removed methods        ping, logging/setLevel, resources/(un)subscribe, tasks/*: Method
//	                       not found
//	everything else        routed as for a legacy client (clientRequests); the answer gets
//	                       the modern result envelope (modernAnswer)
//
// "Every request ... MUST include the protocol version, client capabilities, and ... client
// info in _meta" and "A request missing any required field is malformed; the server MUST
// reject it with JSON-RPC error code -32602 (Invalid params)." (basic/index.mdx)

// codeUnsupportedVersion is UnsupportedProtocolVersionError (basic/versioning.mdx).
const codeUnsupportedVersion = -32022

// removedMethods are the requests of the legacy era that the modern one has no more
// (changelog M2, M4, M5, M6): a modern request for one is answered Method not found, which is
// what the specification's MethodNotFoundError is for. Tasks are an extension the aggregator
// does not offer a modern client (neither SDK implements it yet).
var removedMethods = map[string]string{
	"ping":                  "ping was removed in 2026-07-28 (any request proves the server is alive)",
	"logging/setLevel":      "logging/setLevel was removed in 2026-07-28: put the level in the request's _meta \"" + metaLogLevel + "\"",
	"resources/subscribe":   "resources/subscribe was removed in 2026-07-28: use subscriptions/listen with resourceSubscriptions",
	"resources/unsubscribe": "resources/unsubscribe was removed in 2026-07-28: cancel the subscriptions/listen request",
	"tasks/result":          "tasks/result is not part of the tasks extension of 2026-07-28 (tasks/get returns the result)",
	"tasks/list":            "tasks/list is not part of the tasks extension of 2026-07-28",
}

// tasksExtension is the identifier of the tasks extension (seps/2663-tasks-extension.md): a
// modern server that offers it may answer tools/call with a task ("resultType": "task"), whose
// tasks/get, tasks/update and tasks/cancel go to that server. Legacy tasks (2025-11-25) are
// not offered to a modern client: they differ in every message.
const tasksExtension = "io.modelcontextprotocol/tasks"

// taskMethods are the requests of the tasks extension, routed by taskId.
var taskMethods = map[string]bool{"tasks/get": true, "tasks/update": true, "tasks/cancel": true}

// opensModern reports whether a request before any session starts a modern one: server/discover,
// or a request whose _meta carries a protocol version (checked further by parseEnvelope).
func opensModern(m *jsonrpc.Request) bool {
	if m.Method == "server/discover" {
		return true
	}
	ms, me, ok := rawjson.Member(m.Params, "_meta")
	return ok && rawjson.Has(m.Params[ms:me], metaProtocolVersion)
}

// modernRequest takes a request of a modern client (or one that opens a modern session).
func (a *Aggregator) modernRequest(m *jsonrpc.Request) {
	if !m.IsCall() {
		a.modernNotification(m)
		return
	}
	env, errObj := parseEnvelope(m.Params)
	if errObj != nil {
		a.answerClient(m.ID, nil, errObj)
		return
	}
	if a.session.Load() == nil && !a.startModern(m, env) {
		return
	}
	switch {
	case a.ownRetry(m):
		a.resume(m) // mrtr.go
	case m.Method == "server/discover":
		a.answerClient(m.ID, a.discover, nil)
	case m.Method == "subscriptions/listen":
		a.listen(m)
	case taskMethods[m.Method]:
		if !a.offersTasksExtension() {
			a.answerClient(m.ID, nil, methodNotFound("no server offers the tasks extension (%s)", tasksExtension))
			return
		}
		a.routeTask(m)
	case removedMethods[m.Method] != "":
		a.answerClient(m.ID, nil, methodNotFound("%s", removedMethods[m.Method]))
	case clientRequests[m.Method] != nil:
		clientRequests[m.Method](a, m)
	default:
		a.answerClient(m.ID, nil, methodNotFound("%s is not a method of protocol version %s", m.Method, env.version))
	}
}

// modernNotification takes a notification of a modern client: a cancellation (of a request, or
// of a subscriptions/listen stream); the others have nothing to act on (notifications/initialized
// and roots/list_changed are not of this era, progress is only for requests of ours, which a
// modern client never gets).
func (a *Aggregator) modernNotification(m *jsonrpc.Request) {
	if m.Method != "notifications/cancelled" || a.session.Load() == nil {
		return
	}
	if !a.clientCancelled(m) {
		a.unlisten(m)
	}
}

// startModern starts the session of a modern client from its first request: the servers are
// initialized with what the request's _meta says of the client (as initialize would), and what
// discover answers is made. On failure (no server could start) the request is answered with
// the error and the session ends.
func (a *Aggregator) startModern(m *jsonrpc.Request, env envelope) bool {
	var info struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	_ = json.Unmarshal(env.info, &info)
	cs := &clientSession{era: modern, version: env.version, caps: env.caps, info: env.info, name: info.Name, clientVersion: info.Version}
	a.log.Debug("client's first request", "method", m.Method, "client", cs.name, "version", cs.clientVersion, "protocol", cs.version)
	instructions, err := a.startup(context.Background(), cs)
	if err != nil {
		a.startErr = err
		a.answerClient(m.ID, nil, rpcError(jsonrpc.CodeInternalError, nil, "Internal error: %v", err))
		return false
	}
	a.discover = a.discoverResult(instructions)
	// Nothing waits for an initialized notification: what the servers said before is
	// of no request of this client's (a modern client gets log messages only for its requests,
	// and lists fresh), and their requests have no request to ride on.
	a.queue.flush(a.refuseQueued)
	return true
}

// refuseQueued deals with what waited for a modern client: notifications are dropped, and a
// server's request is answered with the error that there is no client request to carry it.
func (a *Aggregator) refuseQueued(it queued) {
	if it.call != nil && a.inflight.take(it.call) {
		it.call.from.conn.Send(nil, stdio.Response(encodeID(it.call.fromID), nil, outsideRequest(it.call.method))...)
	}
}

// outsideRequest is the error for a server's request to a modern client made outside any
// request of the client's.
func outsideRequest(method string) json.RawMessage {
	return rpcError(jsonrpc.CodeInternalError, nil,
		"Internal error: %s cannot reach the client: it speaks protocol version %s, where a server asks for input only in its answer to a request (tools/call, prompts/get, resources/read), and no such request of the client's was in flight; the request came through mcp-simple-aggregator",
		method, modernVersions[0])
}

// discoverResult is the aggregator's answer to server/discover (server/discover.mdx): every
// version it serves (modern first), what it offers, its instructions, and its serverInfo in
// _meta. Capabilities can change only with the aggregator's own process, but instructions with
// a reload: the result is private and stale at once.
func (a *Aggregator) discoverResult(instructions string) json.RawMessage {
	var caps map[string]json.RawMessage
	_ = json.Unmarshal(a.caps, &caps)
	delete(caps, "tasks") // the legacy tasks; the tasks extension is not offered
	return marshal(struct {
		ResultType        string                     `json:"resultType"`
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      map[string]json.RawMessage `json:"capabilities"`
		Instructions      string                     `json:"instructions,omitempty"`
		TTL               int64                      `json:"ttlMs"`
		CacheScope        string                     `json:"cacheScope"`
		Meta              map[string]json.RawMessage `json:"_meta"`
	}{"complete", slices.Concat(modernVersions, protocolVersions), caps, instructions, 0, "private",
		map[string]json.RawMessage{metaServerInfo: a.selfInfo()}})
}

// offersTasksExtension reports whether the aggregator offers the tasks extension (some server
// does).
func (a *Aggregator) offersTasksExtension() bool {
	es, ee, ok := rawjson.Member(a.caps, "extensions")
	return ok && rawjson.Has(a.caps[es:ee], tasksExtension)
}

// modernClient reports whether the client speaks the modern era.
func (a *Aggregator) modernClient() bool {
	cs := a.session.Load()
	return cs != nil && cs.era == modern
}

// answerFromModern answers the client's request id with what a modern server answered: as
// written to a modern client (the same era: byte for byte), and to a legacy one without the
// modern envelope (legacyAnswer).
func (a *Aggregator) answerFromModern(id jsonrpc.ID, result, errObj json.RawMessage) {
	if errObj == nil && !a.modernClient() {
		result = legacyAnswer(result)
	}
	if err := a.client.WriteResponse(id, result, errObj); err != nil {
		a.log.Debug("writing an answer to the client", "error", err)
	}
}

// listHint is the cache hint of the aggregator's list k: that of the servers' lists merged.
// No server: public and stale at once. Called under roster.mu (catalog.go).
func listHint(servers []*server, k kind) cacheHint {
	h, first := cacheHint{public: true}, true
	for _, s := range servers {
		if !s.offersList(k) {
			continue
		}
		if first {
			h, first = s.hints[k], false
			continue
		}
		h = h.merge(s.hints[k])
	}
	return h
}

// modernForward prepares a modern client's request c, relayed to a server with params (in
// parts): the log level it asks for is noted (c.logLevel); a legacy server gets the params
// without the modern envelope (a go-sdk server restricted to legacy versions answers a
// request that carries it with -32022) and without the members of a retry, and is set to log
// at that level.
func (a *Aggregator) modernForward(c *call, params [][]byte) [][]byte {
	p := c.req.Params
	ms, me, ok := rawjson.Member(p, "_meta")
	if !ok {
		return params
	}
	level, _ := rawjson.StringMember(p[ms:me], metaLogLevel)
	c.logLevel = logLevels[level]
	if c.to.era != legacy {
		return params
	}
	if c.logLevel > 0 && c.to.offers("logging") {
		a.lowerLevel(c.to, c.logLevel, level)
	}
	joined := slices.Concat(params...)
	ms, me, _ = rawjson.Member(joined, "_meta")
	joined = rawjson.Replace(joined, ms, me, without(joined[ms:me], metaProtocolVersion, metaCapabilities, metaClientInfo, metaLogLevel))
	if inputMethods[c.method] && (rawjson.Has(joined, "inputResponses") || rawjson.Has(joined, "requestState")) {
		// A retry that is not one of ours (ownRetry): the request again, as the legacy era
		// has it, which the server answers afresh ("respond with a new InputRequiredResult
		// requesting the missing information again", basic/patterns/mrtr.mdx).
		joined = without(joined, "inputResponses", "requestState")
	}
	return [][]byte{joined}
}

// lowerLevel sets a legacy server's log level with logging/setLevel when a modern client's
// request asks for a lower one than it was set to (it logs for the whole session; what it
// says reaches the client only while such a request is in flight: wantsLog). The level is set
// again on the server's new processes (replay).
func (a *Aggregator) lowerLevel(s *server, rank int, level string) {
	for {
		set := s.logLevel.Load()
		if set != 0 && int(set) <= rank {
			return
		}
		if s.logLevel.CompareAndSwap(set, int32(rank)) {
			break
		}
	}
	params := json.RawMessage(`{"level":` + strconv.Quote(level) + `}`)
	a.setup.leveled(params)
	a.sendToServer(&call{to: s, method: "logging/setLevel", doing: "setting the log level a request asked for",
		done: func(_, errObj json.RawMessage) {
			if errObj != nil {
				s.log.Debug("logging/setLevel failed", "error", string(errObj))
			}
		}}, nil, params)
}
