package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// What goes to a server: the one path of every request to a server, the client's relayed
// (forward) and the aggregator's own (begin, ask, call), into the in-flight table and onto the
// server's pipe (sendToServer); what waits before it is written (await, unwritten); a request
// of the client's answered from several servers' answers (fanOut); and the error of one whose
// server is gone (fail).

// tokenOf returns the progress token in the _meta of params, as written; nil when none.
func tokenOf(params json.RawMessage) []byte {
	ms, me, ok := rawjson.Member(params, "_meta")
	if !ok {
		return nil
	}
	return progressToken(params, ms, me)
}

// progressToken returns the progress token in a request's _meta, as written; nil when none.
func progressToken(params json.RawMessage, metaStart, metaEnd int) []byte {
	if metaStart < 0 {
		return nil
	}
	meta := params[metaStart:metaEnd]
	start, end, ok := rawjson.Member(meta, "progressToken")
	if !ok {
		return nil
	}
	return meta[start:end]
}

// forward sends the client's request req to c.to with the given params (in parts), under an ID
// of ours; the answer reaches the client under its own ID.
func (se *session) forward(req *jsonrpc.Request, c *call, token []byte, params ...[]byte) {
	c.fromID, c.method, c.req = req.ID, req.Method, req
	if se.a.debug || se.a.audit != nil { // for the debug log and the audit log (completed)
		c.start = time.Now()
		c.args = len(req.Params)
		if s, e, ok := rawjson.Member(req.Params, "arguments"); ok {
			c.args = e - s
		}
	}
	se.side().relay(c)
	if se.a.sendToServer(c, token, params...) != addOK {
		// Its process takes no calls (a reload drains it, or it went down): to the key's new
		// process, now or once it serves, or answered why not.
		se.a.hold(req, c.to)
	}
}

// sendToServer records c in the table and writes it to c.to, with params in parts. A server
// that cannot be written to fails c at once. When c.to does not take c (see table.add), nothing
// is sent: the aggregator's own call fails at once, the client's is the caller's to deal with
// (hold).
func (a *Aggregator) sendToServer(c *call, token []byte, params ...[]byte) addResult {
	s := c.to
	if c.req != nil {
		if ready := s.side().awaits(c); ready != nil {
			a.await(c, ready)
			return addOK
		}
	}
	params = s.side().params(c, params) // the modern envelope (servermodern.go); legacy: unchanged
	if c.req != nil && a.opts.IdleStop > 0 {
		s.lastUse.Store(time.Now().UnixNano())
	}
	fed := s.fed()
	if ps := s.turnsOf(c.method, fed); ps != nil {
		if c.turn != nil {
			c.turn.end(nil) // sent again: the turn of its first sending is over
		}
		c.turn = ps.newTurn(fed, c) // before the table has c, where a cancellation finds it
	}
	newToken, res := a.inflight.add(c, token)
	if res != addOK {
		if c.own() {
			a.fail(c, "is not serving")
		}
		return res
	}
	if setsUp(c.method) {
		var here bool
		if params, here = a.setUp(c, params); here {
			return addOK // a shared process set up so already (processsetup.go)
		}
	}
	if newToken != nil {
		params = [][]byte{withToken(slices.Concat(params...), newToken)}
	}
	// Send does not keep the client's reader waiting for a server that does not read. What is
	// relayed may be held for the rest of the client's burst; what the aggregator waits for
	// itself never is.
	held := &a.sess.toServers
	if c.own() {
		held = nil
	}
	c.agg = a
	w := pendingWrite{conn: s.conn, fed: fed, id: c.toID, method: c.method,
		failed: c, // WriteFailed
		msg:    stdio.Request(c.toID, c.method, params...)}
	if c.turn != nil {
		// Written now, or once its session's turn comes (turns.go), by whoever ends the turn
		// before it: not held for its client's burst then.
		if !c.turn.ps.takeTurn(c.turn, c, w) {
			return addOK
		}
		func() {
			defer c.turn.wrote() // whatever the write does: a cancellation waits for it
			w.write(held)
		}()
		return addOK
	}
	w.write(held)
	return addOK
}

