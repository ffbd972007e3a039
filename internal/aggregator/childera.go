package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// Children of either era. The aggregator is the MCP client of each child, and speaks to it in
// the era the child answers the probe in (basic/transports/stdio.mdx, "Probing"):
//
//	probe      server/discover with the modern _meta envelope first; a DiscoverResult makes
//	           the child modern, anything else (or silence within Options.ProbeTimeout) makes
//	           it legacy, and it gets initialize as before
//	envelope   every request to a modern child carries the envelope (childParams), built
//	           from what the client declared (the legacy initialize params, serverInit)
//	listen     one subscriptions/listen per modern child for its list changes and the
//	           client's resource subscriptions; what arrives on it enters the legacy path
//	health     server/discover instead of ping (pingLoop)
//	MRTR       a legacy client meets a modern child's input_required as ordinary requests
//	           (fulfil): it sees one request and one result

// defaultProbeTimeout is how long a child is given to answer the server/discover probe.
const defaultProbeTimeout = 2 * time.Second

// maxInputRounds is how many input_required results of a child one request of a legacy client
// is carried through; both SDKs stop at 10 too.
const maxInputRounds = 10

// probe decides the era of s with server/discover, params being the initialize the servers
// are told (serverInit), whose capabilities and clientInfo make the envelope. It reports
// whether s is modern: then s.era, its envelope and what it said of itself are set, and s must
// never get initialize ("go-sdk dual servers cannot take initialize after server/discover").
// An error means s cannot be talked to at all (it exited, or closed its output, during the
// probe): a start failure like any other.
//
// The rule (basic/transports/stdio.mdx, "Backward Compatibility"): "The server returns a
// DiscoverResult: the server is modern. Select a mutually supported version from
// supportedVersions and continue. - The server returns a recognized modern JSON-RPC error such
// as UnsupportedProtocolVersionError: the server is modern but does not support the requested
// version. Use one of the versions in its advertised supported list. Do not fall back to
// initialize. - The server returns any other error, or does not respond within a reasonable
// timeout: the server is legacy. Fall back to the initialize handshake. The fallback MUST NOT
// be keyed to one specific error code". An UnsupportedProtocolVersionError whose supported
// list has a legacy version (the go-sdk restricted to legacy versions answers so, as do
// aggregators before 2026-07-28) means initialize, as both SDK clients read it; one that lists
// only modern versions the aggregator does not speak is a start failure that names them.
func (a *Aggregator) probe(ctx context.Context, s *server, params json.RawMessage) (bool, error) {
	var init struct {
		Capabilities json.RawMessage `json:"capabilities"`
		ClientInfo   json.RawMessage `json:"clientInfo"`
	}
	_ = json.Unmarshal(params, &init) // serverInit made it
	if legacyByExit, _ := a.probeExits.Load(probeKey(s)); legacyByExit == true {
		s.log.Debug("era: legacy (an earlier process of the same entry exited on the server/discover probe)")
		return false, nil
	}
	bound := min(a.opts.ProbeTimeout, a.opts.StartupTimeout)
	version := modernVersions[0]
	for try := 0; ; try++ {
		env := buildEnvelope(version, init.Capabilities, init.ClientInfo)
		pctx, cancel := context.WithTimeout(ctx, bound)
		result, err := a.call(pctx, s, "server/discover", "answering the server/discover probe", json.RawMessage(`{"_meta":{`+env+`}}`))
		cancel()
		var rpcErr *jsonrpc.Error
		switch {
		case err == nil:
			chosen, why := a.discovered(s, result, env)
			if chosen == "" {
				s.log.Debug("era: legacy ("+why+")", "probe", "server/discover")
				return false, nil
			}
			s.log.Debug("era: modern (it answered server/discover)", "protocol", chosen)
			return true, nil
		case errors.As(err, &rpcErr) && strings.HasPrefix(rpcErr.Message, "Server unavailable: server "+strconv.Quote(s.key)+" "):
			// The aggregator's own (serverGone): the probe could not be written, the process
			// is going away.
			return false, errClosed
		case errors.As(err, &rpcErr):
			supported := unsupportedVersions(rpcErr)
			next := ""
			for _, v := range modernVersions {
				if slices.Contains(supported, v) {
					next = v
					break
				}
			}
			if rpcErr.Code == codeUnsupportedVersion && next != "" && try == 0 {
				version = next
				continue // once, with a version it names
			}
			if rpcErr.Code == codeUnsupportedVersion && len(supported) > 0 && !slices.ContainsFunc(supported, func(v string) bool { return slices.Contains(serverProtocols, v) }) {
				return false, fmt.Errorf("it speaks only the protocol versions %s, and mcp-simple-aggregator speaks %s", strings.Join(supported, ", "), strings.Join(append(slices.Clone(modernVersions), serverProtocols...), ", "))
			}
			s.log.Debug(fmt.Sprintf("era: legacy (it answered server/discover with the error %d %q)", rpcErr.Code, rpcErr.Message), "probe", "server/discover")
			return false, nil
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
			s.log.Debug(fmt.Sprintf("era: legacy (no answer to server/discover within %v)", bound), "probe", "server/discover")
			return false, nil
		default:
			return false, err // it went away, or the start-up timeout passed
		}
	}
}

