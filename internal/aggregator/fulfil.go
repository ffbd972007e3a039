package aggregator

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// A modern server's input_required, for a legacy client (basic/patterns/mrtr.mdx). A modern
// server answers tools/call, prompts/get or resources/read with input_required when it needs
// the client's input; a legacy client knows nothing of it, and must see one request and one
// result. The aggregator asks the client each input request as the server-to-client request it
// was in the legacy era (with the checks of clientRefuses), and retries the server's request with
// the answers: "same method and original params + inputResponses + requestState", a new ID, as
// long as the server asks, at most maxInputRounds times. Between the legs the client's request
// waits in the table (stage asking), where its cancellation finds it; a retry is a call like
// the first (the client's cancellation and progress find it); progress that does not increase
// across the legs is dropped ("progress MUST increase").

// maxInputRounds is how many input_required results of a server one request of a legacy client
// is carried through; both SDKs stop at 10 too.
const maxInputRounds = 10

// inputChain is what the legs of one request of a legacy client to a modern server share.
type inputChain struct {
	params json.RawMessage // the params of the first leg, as the server got them

	cancel     chan struct{} // closed when the client cancels its request while it is asked for input
	cancelOnce sync.Once

	mu       sync.Mutex
	rounds   int
	progress float64 // the last progress passed to the client
	seen     bool
}

// stop ends the chain: the client cancelled its request while it was asked for input.
func (ch *inputChain) stop() { ch.cancelOnce.Do(func() { close(ch.cancel) }) }

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

// fulfil carries one input_required result of s for the leg c: the client is asked every input
// request, then the request is retried with the answers.
func (se *session) fulfil(c *call, s *server, result json.RawMessage) {
	ch := c.chain
	requests, state, err := era.ReadInputRequired(result)
	if err != nil {
		se.answerClient(c.fromID, nil, rpcError(jsonrpc.CodeInternalError, nil, "Internal error: server %q answered %s with a malformed input_required result: %v", s.key, c.what(), err))
		return
	}
	ch.mu.Lock()
	ch.rounds++
	rounds := ch.rounds
	ch.mu.Unlock()
	if rounds > maxInputRounds {
		se.answerClient(c.fromID, nil, rpcError(jsonrpc.CodeInternalError, nil, "Internal error: server %q asked for input more than %d times while %s; mcp-simple-aggregator gave up", s.key, maxInputRounds, c.what()))
		return
	}
	if !se.a.inflight.ask(c) { // the client's cancellation finds it meanwhile
		return
	}
	responses, ok := se.askAll(c, s, requests)
	if !ok || !se.a.inflight.take(c) {
		return // answered already, or cancelled
	}
	params := era.RetryParams(ch.params, responses, state)
	leg := &call{to: s, fromID: c.fromID, method: c.method, doing: c.doing, subject: c.subject, req: c.req, label: c.label, value: c.value,
		chain: ch, start: c.start, args: c.args, enveloped: true}
	if se.a.sendToServer(leg, tokenOf(params), params) != addOK {
		se.answerClient(c.fromID, nil, serverGone(c, s.key, "stopped serving", ""))
	}
}

// askAll asks the client the input requests of s for c, in key order, and returns the answers
// by key; false when c was answered here (with the error that ended it) or cancelled.
func (se *session) askAll(c *call, s *server, requests map[string]era.InputRequest) (map[string]json.RawMessage, bool) {
	responses := make(map[string]json.RawMessage, len(requests))
	for _, key := range slices.Sorted(func(yield func(string) bool) {
		for k := range requests {
			if !yield(k) {
				return
			}
		}
	}) {
		in := requests[key]
		fail := func(errObj json.RawMessage) (map[string]json.RawMessage, bool) {
			if se.a.inflight.take(c) {
				se.answerClient(c.fromID, nil, errObj)
			}
			return nil, false
		}
		capability, ok := era.ServerRequests[in.Method]
		if !ok {
			return fail(rpcError(jsonrpc.CodeInternalError, nil, "Internal error: server %q asked for input by %q while %s, which is not an input request (elicitation/create, sampling/createMessage, roots/list)", s.key, in.Method, c.what()))
		}
		if errObj := se.clientRefuses(in.Method, in.Params); errObj != nil {
			var e jsonrpc.Error
			_ = json.Unmarshal(errObj, &e)
			return fail(rpcError(e.Code, nil, "server %q needs %s (the %q capability) while %s: %s", s.key, in.Method, capability, c.what(), e.Message))
		}
		res, errObj, end := se.askClient(c.chain, s, in.Method, in.Params)
		switch end {
		case askCancelled:
			return nil, false // the client no longer waits
		case askServerGone:
			return fail(serverGone(c, s.key, "went down", ""))
		}
		if errObj != nil {
			return fail(rpcError(jsonrpc.CodeInternalError, errObj, "Internal error: %s answered the %s of server %q with an error (while %s)", se.hello.Load().label(), in.Method, s.key, c.what()))
		}
		responses[key] = res
	}
	return responses, true
}

// How an input request to the client ended.
const (
	askAnswered = iota
	askCancelled
	askServerGone
)

// askClient sends the legacy client one input request of s for the chain ch, and waits for its
// answer, or for the client to cancel its request, or for s to go away.
func (se *session) askClient(ch *inputChain, s *server, method string, params json.RawMessage) (result, errObj json.RawMessage, end int) {
	type answer struct{ result, errObj json.RawMessage }
	got := make(chan answer, 1)
	q := &call{method: method, doing: method, done: func(r, e json.RawMessage) { got <- answer{r, e} }}
	if _, res := se.a.inflight.add(q, nil); res != addOK {
		return nil, nil, askCancelled
	}
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	se.writeClient(stdio.Request(q.toID, method, params))
	select {
	case ans := <-got:
		return ans.result, ans.errObj, askAnswered
	case <-ch.cancel:
		if se.a.inflight.take(q) {
			se.toClient(stdio.Cancelled(q.toID, "the client cancelled the request that needed it"))
		}
		return nil, nil, askCancelled
	case <-s.retired:
		if se.a.inflight.take(q) {
			se.toClient(stdio.Cancelled(q.toID, fmt.Sprintf("server %q went down", s.key)))
		}
		return nil, nil, askServerGone
	}
}
