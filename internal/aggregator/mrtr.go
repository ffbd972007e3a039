package aggregator

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// Input for a legacy server, from a modern client (basic/patterns/mrtr.mdx). A legacy server
// asks for input with a request of its own (elicitation/create, sampling/createMessage,
// roots/list) while it serves a request of the client's; a modern client takes no requests
// ("Servers MUST NOT initiate JSON-RPC requests"). So the client's request is answered with
// an InputRequiredResult that carries the server's request, and a requestState minted here;
// the client's retry (the same request, with inputResponses and that requestState) delivers
// the answers to the server's waiting requests, and the server's result answers the retry.
// Meanwhile the server's call stays in flight: it is suspended (the client's request it
// answered is done), and what the server answers then is kept for the retry.
//
// Legacy stdio has no link from a server's request to the request it serves: it is given to
// the oldest of the client's requests in flight to that server that can take input
// (tools/call, prompts/get, resources/read), one not suspended first (attribute).
//
// The requestState is an authenticated pointer to the suspension: "servers MUST treat
// requestState as an attacker-controlled input ... MUST protect its integrity (e.g. HMAC or
// AEAD) and MUST reject state that fails verification", and SHOULD bind it to "a short expiry
// (TTL)" and "an identifier for the originating request, e.g. the method name and a digest of
// its salient parameters". It is HMAC-SHA256-signed with a key of this process, names the
// suspension, the method and a digest of the params (without _meta, inputResponses and
// requestState), and expires; a suspension is taken once ("Servers for which a given
// requestState must be consumed at most once ... MUST enforce that invariant server-side").
// One the client never takes up is ended at its expiry: the server's requests get an error,
// and its call is cancelled ("Servers MUST NOT assume that clients will fulfill the
// inputRequests or retry the original request").

// statePrefix starts the aggregator's requestState; a state without it is a modern server's
// own, and passes to that server.
const statePrefix = "mcpagg1."

// defaultInputTTL is how long a requestState of the aggregator's is good for (the TypeScript
// SDK's requestState codec also defaults to 600 s).
const defaultInputTTL = 10 * time.Minute