// settleEra decides the era of s (probe) and performs the legacy handshake (initLegacy) when
// it is legacy; a process that exited on the probe is started again for it (respawn). On
// failure it names the request that failed.
func (a *Aggregator) settleEra(ctx context.Context, s *server, params json.RawMessage) (stage string, err error) {
	isModern, err := a.probe(ctx, s, params)
	respawned := false
	if err != nil && a.exitedOnProbe(s, err) {
		if err = a.respawn(s); err == nil {
			respawned = true
		}
	}
	if err != nil {
		return "server/discover", err
	}
	if isModern {
		return "", nil
	}
	stage, err = a.initLegacy(ctx, s, params)
	if respawned {
		// Initialized: its later processes are not probed. Not: it exits at start whatever
		// it is sent, and its later processes are not started twice.
		a.probeExits.Store(probeKey(s), err == nil)
	}
	return stage, err
}

// probeKey is the identity of the entry of s for Aggregator.probeExits: its key, command and
// arguments.
func probeKey(s *server) string {
	return strings.Join(append([]string{s.key, s.command}, s.cfg.Args...), "\x00")
}

// exitedOnProbe reports whether err, from the probe of s, is s exiting on it. Some legacy
// servers do ("rmcp servers exit on it", go-sdk issue #1177, docs/protocol-eras.md §3); the
// rule asks for a fallback to initialize, which such a process cannot take any more.
func (a *Aggregator) exitedOnProbe(s *server, err error) bool {
	if legacyByExit, known := a.probeExits.Load(probeKey(s)); !errors.Is(err, errClosed) || known && legacyByExit == false {
		return false
	}
	select {
	case <-s.proc.Exited():
		return true
	case <-time.After(500 * time.Millisecond): // as describe waits for an exit
		return false // it closed its output and runs on: not a probe it could not take
	}
}

// respawn starts the process of s again after it exited on the probe, to be spoken to in the
// legacy era (settleEra remembers how that went, in Aggregator.probeExits).
func (a *Aggregator) respawn(s *server) error {
	why := s.proc.ExitDescription()
	s.procMu.Lock()
	defer s.procMu.Unlock()
	select {
	case <-s.retired:
		return errClosed // it was retired meanwhile (a reload, the end): nothing to start
	default:
	}
	<-s.readDone
	s.conn.Close()
	s.proc.Stop(0)
	s.readDone = make(chan struct{})
	if err := a.startProcess(s); err != nil {
		return err
	}
	s.log.Debug("era: legacy (its process " + why + " on the server/discover probe; started again for initialize)")
	return nil
}

