package aggregator

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// What arrives from a server: one goroutine per server reads its stdout and decides each
// message here.
//
//	an answer                    to the request in flight with its ID (table.answered): the
//	                             client's, or the aggregator's own
//	a request (serverRequests)   sampling, elicitation, roots: to the client; ping: answered
//	                             here (hop by hop); anything else: Method not found
//	a notification               serverNotifications; anything else is dropped
//	a line that is not a message a few warnings; one too large fails the request it answers

// serverNotifications handle the notifications of a server; the list_changed ones are added
// from the list kinds (catalog.go).
var serverNotifications = map[string]func(a *Aggregator, s *server, m *jsonrpc.Request){
	"notifications/progress":          (*Aggregator).serverProgress,
	"notifications/message":           (*Aggregator).serverLog,
	"notifications/resources/updated": (*Aggregator).serverResourceUpdated,
	"notifications/tasks/status":      (*Aggregator).serverTaskStatus,
	"notifications/cancelled":         (*Aggregator).serverCancelled,
}

func init() {
	// One list_changed notification per list; resources/list_changed covers templates too.
	changed := map[string][]kind{}
	for k := range numKinds {
		changed[kinds[k].changed] = append(changed[kinds[k].changed], k)
	}
	for method, ks := range changed {
		serverNotifications[method] = func(a *Aggregator, s *server, _ *jsonrpc.Request) { go a.refresh(s, ks...) }
	}
}

// readServer reads the messages of s until its stdout ends.
func (a *Aggregator) readServer(s *server) {
	defer close(s.readDone)
	defer s.own.Ended() // its listen ends with its output (processlisten.go)
	defer s.conn.EndBurst()
	defer a.contain("the reading of server " + strconv.Quote(s.key) + "'s messages")
	for {
		msg, err := s.conn.Read()
		if err != nil {
			if bad := stdio.BadLine(err); bad != nil {
				a.serverBadLine(s, bad)
				continue
			}
			return
		}
		a.serverMessage(s, msg)
	}
}

// serverMessage decides what becomes of a message of s.
func (a *Aggregator) serverMessage(s *server, msg jsonrpc.Message) {
	switch m := msg.(type) {
	case *jsonrpc.Response:
		a.serverAnswer(s, m)
	case *jsonrpc.Request:
		if a.panicOn != "" && m.Method == a.panicOn {
			panic("a fault injected for " + m.Method + " (" + faultPanicVar + ")")
		}
		if m.IsCall() {
			a.serverRequest(s, m)
		} else if s.side().notification(s, m) {
			// a modern server's listen: acknowledged, or no longer open (servermodern.go)
		} else if h := serverNotifications[m.Method]; h != nil {
			h(a, s, m)
		} else {
			s.log.Debug("dropped a notification nobody handles", "method", m.Method)
		}
	}
}

// serverFeed takes the messages of a server whose process hands them over (Fed: a shared
// process's server, which one reader reads for every session), as readServer takes those of a
// process it reads, on the goroutine that read them. Its calls come one at a time.
type serverFeed struct {
	a     *Aggregator
	s     *server
	ended bool
}

// Message takes the next message of the server. A panic in its handling ends this session
// alone, as one in readServer does: the goroutine is the shared process's, serving others.
func (f *serverFeed) Message(msg jsonrpc.Message, more bool) {
	if f.ended {
		if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() {
			f.a.notTaken(f.s, r.ID) // after a fault ended the session
		}
		return
	}
	defer func() {
		if v := recover(); v != nil {
			f.a.contained("the handling of server "+strconv.Quote(f.s.key)+"'s messages", v)
			f.End()
			if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() && !f.a.inflight.holdsFrom(f.s, r.ID) {
				f.a.notTaken(f.s, r.ID) // the table never had it: endCalls does not answer it
			}
		}
	}()
	f.s.conn.Given(more)
	f.a.serverMessage(f.s, msg)
}

// Flush writes what the messages of a burst held.
func (f *serverFeed) Flush() { f.s.conn.EndBurst() }