// WriteFailed takes the failure of the write of c to its server (sendToServer): an
// aggregator's own call fails; a client's, which never reached the server, is dealt with by
// unwritten. One answered or cancelled meanwhile is left alone.
func (c *call) WriteFailed(err error) {
	a := c.agg
	if !a.inflight.take(c) {
		return
	}
	if c.req == nil {
		a.fail(c, "cannot be written to ("+err.Error()+")")
		return
	}
	c.unanswered() // it never reached the server: what it set up or its turn is taken back
	a.unwritten(c, err)
}

// await holds the client's call c in the table until ready is closed (what it waits for is
// done: its server's log level set), or for at most --probe-timeout, then dispatches the
// client's request again, which finds nothing to wait for. The client's other messages are
// read meanwhile, and its cancellation finds the call, which is then never sent.
func (a *Aggregator) await(c *call, ready <-chan struct{}) {
	key := fmt.Sprintf("\x00await %p", c.to) // the server process's: not a key of the configuration's, which names no pointer
	a.inflight.hold(c, key, a.opts.ProbeTimeout, func(c *call) { a.client.clientRequest(c.req) })
	go func() {
		<-ready
		for _, held := range a.inflight.release(key) {
			a.client.clientRequest(held.req)
		}
	}()
}

// unwritten deals with the client's request c that could not be written to its server: the
// server never saw it, so when the process died (its crash is noticed within a moment), the
// request is held for the key like one made after the crash; otherwise it fails with err. It
// waits in the table to see which (held under the process, for at most unwrittenWait), where
// the client's cancellation finds it, and then it is neither sent nor answered.
func (a *Aggregator) unwritten(c *call, err error) {
	s := c.to
	decide := func(c *call) {
		if a.serving(s.key) == s {
			a.fail(c, "cannot be written to ("+err.Error()+")")
			return
		}
		a.hold(c.req, s)
	}
	key := fmt.Sprintf("\x00unwritten %p", s) // the process's: not a key of the configuration's, which names no pointer
	a.log.Debug("a request could not be written to its server: held until it is clear whether the process ended", "method", c.method, "server", s.key, "error", err)
	a.inflight.hold(c, key, unwrittenWait, decide)
	go func() {
		select {
		case <-s.retired:
		case <-s.proc.Exited():
			select { // watch notices the exit at once
			case <-s.retired:
			case <-time.After(unwrittenWait):
			}
		case <-time.After(unwrittenWait):
			return // the hold's deadline decides
		}
		for _, held := range a.inflight.release(key) {
			decide(held)
		}
	}()
}

// unwrittenWait bounds the wait of a request that could not be written for its process's end
// to be noticed.
const unwrittenWait = time.Second

// fail answers c, a request to a server, with the error that its server is gone.
func (a *Aggregator) fail(c *call, why string) { a.failWith(c, serverGone(c, c.to.key, why, "")) }

// failWith answers c, a request to a server, with the error errObj.
func (a *Aggregator) failWith(c *call, errObj json.RawMessage) {
	c.unanswered()
	if c.own() {
		c.done(nil, errObj)
		return
	}
	a.client.answerCall(c, nil, errObj)
}

// fanOut answers the client's request req from what the aggregator asks every server in
// targets (one or more). ask is called for each, on the caller's goroutine: what it sends then
// (a.begin) reaches its server before the client's next message. The wait it returns runs on
// a goroutine of its own, with a context that the client's cancellation ends (the requests it
// waits for are then cancelled at their servers, with the client's reason), as does Close,
// and answer makes the answer from what they found once all have returned. The request is in
// the in-flight table meanwhile (stage fanning), where the client's cancellation finds it; a
// cancelled one is not answered.
func (a *Aggregator) fanOut(req *jsonrpc.Request, targets []*server, doing string, ask func(i int, s *server) (wait func(ctx context.Context)), answer func() (result, errObj json.RawMessage)) {
	ctx, stop := context.WithCancelCause(a.closingCtx)
	c := &call{fromID: req.ID, method: req.Method, doing: doing, stop: stop, start: time.Now()}
	a.inflight.keep(c, fanning)
	waits := make([]func(context.Context), len(targets))
	for i, s := range targets {
		waits[i] = ask(i, s)
	}
	go func() {
		defer stop(nil)
		var wg sync.WaitGroup
		for _, wait := range waits {
			wg.Go(func() { wait(ctx) })
		}
		wg.Wait()
		if a.inflight.take(c) {
			result, errObj := answer()
			a.client.answerClient(req.ID, result, errObj)
		}
	}()
}