// inputMethods are the client's requests that may be answered with an InputRequiredResult:
// "Servers MUST NOT send InputRequiredResult responses on any other client requests"
// (basic/patterns/mrtr).
var inputMethods = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// suspension is a client's request at a legacy server that waits for the client's input.
// Guarded by the in-flight table's lock.
type suspension struct {
	id      string // named by its requestState; a new one each round
	call    *call  // the client's request at the server
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
func (a *Aggregator) inputRequest(s *server, m *jsonrpc.Request) {
	c := a.inflight.attribute(s)
	if c == nil {
		s.conn.Send(nil, stdio.Response(encodeID(m.ID), nil, outsideRequest(m.Method))...)
		return
	}
	if errObj := missingCapability(c.req, m.Method, m.Params); errObj != nil {
		// "MissingRequiredClientCapabilityError": the client's request cannot be served.
		s.conn.Send(nil, stdio.Response(encodeID(m.ID), nil, rpcError(jsonrpc.CodeInternalError, nil,
			"Internal error: the client did not declare what %s needs in this request; the request came through mcp-simple-aggregator", m.Method))...)
		if a.inflight.take(c) {
			s.conn.Send(nil, cancelled(c.toID, "the client cannot give the input the server asked for")...)
			a.answerCall(c, nil, errObj)
		}
		return
	}
	pc := &call{from: s, fromID: m.ID, method: m.Method, doing: m.Method}
	if _, res := a.inflight.add(pc, nil); res != addOK {
		return // its server went down meanwhile
	}
	sus, clientID, first := a.inflight.suspend(c, pending{pc, m.Method, m.Params}, a.inputTTL())
	switch {
	case sus == nil: // the client's request ended meanwhile
		if a.inflight.take(pc) {
			s.conn.Send(nil, stdio.Response(encodeID(m.ID), nil, outsideRequest(m.Method))...)
		}
	case first:
		sus.timer = time.AfterFunc(a.inputTTL(), func() { a.expire(sus) })
		a.answerClient(clientID, a.inputRequired(sus), nil)
	}
}

// inputTTL is how long the client has to retry.
func (a *Aggregator) inputTTL() time.Duration {
	if a.opts.InputTTL > 0 {
		return a.opts.InputTTL
	}
	return defaultInputTTL
}

// missingCapability is the -32021 error when the client's request req did not declare the
// capability a server's request needs (its own _meta: "Servers MUST NOT infer capabilities
// from prior requests"); nil when it did.
func missingCapability(req *jsonrpc.Request, method string, params json.RawMessage) json.RawMessage {
	env, _ := parseEnvelope(req.Params)
	name := serverRequests[method]
	declared, ok := env.caps[name]
	needed := "{}"
	if ok && method == "elicitation/create" && urlMode(params) && !rawjson.Has(declared, "url") {
		ok, needed = false, `{"url":{}}`
	}
	if ok {
		return nil
	}
	data := json.RawMessage(`{"requiredCapabilities":{"` + name + `":` + needed + `}}`)
	return rpcError(-32021, data, "Missing required client capability: a server asked for %s while serving this request, and the request's _meta %q does not declare %q; the request came through mcp-simple-aggregator",
		method, metaCapabilities, name)
}

// inputRequired is the InputRequiredResult that asks the client for what sus waits for.
func (a *Aggregator) inputRequired(sus *suspension) json.RawMessage {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range sus.asked {
			if !yield(k) {
				return
			}
		}
	})
	b := []byte(`{"resultType":"input_required","inputRequests":{`)
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		p := sus.asked[k]
		b = append(append(append(b, strconv.Quote(k)...), `:{"method":`...), marshal(p.method)...)
		if len(p.params) > 0 {
			b = append(append(b, `,"params":`...), p.params...)
		}
		b = append(b, '}')
	}
	return append(b, `},"requestState":`+strconv.Quote(a.mintState(sus))+`}`...)
}

// statePayload is what a requestState of the aggregator's says.
type statePayload struct {
	ID      string `json:"i"`
	Method  string `json:"m"`
	Digest  string `json:"d"`
	Expires int64  `json:"e"` // Unix milliseconds
}