// discovered takes a DiscoverResult of s: the version chosen ("" when it offers none of ours,
// and why), and, for a modern one, s is set up from it.
func (a *Aggregator) discovered(s *server, result json.RawMessage, env string) (chosen, why string) {
	var d struct {
		SupportedVersions []string                   `json:"supportedVersions"`
		Capabilities      map[string]json.RawMessage `json:"capabilities"`
		Instructions      string                     `json:"instructions"`
		Meta              map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(result, &d); err != nil {
		return "", "its answer to server/discover is not a DiscoverResult: " + err.Error()
	}
	for _, v := range modernVersions {
		if slices.Contains(d.SupportedVersions, v) {
			chosen = v
			break
		}
	}
	if chosen == "" {
		return "", fmt.Sprintf("its DiscoverResult lists the versions %v, none of them modern", d.SupportedVersions)
	}
	var info struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(d.Meta[metaServerInfo], &info)
	s.era, s.protocol, s.name, s.instructions, s.caps = modern, chosen, info.Name, d.Instructions, d.Capabilities
	if s.caps == nil {
		s.caps = map[string]json.RawMessage{}
	}
	// Tasks are an extension in the modern era, which the aggregator does not declare: a modern
	// child's legacy-looking "tasks" is not routed.
	s.envelope = envelopeWith(env, chosen)
	s.sub.active.Store(true)
	return chosen, ""
}

// childParams are the params of c as c.to gets them; the one place that writes requests to a
// server (sendToServer) asks it. A legacy child gets them unchanged. A modern child's every
// request carries the envelope: a request that has one already (a modern client's, or a
// retry of fulfil's) passes byte for byte; any other (a legacy client's, or the aggregator's
// own) gets it, built from the client's initialize, with the level of its last
// logging/setLevel ("If absent, the server MUST NOT send any notifications/message ... for
// this request", schema.ts RequestMetaObject).
func (a *Aggregator) childParams(c *call, params [][]byte) [][]byte {
	s := c.to
	if s.era == legacy {
		// The legacy path: nothing added, nothing allocated.
		return params
	}
	p := slices.Concat(params...)
	if len(p) == 0 || string(p) == "null" {
		p = []byte(`{}`)
	}
	ms, me, hasMeta := rawjson.Member(p, "_meta")
	if !hasMeta || !rawjson.Has(p[ms:me], metaProtocolVersion) {
		env := s.envelope
		if c.req != nil {
			if level := a.setup.logLevel(); level != "" {
				env += `,"` + metaLogLevel + `":` + strconv.Quote(level)
			}
		}
		if hasMeta && p[ms] == '{' {
			p = rawjson.Replace(p, ms, me, rawjson.Prepend(p[ms:me], env))
		} else {
			p = rawjson.Prepend(p, `"_meta":{`+env+`}`)
		}
		if c.req != nil && c.mrtr == nil && inputMethods[c.method] {
			if cs := a.session.Load(); cs != nil && cs.era == legacy {
				c.mrtr = &inputChain{params: p, cancel: make(chan struct{})}
			}
		}
	}
	return [][]byte{p}
}

// withClient reports whether the servers are started for a client (check has none).
func (a *Aggregator) withClient() bool {
	a.roster.mu.Lock()
	defer a.roster.mu.Unlock()
	return a.roster.started
}

// logLevel is the level of the client's last logging/setLevel; "" before any.
func (cs *clientSetup) logLevel() string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	level, _ := rawjson.StringMember(cs.level, "level")
	return level
}