// call sends a request of the aggregator's own to s and waits for its answer, or for ctx. A
// JSON-RPC error from s comes back as a *jsonrpc.Error; a server that went away, as an error
// saying so.
func (a *Aggregator) call(ctx context.Context, s *server, method, doing string, params json.RawMessage) (json.RawMessage, error) {
	result, errObj, err := a.ask(ctx, s, method, doing, "", params)
	if errObj != nil {
		return nil, errorOf(errObj)
	}
	return result, err
}

// errorOf is the JSON-RPC error object errObj as an error: a *jsonrpc.Error.
func errorOf(errObj json.RawMessage) error {
	var e jsonrpc.Error
	if json.Unmarshal(errObj, &e) != nil {
		return fmt.Errorf("%s", errObj)
	}
	return &e
}

// ask sends a request of the aggregator's own to s and waits for its answer, as it is (the
// result, or the error object: the server's, or one saying that the server went down), or for
// ctx: then the request is cancelled at s, with the reason ctx was cancelled for when it is a
// cancelReason, and err is ctx's error. doing and subject say what it does (call.doing).
func (a *Aggregator) ask(ctx context.Context, s *server, method, doing, subject string, params json.RawMessage) (result, errObj json.RawMessage, err error) {
	return a.begin(s, method, doing, subject, params).wait(ctx)
}

// asked is a request of the aggregator's own, sent (begin), whose answer wait waits for.
type asked struct {
	a  *Aggregator
	s  *server
	c  *call
	ch chan answer
}

type answer struct{ result, errObj json.RawMessage }

// begin sends a request of the aggregator's own to s: what the caller sends s afterwards
// reaches it after this request.
func (a *Aggregator) begin(s *server, method, doing, subject string, params json.RawMessage) *asked {
	q := &asked{a: a, s: s, ch: make(chan answer, 1)}
	q.c = &call{to: s, method: method, doing: doing, subject: subject, done: func(result, errObj json.RawMessage) { q.ch <- answer{result, errObj} }}
	var parts [][]byte
	if params != nil {
		parts = [][]byte{params}
	}
	var token []byte
	if a.inflight.ownTokens {
		// Params the client wrote (a fanned-out logging/setLevel, its level set again on a
		// new process) may carry its token: in an ID space the server gets one of the
		// space's (table.add). Unshared the token passes, and progress for a request of
		// the aggregator's own is dropped either way.
		token = tokenOf(params)
	}
	a.sendToServer(q.c, token, parts...)
	return q
}

// wait waits for the answer to q (see ask).
func (q *asked) wait(ctx context.Context) (result, errObj json.RawMessage, err error) {
	select {
	case ans := <-q.ch:
		return ans.result, ans.errObj, nil
	case <-q.s.readDone:
		if q.a.inflight.take(q.c) {
			q.c.unanswered()
		}
		return nil, nil, errClosed
	case <-ctx.Done():
		if q.a.inflight.take(q.c) {
			reason := "mcp-simple-aggregator gave up waiting"
			var why cancelReason
			if errors.As(context.Cause(ctx), &why) {
				reason = string(why)
			}
			q.c.cancelAtServer(func() { q.s.conn.Send(nil, stdio.Cancelled(q.c.toID, reason)...) })
			q.c.unanswered()
		}
		return nil, nil, ctx.Err()
	}
}

// cancelReason is why a request of the aggregator's own is cancelled at its server, as the
// cause of its context's end: the client's cancellation of the request it serves, with the
// client's reason.
type cancelReason string

func (r cancelReason) Error() string { return string(r) }

// errClosed is the error of a call whose server closed its standard output.
var errClosed = errors.New("the server closed its standard output")