// BadLine takes a line of the server's that the process's reader could not read.
func (f *serverFeed) BadLine(bad *stdio.BadLineError) {
	if f.ended {
		return
	}
	defer func() {
		if v := recover(); v != nil { // as in Message: the goroutine is the shared process's
			f.a.contained("the handling of server "+strconv.Quote(f.s.key)+"'s messages", v)
			f.End()
		}
	}()
	f.a.serverBadLine(f.s, bad)
}

// OwnsTask reports whether a request of the session's created the server's task id (a
// tasks/list names the tasks of every session of a shared server).
func (f *serverFeed) OwnsTask(id string) bool { return f.a.inflight.madeBy(id, f.s) }

// End takes the end of the server's output.
func (f *serverFeed) End() {
	f.s.conn.EndBurst()
	if !f.ended {
		f.ended = true
		close(f.s.readDone)
	}
}

// bigAnswer is the size of an answer after which the aggregator returns memory at once.
const bigAnswer = 4 << 20

// serverAnswer takes a server's answer to a request in flight to it.
func (a *Aggregator) serverAnswer(s *server, resp *jsonrpc.Response) {
	id, _ := resp.ID.Raw().(string)
	c := a.inflight.answered(s, id)
	if c == nil {
		if s.own != nil && s.own.Answered(id, resp.Result, stdio.ErrorJSON(resp.Error)) {
			return // of the process's setup (its listen; a shared process's is routed to its own: ProcessSessions.Route)
		}
		s.log.Debug("dropped an answer to no request in flight (cancelled, answered twice, or made up)", "id", resp.ID.Raw())
		return
	}
	a.complete(c, s, resp.Result, stdio.ErrorJSON(resp.Error))
	if len(resp.Result) >= bigAnswer {
		// The answer is garbage now. Left to the pacer, the next big answer is allocated
		// before this one is collected, and the peak memory doubles; a collection alone
		// (runtime.GC) still left the freed line resident, and the next one, which did not fit
		// among the freed read chunks, was placed beside it: the peak was 3.1x or 4.1x the
		// payload by run. Returning the free memory to the OS as well makes it 3.0x every
		// run, for about a millisecond per big answer (BENCHMARKS.md).
		debug.FreeOSMemory()
	}
}

// complete hands the answer to c (from s, its receiver) to whoever waits for it.
func (a *Aggregator) complete(c *call, s *server, result, errObj json.RawMessage) {
	if c.setupAnswered != nil {
		c.setupAnswered(errObj == nil) // processsetup.go
	}
	if c.turn != nil {
		c.turn.end(nil) // turns.go
	}
	if c.task && errObj == nil {
		a.inflight.setTask(era.TaskID(result), s, true)
	}
	if c.own() {
		c.done(result, errObj)
		return
	}
	if errObj == nil && s.side().carry(c, s, result) {
		return // a legacy client's request to a modern server needs input (fulfil.go)
	}
	a.client.answerCall(c, result, errObj) // with --debug or --audit-log, recorded there
}

// serverBadLine deals with a line of s that is not a JSON-RPC message.
func (a *Aggregator) serverBadLine(s *server, bad *stdio.BadLineError) {
	if errors.Is(bad, stdio.ErrTooLarge) {
		// Fail the request it answers rather than leave it waiting forever.
		s.log.Error(fmt.Sprintf("a message from the server is larger than %d bytes and was dropped (see --max-message-size)", a.opts.MaxMessageSize))
		if id, ok := stdio.TooLargeID(bad); ok {
			sid, _ := id.Raw().(string)
			if c := a.inflight.answered(s, sid); c != nil {
				a.complete(c, s, nil, rpcError(jsonrpc.CodeInternalError, nil,
					"Internal error: the answer of server %q is larger than %d bytes; start mcp-simple-aggregator with a larger --max-message-size", s.key, a.opts.MaxMessageSize))
			}
		}
		return
	}
	// Reported a few times, not for every line of a server that logs to stdout.
	switch n := s.badLines.Add(1); {
	case n <= maxBadLineWarnings:
		s.log.Warn("ignored a line on stdout that is not a JSON-RPC message (servers must write only MCP messages to stdout; logs belong on stderr)",
			"error", bad.Err, "line", excerpt(bad.Line))
	case n == maxBadLineWarnings+1:
		s.log.Warn("more lines on stdout that are not JSON-RPC messages are ignored without warning")
	}
}

