package aggregator

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// Input for a legacy server, from a modern client (basic/patterns/mrtr.mdx). A legacy server
// asks for input with a request of its own (elicitation/create, sampling/createMessage,
// roots/list); a modern client takes no requests ("Servers MUST NOT initiate JSON-RPC
// requests"). So a request of the client's is answered with an InputRequiredResult that
// carries the server's request, and a requestState minted here (era.Mint); the client's retry
// (the same request, with inputResponses and that requestState) delivers the answers to the
// server's waiting requests.
//
// Legacy stdio has no link from a server's request to the request it serves: it is given to
// the oldest of the client's requests in flight to that server that can take input
// (tools/call, prompts/get, resources/read), one not suspended first (attribute). That
// request is suspended: answered with the InputRequiredResult, it stays in flight at the
// server, what the server answers meanwhile is kept, and the retry stands for it from then on.
//
// A server's request made outside any such request (the filesystem and everything servers ask
// roots/list as soon as they are initialized) is parked: it waits in the table for the
// client's next request that can carry input, to any server, which is answered with an
// InputRequiredResult for it first; the retry delivers the answers, and then goes on as the
// request it was (carryParked). Connected directly, the same client would have fallen back
// to the legacy era and answered; a server that exits, or a session that ends, meanwhile
// leaves nothing waiting.
//
// The requestState is bound to the suspension, the method and a digest of the params, and
// expires ("Servers MUST treat requestState as an attacker-controlled input ... MUST protect
// its integrity"); a suspension is taken once ("Servers for which a given requestState must
// be consumed at most once ... MUST enforce that invariant server-side"). One the client
// never takes up is ended at its expiry: the server's requests get an error, and its call is
// cancelled ("Servers MUST NOT assume that clients will fulfill the inputRequests or retry
// the original request").

// defaultInputTTL is how long a requestState of the aggregator's is good for (the TypeScript
// SDK's requestState codec also defaults to 600 s).
const defaultInputTTL = 10 * time.Minute

// suspension is what waits for a modern client's retry. Guarded by the in-flight table's lock.
type suspension struct {
	id string // named by its requestState; a new one each round
	// call is the client's request at the server; nil when the retry is to be routed afresh
	// (the client was asked for a -32042's URL elicitations, or for parked requests).
	call    *call
	method  string
	digest  string
	asked   map[string]pending // the server's requests the client was given, by key
	waiting []pending          // the server's requests that came after, asked at the retry
	keys    int
	expires time.Time
	timer   *time.Timer
	// The server's answer to call, once it came while suspended.
	done           bool
	result, errObj json.RawMessage
}

// pending is a server's request for input: in the table (from the server, to the client), or
// nil for a URL elicitation of a -32042 error, which the server does not wait for.
type pending struct {
	call   *call
	method string
	params json.RawMessage
}

// inputRequest deals with a legacy server's request to a modern client (see above).
func (se *session) inputRequest(s *server, m *jsonrpc.Request) {
	pc := &call{from: s, fromID: m.ID, method: m.Method, doing: m.Method}
	if _, res := se.a.inflight.add(pc, nil); res != addOK {
		se.a.notTaken(s, m.ID) // its server went down (for the session) meanwhile
		return
	}
	c := se.a.inflight.attribute(s)
	if c == nil {
		se.park(pc, m.Params)
		return
	}
	env, _ := se.side().(*modernClient).envelope(c.req.Params)
	if errObj := era.MissingCapability(env, m.Method, m.Params); errObj != nil {
		// "MissingRequiredClientCapabilityError": the client's request cannot be served.
		if se.a.inflight.take(pc) {
			s.conn.Send(nil, stdio.Response(stdio.IDJSON(m.ID), nil, rpcError(jsonrpc.CodeInternalError, nil,
				"Internal error: the client did not declare what %s needs in this request; the request came through mcp-simple-aggregator", m.Method))...)
		}
		if se.a.inflight.take(c) {
			c.cancelAtServer(func() {
				s.conn.Send(nil, stdio.Cancelled(c.toID, "the client cannot give the input the server asked for")...)
			})
			c.unanswered()
			se.answerClient(c.fromID, nil, errObj)
		}
		return
	}
	sus, clientID, first := se.a.inflight.suspend(c, pending{pc, m.Method, m.Params}, se.inputTTL())
	switch {
	case sus == nil: // the client's request ended meanwhile: the next one carries it
		se.park(pc, m.Params)
	case first:
		sus.timer = time.AfterFunc(se.inputTTL(), func() { se.expire(sus) })
		se.answerClient(clientID, se.inputRequired(sus), nil)
	}
}