// The listen of a modern child. "The server MUST NOT send notification types the client has
// not explicitly requested" (basic/patterns/subscriptions.mdx): the aggregator asks each modern
// child for the list changes its capabilities announce, and for the resources the client
// subscribed to, on one subscriptions/listen, a request that stays open. It is a standing
// call: a drain does not wait for it (table.go), and no timeout applies to it. What arrives
// tagged with its ID enters the legacy path (readServer), untagged: the core takes a modern
// child's notifications/tools/list_changed as it takes a legacy one's.
//
// A change of the client's subscriptions re-opens the listen with the new set. The go-sdk's
// server ends the list subscriptions of every listen of a connection when any one of them
// ends (docs/protocol-eras.md §6), so the old listen is ended first, and its end awaited,
// before the new one is opened; the lists are read again after, for changes meanwhile.

// childListen is the listen of a modern child.
type childListen struct {
	active atomic.Bool // a modern child: its notifications are looked at for their listen

	reopen sync.Mutex // one (re-)opening at a time
	mu     sync.Mutex
	cur    *listenCall // the open listen; nil when none
}

// listenCall is one subscriptions/listen request.
type listenCall struct {
	c      *call
	ack    chan struct{} // closed by the acknowledgement
	agreed struct {
		ResourceSubscriptions []string `json:"resourceSubscriptions"`
	}
	ended     chan struct{} // closed once it is answered, or its server went down
	endOnce   sync.Once
	endResult json.RawMessage // its error, when it ended with one
}

func (l *listenCall) end(errObj json.RawMessage) {
	l.endOnce.Do(func() { l.endResult = errObj; close(l.ended) })
}

// listenParams are the params of the listen of s for the resource URIs uris; empty when s
// announces nothing worth listening to.
func listenParams(s *server, uris []string) json.RawMessage {
	n := map[string]any{}
	for _, k := range []struct{ capability, field string }{
		{"tools", "toolsListChanged"}, {"prompts", "promptsListChanged"}, {"resources", "resourcesListChanged"},
	} {
		if rawjson.Has(s.caps[k.capability], "listChanged") {
			var c struct {
				ListChanged bool `json:"listChanged"`
			}
			if json.Unmarshal(s.caps[k.capability], &c) == nil && c.ListChanged {
				n[k.field] = true
			}
		}
	}
	if len(uris) > 0 {
		n["resourceSubscriptions"] = uris
	}
	if len(n) == 0 {
		return nil
	}
	return marshal(map[string]any{"notifications": n})
}

// subscribedURIs are the URIs the client subscribed to on the key of s.
func (a *Aggregator) subscribedURIs(s *server) []string {
	a.setup.mu.Lock()
	defer a.setup.mu.Unlock()
	var uris []string
	for uri, key := range a.setup.subs {
		if key == s.key {
			uris = append(uris, uri)
		}
	}
	sort.Strings(uris)
	return uris
}

// listenAt (re-)opens the listen of s, a modern child, for its list changes and the URIs the
// client subscribed to on its key, and waits for its acknowledgement; it returns the URIs the
// child accepted. An old listen is ended first (see childListen).
func (a *Aggregator) listenAt(ctx context.Context, s *server) ([]string, error) {
	l := &s.sub
	l.reopen.Lock()
	defer l.reopen.Unlock()
	l.mu.Lock()
	old := l.cur
	l.cur = nil
	l.mu.Unlock()
	if old != nil {
		s.conn.Send(nil, cancelled(old.c.toID, "mcp-simple-aggregator listens again with other subscriptions")...)
		wait, cancel := context.WithTimeout(ctx, min(a.opts.ProbeTimeout, a.opts.StartupTimeout))
		select {
		case <-old.ended: // the go-sdk answers a cancelled listen once it let go of it
		case <-wait.Done(): // others say nothing more (basic/patterns/subscriptions.mdx)
		}
		cancel()
		a.inflight.take(old.c)
	}
	params := listenParams(s, a.subscribedURIs(s))
	if params == nil {
		return nil, nil
	}
	lc := &listenCall{ack: make(chan struct{}), ended: make(chan struct{})}
	lc.c = &call{to: s, method: "subscriptions/listen", doing: "listening for changes", standing: true,
		done: func(_, errObj json.RawMessage) { lc.end(errObj) }}
	// Held across the send: the acknowledgement, read on another goroutine, finds it.
	l.mu.Lock()
	res := a.sendToServer(lc.c, nil, params)
	if res == addOK {
		l.cur = lc
	}
	l.mu.Unlock()
	if res != addOK {
		return nil, fmt.Errorf("server %q is not serving", s.key)
	}
	select {
	case <-lc.ack:
		return lc.agreed.ResourceSubscriptions, nil
	case <-lc.ended:
		if lc.endResult != nil {
			return nil, fmt.Errorf("subscriptions/listen failed: %s", lc.endResult)
		}
		return nil, errors.New("subscriptions/listen ended before its acknowledgement")
	case <-ctx.Done():
		return nil, fmt.Errorf("no acknowledgement of subscriptions/listen: %w", ctx.Err())
	}
}