// mintState is the requestState for sus: its payload, and the payload's HMAC.
func (a *Aggregator) mintState(sus *suspension) string {
	payload, _ := json.Marshal(statePayload{sus.id, sus.method, sus.digest, sus.expires.UnixMilli()})
	mac := hmac.New(sha256.New, a.stateKey[:])
	mac.Write(payload)
	return statePrefix + base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// verifyState checks a requestState of the aggregator's and returns its payload, or why it
// is refused.
func (a *Aggregator) verifyState(state string) (statePayload, error) {
	var p statePayload
	body, sig, ok := strings.Cut(strings.TrimPrefix(state, statePrefix), ".")
	payload, err1 := base64.RawURLEncoding.DecodeString(body)
	got, err2 := base64.RawURLEncoding.DecodeString(sig)
	if !ok || err1 != nil || err2 != nil {
		return p, fmt.Errorf("the requestState is not one mcp-simple-aggregator gave (malformed)")
	}
	mac := hmac.New(sha256.New, a.stateKey[:])
	mac.Write(payload)
	if !hmac.Equal(got, mac.Sum(nil)) || json.Unmarshal(payload, &p) != nil {
		return p, fmt.Errorf("the requestState failed verification (it was altered, or not made by this mcp-simple-aggregator process)")
	}
	if time.Now().UnixMilli() > p.Expires {
		return p, fmt.Errorf("the requestState expired (a retry is accepted for %v after the input was asked for); send the request again without it", a.inputTTL())
	}
	return p, nil
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

// paramsDigest is the digest of a request's salient params: every member but _meta,
// inputResponses and requestState, each value in canonical JSON, so that a retry that
// re-encodes the params matches.
func paramsDigest(method string, params json.RawMessage) string {
	var members map[string]any
	_ = json.Unmarshal(params, &members)
	delete(members, "_meta")
	delete(members, "inputResponses")
	delete(members, "requestState")
	canon, _ := json.Marshal(members) // map keys sorted
	sum := sha256.Sum256(append([]byte(method+"\n"), canon...))
	return hex.EncodeToString(sum[:])
}

// ownRetry reports whether a modern client's request is the retry of one the aggregator asked
// input for: its requestState is the aggregator's, and it goes to a legacy server. A modern
// server's input_required reaches the client as the server wrote it, and so does the retry
// (its requestState is the server's to verify, even one that another mcp-simple-aggregator
// minted).
func (a *Aggregator) ownRetry(m *jsonrpc.Request) bool {
	if !inputMethods[m.Method] {
		return false
	}
	state, ok := rawjson.StringMember(m.Params, "requestState")
	if !ok || !strings.HasPrefix(state, statePrefix) {
		return false
	}
	s := a.catalog.Load().inputTarget(m.Method, m.Params)
	return s == nil || s.era == legacy
}

// resume takes a modern client's retry: it verifies the requestState, gives the server's
// waiting requests the client's answers, and the retry now stands for the client's request at
// the server (or is answered at once: with what the server answered meanwhile, or with a new
// InputRequiredResult for what is still to be asked).
func (a *Aggregator) resume(req *jsonrpc.Request) {
	state, _ := rawjson.StringMember(req.Params, "requestState")
	p, err := a.verifyState(state)
	if err == nil && (p.Method != req.Method || p.Digest != paramsDigest(req.Method, req.Params)) {
		err = fmt.Errorf("the requestState belongs to another request (it was given for another method, tool, prompt, resource or arguments)")
	}
	var responses map[string]json.RawMessage
	if err == nil {
		if rs, re, ok := rawjson.Member(req.Params, "inputResponses"); ok && json.Unmarshal(req.Params[rs:re], &responses) != nil {
			err = fmt.Errorf("inputResponses is not an object of answers by key")
		}
	}
	if err != nil {
		a.answerClient(req.ID, nil, invalidParams("%v", err))
		return
	}
	sus := a.inflight.claim(p.ID)
	if sus == nil {
		a.answerClient(req.ID, nil, invalidParams("the request this requestState belongs to is gone: it was retried already, or its server went down, or mcp-simple-aggregator restarted; send the request again without it"))
		return
	}
	sus.timer.Stop()
	if sus.call == nil {
		// After a -32042: the server decides now whether the client did what it asked.
		a.redispatch(req)
		return
	}
	for key, pc := range sus.asked {
		r, ok := responses[key]
		if !ok {
			continue // asked again below: "respond with a new InputRequiredResult requesting the missing information"
		}
		delete(sus.asked, key)
		if pc.call != nil && a.inflight.take(pc.call) {
			pc.call.from.conn.Send(nil, stdio.Response(encodeID(pc.call.fromID), r, nil)...)
		}
	}
	token := tokenOf(req.Params)
	again, outcome := a.inflight.resume(sus, req, token, a.inputTTL())
	switch {
	case outcome:
		a.answerClient(req.ID, sus.result, sus.errObj)
	case again:
		sus.timer = time.AfterFunc(a.inputTTL(), func() { a.expire(sus) })
		a.answerClient(req.ID, a.inputRequired(sus), nil)
	}
}

// expire ends a suspension the client did not take up in time: the server's requests get an
// error, and its call is cancelled.
func (a *Aggregator) expire(sus *suspension) {
	asked, c, ok := a.inflight.expire(sus)
	if !ok {
		return
	}
	if c == nil {
		return // a -32042's URL elicitation: nothing waits at the server
	}
	for _, pc := range asked {
		if a.inflight.take(pc.call) {
			pc.call.from.conn.Send(nil, stdio.Response(encodeID(pc.call.fromID), nil, rpcError(jsonrpc.CodeInternalError, nil,
				"Internal error: the client did not answer %s within %v (it did not retry its request); the request came through mcp-simple-aggregator", pc.call.method, a.inputTTL()))...)
		}
	}
	if a.inflight.take(c) {
		c.to.conn.Send(nil, cancelled(c.toID, "the client did not give the input asked for in time")...)
	}
	c.to.log.Debug("input asked for expired", "method", c.method, "requests", len(asked))
}

// answerCall answers the client's request c, relayed to a server, under its ID; while c is
// suspended, the answer is kept for the client's retry.
func (a *Aggregator) answerCall(c *call, result, errObj json.RawMessage) {
	if c.to != nil && c.to.era == modern {
		a.answerFromModern(c.fromID, result, errObj) // it asks no input of its own: nothing is held
		return
	}
	if !a.modernClient() {
		a.answerClient(c.fromID, result, errObj)
		return
	}
	id, held := a.inflight.outcome(c, result, errObj)
	switch {
	case held:
	case errObj != nil && c.req != nil && inputMethods[c.method] && a.urlRequired(id, c, errObj):
	default:
		a.answerClient(id, result, errObj)
	}
}

// codeURLElicitationRequired is the legacy URLElicitationRequiredError (2025-11-25).
const codeURLElicitationRequired = -32042

// urlRequired turns a legacy server's URLElicitationRequiredError (-32042, "MUST NOT" reach a
// modern client: basic/index.mdx) into an InputRequiredResult asking for each URL
// elicitation of its data; the client's retry is sent to the server again, which decides
// whether the client did what it asked ("accept" is consent, not completion:
// client/elicitation.mdx). It reports false when errObj is not such an error.
func (a *Aggregator) urlRequired(id jsonrpc.ID, c *call, errObj json.RawMessage) bool {
	var e struct {
		Code int64 `json:"code"`
		Data struct {
			Elicitations []map[string]json.RawMessage `json:"elicitations"`
		} `json:"data"`
	}
	if json.Unmarshal(errObj, &e) != nil || e.Code != codeURLElicitationRequired || len(e.Data.Elicitations) == 0 {
		return false
	}
	sus := &suspension{method: c.method, digest: paramsDigest(c.method, c.req.Params), asked: map[string]pending{}}
	for _, el := range e.Data.Elicitations {
		delete(el, "elicitationId") // removed in 2026-07-28 (changelog m11)
		params, _ := json.Marshal(el)
		sus.ask(pending{method: "elicitation/create", params: params})
	}
	sus.round(a.inputTTL())
	a.inflight.park(sus)
	sus.timer = time.AfterFunc(a.inputTTL(), func() { a.expire(sus) })
	a.answerClient(id, a.inputRequired(sus), nil)
	return true
}

// redispatch routes a retry after a -32042 as a new request: its params without the input.
func (a *Aggregator) redispatch(req *jsonrpc.Request) {
	params := without(req.Params, "inputResponses", "requestState")
	clientRequests[req.Method](a, &jsonrpc.Request{ID: req.ID, Method: req.Method, Params: params})
}

// The table's part: suspensions live under its lock, beside the calls they hold.

// attribute is the client's request in flight to s that a request of s for input serves: the
// oldest that can take input, one not suspended first; nil when there is none.
func (t *table) attribute(s *server) *call {
	t.mu.Lock()
	defer t.mu.Unlock()
	var best *call
	before := func(c, d *call) bool { // c is taken before d
		if (c.suspended == nil) != (d.suspended == nil) {
			return c.suspended == nil
		}
		return c.seq < d.seq
	}
	for _, c := range t.byTo {
		if c.to != s || c.own() || c.from != nil || c.req == nil || !inputMethods[c.method] {
			continue
		}
		if best == nil || before(c, best) {
			best = c
		}
	}
	return best
}

// suspend adds the server's request p to the suspension of c, made now (first) when c is not
// suspended yet: c's ID with the client is returned, since the client's request is answered
// with the InputRequiredResult. Nil when c is no longer in flight.
func (t *table) suspend(c *call, p pending, ttl time.Duration) (sus *suspension, clientID jsonrpc.ID, first bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byTo[c.toID] != c {
		return nil, clientID, false
	}
	if sus = c.suspended; sus != nil {
		sus.waiting = append(sus.waiting, p)
		return sus, clientID, false
	}
	sus = &suspension{call: c, method: c.method, digest: paramsDigest(c.method, c.req.Params), asked: map[string]pending{}}
	sus.ask(p)
	sus.round(ttl)
	c.suspended = sus
	t.suspended[sus.id] = sus
	delete(t.byFrom, fromKey{nil, c.fromID}) // answered: the client cannot cancel it any more
	return sus, c.fromID, true
}

// ask gives p a key and adds it to what the client is asked.
func (sus *suspension) ask(p pending) {
	sus.keys++
	sus.asked[strings.SplitN(p.method, "/", 2)[0]+"-"+strconv.Itoa(sus.keys)] = p
}

// round starts a round of sus: a new ID (the previous requestState is dead) and expiry.
func (sus *suspension) round(ttl time.Duration) {
	sus.id, sus.expires = newSuspensionID(), time.Now().Add(ttl)
}

// park registers a suspension that holds no call (a -32042's URL elicitations).
func (t *table) park(sus *suspension) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.suspended[sus.id] = sus
}

// claim takes the suspension id for a retry: nil when there is none (taken, expired, gone).
func (t *table) claim(id string) *suspension {
	t.mu.Lock()
	defer t.mu.Unlock()
	sus := t.suspended[id]
	delete(t.suspended, id)
	return sus
}

// resume makes the retry req stand for sus's call: the client's cancellation and progress
// token are the retry's. When the server answered meanwhile, outcome says the retry is to be
// answered with it; when requests are still to be asked, again says so, and sus is suspended
// for another round.
func (t *table) resume(sus *suspension, req *jsonrpc.Request, token []byte, ttl time.Duration) (again, outcome bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := sus.call
	if sus.done {
		for _, p := range sus.asked {
			t.removeLocked(p.call)
		}
		for _, p := range sus.waiting {
			t.removeLocked(p.call)
		}
		return false, true
	}
	for _, p := range sus.waiting {
		sus.ask(p)
	}
	sus.waiting = nil
	c.fromID, c.req = req.ID, req
	if token != nil {
		c.fromToken = append([]byte(nil), token...)
	}
	if len(sus.asked) > 0 {
		sus.round(ttl)
		t.suspended[sus.id] = sus
		return true, false
	}
	c.suspended = nil
	if t.byTo[c.toID] == c {
		t.byFrom[fromKey{nil, c.fromID}] = c
	}
	return false, false
}

// outcome takes the server's answer to c: kept in its suspension when c is suspended (held);
// else the client's ID to answer under.
func (t *table) outcome(c *call, result, errObj json.RawMessage) (id jsonrpc.ID, held bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if sus := c.suspended; sus != nil {
		sus.done, sus.result, sus.errObj = true, result, errObj
		return id, true
	}
	return c.fromID, false
}

// expire removes sus when it is still waiting for the client, and returns the server's
// requests it held, and its call.
func (t *table) expire(sus *suspension) (asked []pending, c *call, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.suspended[sus.id] != sus {
		return nil, nil, false
	}
	delete(t.suspended, sus.id)
	for _, p := range sus.asked {
		asked = append(asked, p)
	}
	return append(asked, sus.waiting...), sus.call, true
}

// suspendedCall reports whether c waits for the client's input (its progress has no request
// to go to).
func (t *table) suspendedCall(c *call) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return c.suspended != nil
}