// park makes the server's request c, in the table, wait for the client's next request that can
// carry input (carryParked); params are its params.
func (se *session) park(c *call, params json.RawMessage) {
	if se.a.inflight.park(c, params) {
		c.from.log.Debug("a request of the server waits for the client's next request that can carry it", "method", c.method)
	}
}

// carryParked answers the client's request req, which can carry input, with an
// InputRequiredResult for the servers' parked requests whose capability its envelope declares;
// the others are answered with the error that the client cannot take them. The retry delivers
// the answers, and then goes on as req. It reports false, doing nothing, when nothing is parked.
func (se *session) carryParked(req *jsonrpc.Request, env era.Envelope) bool {
	parked := se.a.inflight.unpark()
	if len(parked) == 0 {
		return false
	}
	sus := &suspension{method: req.Method, digest: era.ParamsDigest(req.Method, req.Params), asked: map[string]pending{}}
	for _, c := range parked {
		if errObj := era.MissingCapability(env, c.method, c.params); errObj != nil {
			c.from.conn.Send(nil, stdio.Response(stdio.IDJSON(c.fromID), nil, methodNotFound(
				"the client does not support %s (the request that could carry it did not declare the %q capability); the request came through mcp-simple-aggregator",
				c.method, era.ServerRequests[c.method]))...)
			continue
		}
		if se.a.inflight.give(c) {
			sus.ask(pending{c, c.method, c.params})
		}
	}
	if len(sus.asked) == 0 {
		return false
	}
	sus.round(se.inputTTL())
	se.a.inflight.parkSuspension(sus)
	sus.timer = time.AfterFunc(se.inputTTL(), func() { se.expire(sus) })
	se.answerClient(req.ID, se.inputRequired(sus), nil)
	return true
}

// unpark answers every parked request with the error that the client cannot be reached (why).
func (se *session) unpark(why string) {
	for _, c := range se.a.inflight.unpark() {
		c.from.conn.Send(nil, stdio.Response(stdio.IDJSON(c.fromID), nil, outsideRequest(c.method, why))...)
	}
}

// inputTTL is how long the client has to retry.
func (se *session) inputTTL() time.Duration {
	if se.a.opts.InputTTL > 0 {
		return se.a.opts.InputTTL
	}
	return defaultInputTTL
}

// inputRequired is the InputRequiredResult that asks the client for what sus waits for.
func (se *session) inputRequired(sus *suspension) json.RawMessage {
	requests := make(map[string]era.InputRequest, len(sus.asked))
	for k, p := range sus.asked {
		requests[k] = era.InputRequest{Method: p.method, Params: p.params}
	}
	return era.InputRequired(requests, era.Mint(se.stateKey[:], era.State{ID: sus.id, Method: sus.method, Digest: sus.digest, Expires: sus.expires.UnixMilli()}))
}

// newStateKey is the HMAC key of this process's requestStates.
func newStateKey() (k [32]byte) {
	_, _ = rand.Read(k[:])
	return k
}

// newSuspensionID names a suspension (one round of it).
func newSuspensionID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ownRetry reports whether a modern client's request is the retry of one the aggregator asked
// input for: its requestState is the aggregator's, and it does not go to a modern server. A
// modern server's input_required reaches the client as the server wrote it, and so does the
// retry (its requestState is the server's to verify, even one that another
// mcp-simple-aggregator minted).
func (se *session) ownRetry(m *jsonrpc.Request) bool {
	if !era.InputMethods[m.Method] {
		return false
	}
	state, ok := rawjson.StringMember(m.Params, "requestState")
	if !ok || !era.Ours(state) {
		return false
	}
	s := se.a.catalog.Load().inputTarget(m.Method, m.Params)
	return s == nil || s.side().era() != era.Modern
}