// serverRequest takes a request of s: to the client, or answered here.
func (a *Aggregator) serverRequest(s *server, m *jsonrpc.Request) {
	if m.Method == "ping" {
		s.conn.Send(nil, stdio.Response(stdio.IDJSON(m.ID), json.RawMessage(`{}`), nil)...)
		return
	}
	if _, ok := era.ServerRequests[m.Method]; !ok {
		s.refuse(m.ID, methodNotFound("%s is not a request a server may send through mcp-simple-aggregator", m.Method))
		return
	}
	a.client.toClientRequest(s, m)
}

// serverProgress passes a server's progress notification to the sender of the request it is
// about, with the sender's own token; progress for a token the server was not given (or for a
// request of the aggregator's own) is dropped.
func (a *Aggregator) serverProgress(s *server, m *jsonrpc.Request) {
	start, end, ok := rawjson.Member(m.Params, "progressToken")
	var c *call
	if ok {
		c = a.inflight.progress(s, m.Params[start:end])
	}
	if c == nil || c.own() {
		s.log.Debug("dropped a progress notification for a token it was not given", "params", excerpt(m.Params))
		return
	}
	if !a.client.side().progress(c) {
		return // the client's request was answered: its token is no longer active
	}
	if c.chain != nil && !c.chain.advance(m.Params) {
		return // a later leg of a request starts its progress again (fulfil.go)
	}
	params := m.Params
	if c.fromToken != nil {
		params = rawjson.Replace(params, start, end, c.fromToken)
	}
	a.client.toClient(stdio.Notification(m.Method, params))
}

// serverLog passes a server's log message to the client, with the server's key as the logger
// when the server named none; a shared process's, when it is at the level the client asked
// for.
func (a *Aggregator) serverLog(s *server, m *jsonrpc.Request) {
	if ps, f := s.processSetup(); ps != nil {
		// A shared process logs at the level of the most verbose session: this one gets
		// those at its own.
		level, _ := rawjson.StringMember(m.Params, "level")
		if !ps.logs(f, era.LogRank(level)) {
			return
		}
	}
	if side := a.client.side(); side != nil && !side.serverLog(s, m.Params) {
		return
	}
	params := m.Params
	if !rawjson.Has(params, "logger") && rawjson.Object(params, func([]byte, int, int) bool { return true }) {
		logger, _ := json.Marshal(s.key)
		params = rawjson.Prepend(params, `"logger":`+string(logger))
	}
	a.client.toClient(stdio.Notification(m.Method, params))
}

// serverTaskStatus passes a server's notifications/tasks/status to the client, and notes who
// owns the task.
func (a *Aggregator) serverTaskStatus(s *server, m *jsonrpc.Request) {
	id, _ := rawjson.StringMember(m.Params, "taskId")
	a.inflight.setTask(id, s, false)
	if side := a.client.side(); side == nil || side.taskStatus() {
		a.client.toClient(stdio.Notification(m.Method, m.Params))
	}
}

// serverCancelled passes a server's cancellation of its request to the client; a request still
// waiting for the client to be ready is dropped from the queue (the client never sees it).
func (a *Aggregator) serverCancelled(s *server, m *jsonrpc.Request) {
	id, reason, ok := stdio.ParseCancel(m.Params)
	if !ok {
		return
	}
	if c := a.inflight.cancelled(s, id); c != nil && c.stage == sent {
		a.client.toClient(stdio.Cancelled(c.toID, reason))
	}
}

// serverResourceUpdated passes a server's notifications/resources/updated to the client (to a
// modern one on the streams that subscribed it), when the client subscribed to the resource
// (a shared process may be subscribed for another session).
func (a *Aggregator) serverResourceUpdated(s *server, m *jsonrpc.Request) {
	if ps, f := s.processSetup(); ps != nil {
		// A shared process is subscribed while any session is: this one gets the updates
		// of what it subscribed to.
		if uri, _ := rawjson.StringMember(m.Params, "uri"); !ps.wants(f, uri) {
			return
		}
	}
	if side := a.client.side(); side != nil {
		side.resourceUpdated(m.Params)
		return
	}
	a.client.toClient(stdio.Notification(m.Method, m.Params))
}