// listenNote looks at a notification of s, a modern child: one tagged with the ID of its
// listen loses the tag and goes on to the legacy path (false); the acknowledgement of the
// listen, and anything of a listen no longer open, end here (true).
func (a *Aggregator) listenNote(s *server, m *jsonrpc.Request) bool {
	ms, me, ok := rawjson.Member(m.Params, "_meta")
	if !ok {
		return false
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(m.Params[ms:me], &meta) != nil || meta[metaSubscriptionID] == nil {
		return false
	}
	id, _ := rawjson.Decode(meta[metaSubscriptionID])
	l := &s.sub
	l.mu.Lock()
	cur := l.cur
	l.mu.Unlock()
	if cur == nil || id != cur.c.toID {
		s.log.Debug("dropped a notification of a listen no longer open", "method", m.Method, "subscription", string(meta[metaSubscriptionID]))
		return true
	}
	if m.Method == "notifications/subscriptions/acknowledged" {
		var p struct {
			Notifications json.RawMessage `json:"notifications"`
		}
		_ = json.Unmarshal(m.Params, &p)
		_ = json.Unmarshal(p.Notifications, &cur.agreed)
		s.log.Debug("listening", "subscription", id, "agreed", string(p.Notifications))
		select {
		case <-cur.ack:
		default:
			close(cur.ack)
		}
		return true
	}
	delete(meta, metaSubscriptionID)
	if len(meta) > 0 {
		m.Params = rawjson.Replace(m.Params, ms, me, marshal(meta))
		return false
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(m.Params, &p) == nil {
		delete(p, "_meta")
		m.Params = marshal(p)
	}
	return false
}

// subscribeModern answers the client's resources/subscribe or unsubscribe of uri, owned by s,
// a modern child, which has no such requests (the client's subscriptions were updated
// already): see subscribeOnListen.
func (a *Aggregator) subscribeModern(req *jsonrpc.Request, s *server, uri string) {
	ctx, cancel := context.WithTimeout(a.closingCtx, a.opts.StartupTimeout)
	defer cancel()
	if err := a.subscribeOnListen(ctx, s, uri, req.Method); err != nil {
		a.answerClient(req.ID, nil, err)
		return
	}
	a.answerClient(req.ID, json.RawMessage(`{}`), nil)
}

// subscribeOnListen makes the listen of s, a modern child, carry the client's subscriptions
// after method (resources/subscribe or unsubscribe) of uri was noted in a.setup: the listen
// is opened again with the new set of URIs, and the lists are read again for changes while
// none was open. A subscription the child did not acknowledge is taken back, and the error
// (an encoded JSON-RPC error) says why.
func (a *Aggregator) subscribeOnListen(ctx context.Context, s *server, uri, method string) json.RawMessage {
	accepted, err := a.listenAt(ctx, s)
	go a.refresh(s, allKinds...) // changes while no listen was open
	switch {
	case err != nil:
		if method == "resources/subscribe" {
			a.setup.subscribed("resources/unsubscribe", uri, s.key)
		}
		return rpcError(jsonrpc.CodeInternalError, nil, "Internal error: server %q (protocol %s) could not take the subscription: %v", s.key, s.protocol, err)
	case method == "resources/subscribe" && !slices.Contains(accepted, uri):
		a.setup.subscribed("resources/unsubscribe", uri, s.key)
		return invalidParams("server %q did not accept the subscription to %q (its acknowledgement of subscriptions/listen does not list it; does it offer resources.subscribe?)", s.key, uri)
	}
	return nil
}

// Multi round-trip requests for a legacy client (basic/patterns/mrtr.mdx). A modern child
// answers tools/call, prompts/get or resources/read with input_required when it needs the
// client's input; a legacy client knows nothing of it, and must see one request and one
// result. The aggregator asks the client each input request as the server-to-client request
// it was in the legacy era (with the checks of toclient.go), and retries the child's request
// with the answers: "same method and original params + inputResponses + requestState", a new
// ID, as long as the child asks, at most maxInputRounds times. A retry is a call like the
// first (the client's cancellation and progress find it); progress that does not increase
// across the legs is dropped ("progress MUST increase").

// inputChain is what the legs of one request of a legacy client to a modern child share.
type inputChain struct {
	params []byte // the params of the first leg, as the child got them

	cancel     chan struct{} // closed when the client cancels its request while it is asked for input
	cancelOnce sync.Once

	mu       sync.Mutex
	rounds   int
	progress float64 // the last progress passed to the client
	seen     bool
}

// cancelInput deals with the client's cancellation of its request id, which is not in flight
// to a server: when it waits for the client's input (fulfil), the input requests are cancelled
// at the client, and the request is not retried. It reports whether it was such a request.
func (a *Aggregator) cancelInput(id jsonrpc.ID) bool {
	v, ok := a.inputs.Load(id)
	if !ok {
		return false
	}
	ch := v.(*inputChain)
	ch.cancelOnce.Do(func() { close(ch.cancel) })
	return true
}

// advance reports whether the progress notification params of a leg may reach the client:
// its progress is greater than any before.
func (ch *inputChain) advance(params json.RawMessage) bool {
	var p struct {
		Progress float64 `json:"progress"`
	}
	if json.Unmarshal(params, &p) != nil {
		return false
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.seen && p.Progress <= ch.progress {
		return false
	}
	ch.progress, ch.seen = p.Progress, true
	return true
}

// carryInput takes the answer of a leg c of a legacy client's request to s, a modern child,
// when it is input_required: the rounds go on elsewhere (fulfil), and it reports true.
func (a *Aggregator) carryInput(c *call, s *server, result json.RawMessage) bool {
	if c.mrtr == nil {
		return false
	}
	if rt, _ := rawjson.StringMember(result, "resultType"); rt != "input_required" {
		return false
	}
	go a.fulfil(c, s, result)
	return true
}

// fulfil carries one input_required result of s for the leg c: the client is asked every input
// request, then the request is retried with the answers.
func (a *Aggregator) fulfil(c *call, s *server, result json.RawMessage) {
	ch := c.mrtr
	var ir struct {
		InputRequests map[string]struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		} `json:"inputRequests"`
		RequestState *string `json:"requestState"`
	}
	if err := json.Unmarshal(result, &ir); err != nil {
		a.answerClient(c.fromID, nil, rpcError(jsonrpc.CodeInternalError, nil, "Internal error: server %q answered %s with a malformed input_required result: %v", s.key, c.what(), err))
		return
	}
	ch.mu.Lock()
	ch.rounds++
	rounds := ch.rounds
	ch.mu.Unlock()
	if rounds > maxInputRounds {
		a.answerClient(c.fromID, nil, rpcError(jsonrpc.CodeInternalError, nil, "Internal error: server %q asked for input more than %d times while %s; mcp-simple-aggregator gave up", s.key, maxInputRounds, c.what()))
		return
	}
	a.inputs.Store(c.fromID, ch) // the client's cancellation finds it meanwhile (cancelInput)
	defer a.inputs.Delete(c.fromID)
	keys := make([]string, 0, len(ir.InputRequests))
	for k := range ir.InputRequests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	responses := make(map[string]json.RawMessage, len(keys))
	for _, key := range keys {
		in := ir.InputRequests[key]
		capability, ok := serverRequests[in.Method]
		if !ok {
			a.answerClient(c.fromID, nil, rpcError(jsonrpc.CodeInternalError, nil, "Internal error: server %q asked for input by %q while %s, which is not an input request (elicitation/create, sampling/createMessage, roots/list)", s.key, in.Method, c.what()))
			return
		}
		if errObj := a.clientRefuses(in.Method, in.Params); errObj != nil {
			var e jsonrpc.Error
			_ = json.Unmarshal(errObj, &e)
			a.answerClient(c.fromID, nil, rpcError(e.Code, nil, "server %q needs %s (the %q capability) while %s: %s", s.key, in.Method, capability, c.what(), e.Message))
			return
		}
		res, errObj, end := a.askClient(ch, s, in.Method, in.Params)
		switch end {
		case askCancelled:
			return // the client no longer waits
		case askServerGone:
			a.answerClient(c.fromID, nil, serverGone(c, s.key, "went down", ""))
			return
		}
		if errObj != nil {
			a.answerClient(c.fromID, nil, rpcError(jsonrpc.CodeInternalError, errObj, "Internal error: %s answered the %s of server %q with an error (while %s)", a.session.Load().label(), in.Method, s.key, c.what()))
			return
		}
		responses[key] = res
	}
	params := retryParams(ch.params, responses, ir.RequestState)
	leg := &call{to: s, fromID: c.fromID, method: c.method, doing: c.doing, subject: c.subject, req: c.req, label: c.label, value: c.value, mrtr: ch, start: c.start, args: c.args}
	token := tokenOf(params)
	select {
	case <-ch.cancel:
		return
	default:
	}
	if a.sendToServer(leg, token, params) != addOK {
		a.answerClient(c.fromID, nil, serverGone(c, s.key, "stopped serving", ""))
	}
}

// retryParams are the params of a first leg with inputResponses and requestState (as given,
// byte for byte; none when the child gave none) in place of those of an earlier round.
func retryParams(first []byte, responses map[string]json.RawMessage, state *string) []byte {
	var p map[string]json.RawMessage
	_ = json.Unmarshal(first, &p)
	delete(p, "inputResponses")
	delete(p, "requestState")
	if len(responses) > 0 {
		p["inputResponses"] = marshal(responses)
	}
	if state != nil {
		p["requestState"] = marshal(*state)
	}
	return marshal(p)
}

// How an input request to the client ended.
const (
	askAnswered = iota
	askCancelled
	askServerGone
)

// askClient sends the legacy client one input request of s for the chain ch, and waits for its
// answer, or for the client to cancel its request, or for s to go away.
func (a *Aggregator) askClient(ch *inputChain, s *server, method string, params json.RawMessage) (result, errObj json.RawMessage, end int) {
	type answer struct{ result, errObj json.RawMessage }
	got := make(chan answer, 1)
	q := &call{method: method, doing: method, delivered: true, done: func(r, e json.RawMessage) { got <- answer{r, e} }}
	if _, res := a.inflight.add(q, nil); res != addOK {
		return nil, nil, askCancelled
	}
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	a.writeClient(request(q.toID, method, params))
	select {
	case ans := <-got:
		return ans.result, ans.errObj, askAnswered
	case <-ch.cancel:
		if a.inflight.take(q) {
			a.toClient(cancelled(q.toID, "the client cancelled the request that needed it"))
		}
		return nil, nil, askCancelled
	case <-s.retired:
		if a.inflight.take(q) {
			a.toClient(cancelled(q.toID, fmt.Sprintf("server %q went down", s.key)))
		}
		return nil, nil, askServerGone
	}
}