// resume takes a modern client's retry: it verifies the requestState, gives the server's
// waiting requests the client's answers, and the retry now stands for the client's request at
// the server (or is answered at once: with what the server answered meanwhile, or with a new
// InputRequiredResult for what is still to be asked), or, when the client was asked outside
// its request at a server, goes on as a request of its own.
func (se *session) resume(req *jsonrpc.Request) {
	responses, state, _, err := era.Retry(req.Params)
	var st era.State
	if err == nil {
		st, err = era.Verify(se.stateKey[:], state, time.Now())
		if err != nil && strings.Contains(err.Error(), "expired") {
			err = fmt.Errorf("the requestState expired (a retry is accepted for %v after the input was asked for); send the request again without it", se.inputTTL())
		}
	}
	if err == nil && (st.Method != req.Method || st.Digest != era.ParamsDigest(req.Method, req.Params)) {
		err = fmt.Errorf("the requestState belongs to another request (it was given for another method, tool, prompt, resource or arguments)")
	}
	if err != nil {
		se.answerClient(req.ID, nil, invalidParams("%v", err))
		return
	}
	sus := se.a.inflight.claim(st.ID)
	if sus == nil {
		se.answerClient(req.ID, nil, invalidParams("the request this requestState belongs to is gone: it was retried already, or its server went down, or mcp-simple-aggregator restarted; send the request again without it"))
		return
	}
	sus.timer.Stop()
	for key, pc := range sus.asked {
		r, ok := responses[key]
		if !ok {
			continue // asked again below: "respond with a new InputRequiredResult requesting the missing information"
		}
		delete(sus.asked, key)
		if pc.call != nil && se.a.inflight.take(pc.call) {
			pc.call.from.conn.Send(nil, stdio.Response(stdio.IDJSON(pc.call.fromID), r, nil)...)
		}
	}
	if sus.call == nil {
		// After a -32042 the server decides now whether the client did what it asked; after
		// parked requests, one the client left unanswered is not asked again (it is no part of
		// this request): its server is told, and the request goes on.
		for _, pc := range sus.asked {
			if pc.call != nil && se.a.inflight.take(pc.call) {
				pc.call.from.conn.Send(nil, stdio.Response(stdio.IDJSON(pc.call.fromID), nil, rpcError(jsonrpc.CodeInternalError, nil,
					"Internal error: the client did not answer %s; the request came through mcp-simple-aggregator", pc.method))...)
			}
		}
		se.retryAsNew(req)
		return
	}
	again, outcome := se.a.inflight.resume(sus, req, tokenOf(req.Params), se.inputTTL())
	switch {
	case outcome:
		se.answerClient(req.ID, sus.result, sus.errObj)
	case again:
		sus.timer = time.AfterFunc(se.inputTTL(), func() { se.expire(sus) })
		se.answerClient(req.ID, se.inputRequired(sus), nil)
	}
}

// expire ends a suspension the client did not take up in time: the server's requests get an
// error, and its call is cancelled.
func (se *session) expire(sus *suspension) {
	asked, c, ok := se.a.inflight.expire(sus)
	if !ok {
		return
	}
	for _, pc := range asked {
		if pc.call != nil && se.a.inflight.take(pc.call) {
			pc.call.from.conn.Send(nil, stdio.Response(stdio.IDJSON(pc.call.fromID), nil, rpcError(jsonrpc.CodeInternalError, nil,
				"Internal error: the client did not answer %s within %v (it did not retry its request); the request came through mcp-simple-aggregator", pc.call.method, se.inputTTL()))...)
		}
	}
	if c == nil {
		return // a -32042's URL elicitations, or parked requests: nothing is in flight for them
	}
	if se.a.inflight.take(c) {
		c.cancelAtServer(func() {
			c.to.conn.Send(nil, stdio.Cancelled(c.toID, "the client did not give the input asked for in time")...)
		})
		c.unanswered()
	}
	c.to.log.Debug("input asked for expired", "method", c.method, "requests", len(asked))
}

// urlRequired turns a legacy server's URLElicitationRequiredError (-32042, "MUST NOT" reach a
// modern client: basic/index.mdx) into an InputRequiredResult asking for each URL elicitation
// of its data; the client's retry is sent to the server again, which decides whether the client
// did what it asked ("accept" is consent, not completion: client/elicitation.mdx). It reports
// false when errObj is not such an error.
func (se *session) urlRequired(id jsonrpc.ID, c *call, errObj json.RawMessage) bool {
	els := era.URLElicitations(errObj)
	if len(els) == 0 {
		return false
	}
	sus := &suspension{method: c.method, digest: era.ParamsDigest(c.method, c.req.Params), asked: map[string]pending{}}
	for _, params := range els {
		sus.ask(pending{method: "elicitation/create", params: params})
	}
	sus.round(se.inputTTL())
	se.a.inflight.parkSuspension(sus)
	sus.timer = time.AfterFunc(se.inputTTL(), func() { se.expire(sus) })
	se.answerClient(id, se.inputRequired(sus), nil)
	return true
}

// retryAsNew routes a retry as a new request: its params without the input.
func (se *session) retryAsNew(req *jsonrpc.Request) {
	params := rawjson.Without(req.Params, "inputResponses", "requestState")
	clientRequests[req.Method](se, &jsonrpc.Request{ID: req.ID, Method: req.Method, Params: params})
}

// The table's part (suspensions and parked requests live under its lock, beside the calls
// they hold) is in stages.go.

// ask gives p a key and adds it to what the client is asked.
func (sus *suspension) ask(p pending) {
	sus.keys++
	sus.asked[strings.SplitN(p.method, "/", 2)[0]+"-"+strconv.Itoa(sus.keys)] = p
}

// round starts a round of sus: a new ID (the previous requestState is dead) and expiry.
func (sus *suspension) round(ttl time.Duration) {
	sus.id, sus.expires = newSuspensionID(), time.Now().Add(ttl)
}
