package aggregator

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/audit"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/trust"
)

// The audit log (--audit-log, internal/audit): a line per request of the client's to a server
// once it is over, per definition withheld (reportWithheld) or changed while serving, and per
// start, stop, crash, restart and failure of a server. Each is recorded where the routing core
// decides it already: a relayed call where it is answered (answerCall, for the server's answer
// and for the aggregator's when its server went down) or cancelled (clientCancelled), a
// request refused for a withheld definition where it is refused (handlers.go), a server's
// events at the roster's transitions. The log never waits for its file, and a nil a.audit (no
// --audit-log) does nothing: the hot path pays a nil check, nothing more (forward and
// answerCall read the clock only when the debug log or the audit log wants it).

// completed records a relayed call whose answer the client got, with one reading of the clock
// for both records: a line on the debug log (--debug) and one in the audit log. answerCall
// calls it only when one of them is kept.
func (a *Aggregator) completed(c *call, result, errObj json.RawMessage) {
	took := time.Since(c.start)
	if a.debug {
		a.log.Debug(c.method, c.label, c.value, "server", c.to.key, "duration", took.Round(time.Microsecond),
			"args_bytes", c.args, "result_bytes", len(result), "error", string(errObj))
	}
	if a.audit == nil {
		return
	}
	e := a.callEvent(c, c.to.key, took)
	e.ResponseBytes = len(result) + len(errObj)
	switch {
	case errObj != nil:
		e.Outcome, e.ErrorCode = audit.Error, errorCode(errObj)
	case c.method == "tools/call" && isError(result):
		e.Outcome = audit.IsError
	default:
		e.Outcome = audit.Result
	}
	if a.audit.Bodies() {
		e.Result = result
		if errObj != nil {
			e.Result = errObj
		}
	}
	a.audit.Call(e)
}

// callEvent is the audit line of the client's request c to the server key, but for its
// outcome and answer.
func (a *Aggregator) callEvent(c *call, key string, took time.Duration) audit.Call {
	e := audit.Call{Client: a.client.clientName(), Server: key, Method: c.method, Duration: took}
	switch c.label {
	case "tool":
		e.Tool = c.subject
	case "prompt":
		e.Prompt = c.subject
	case "uri":
		e.URI = c.subject
	}
	if c.req != nil {
		e.RequestBytes = len(c.req.Params)
		if a.audit.Bodies() {
			e.Arguments = arguments(c.req.Params)
		}
	}
	return e
}

// auditCancelled records the client's cancellation of its request c to a server (sent, held
// for a server that comes back, or asking the client for input).
func (a *Aggregator) auditCancelled(c *call) {
	if a.audit == nil || c.stream != nil {
		return
	}
	key := c.key // held: the key it waits for
	if c.to != nil {
		key = c.to.key
	}
	if key == "" {
		return
	}
	var took time.Duration
	if !c.start.IsZero() {
		took = time.Since(c.start)
	}
	e := a.callEvent(c, key, took)
	e.Outcome = audit.Cancelled
	a.audit.Call(e)
}

// auditRefused records the client's request req for the definition w that is withheld, which
// the aggregator answered with errObj (or, for call_tool of --tool-search, with result, which
// reports the error to the model): the model asked for what the user did not approve (or what
// clients reject), which the log is for.
func (a *Aggregator) auditRefused(req *jsonrpc.Request, w withheldDef, result, errObj json.RawMessage) {
	if a.audit == nil {
		return
	}
	e := audit.Call{Client: a.client.clientName(), Server: w.server.key, Method: req.Method, Outcome: audit.Error, ErrorCode: errorCode(errObj),
		RequestBytes: len(req.Params), ResponseBytes: len(result) + len(errObj)}
	if errObj == nil {
		e.Outcome, e.ErrorCode = audit.IsError, 0 // call_tool's refusal: a result the model reads
	}
	switch w.kind {
	case kindTools:
		e.Tool = w.name
	case kindPrompts:
		e.Prompt = w.name
	default:
		e.URI = w.name
	}
	if a.audit.Bodies() {
		e.Arguments, e.Result = arguments(req.Params), errObj
		if errObj == nil {
			e.Result = result
		}
	}
	a.audit.Call(e)
}

// clientName is the client's clientInfo.name; "" before its session.
func (se *session) clientName() string {
	if cs := se.hello.Load(); cs != nil {
		return cs.name
	}
	return ""
}

// arguments are the arguments in a request's params, as written; nil when none.
func arguments(params json.RawMessage) json.RawMessage {
	if s, e, ok := rawjson.Member(params, "arguments"); ok {
		return params[s:e]
	}
	return nil
}

// errorCode is the code of a JSON-RPC error object.
func errorCode(errObj json.RawMessage) int {
	if s, e, ok := rawjson.Member(errObj, "code"); ok {
		n, _ := strconv.Atoi(string(errObj[s:e]))
		return n
	}
	return 0
}

// isError reports whether a tools/call result says the tool failed ("isError": true).
func isError(result json.RawMessage) bool {
	s, e, ok := rawjson.Member(result, "isError")
	return ok && string(result[s:e]) == "true"
}

// The server events. Each is recorded where the roster decides it, in the words the log uses
// for it (never an env value or an argument).

// auditServed records that the process s of the slot sl serves: its key's start, or a restart
// after a crash (the slot counts tries since it last served for a while). Callers hold
// roster.mu.
func (a *Aggregator) auditServed(sl *slot, s *server) {
	action := audit.ServerStart
	if sl.tries > 0 {
		action = audit.ServerRestart
	}
	a.audit.Server(audit.Server{Server: s.key, Action: action, PID: s.proc.PID()})
}

// auditCrashed records that the serving process s went down (why), and when it is not
// restarted because its restarts are used up, that its key failed.
func (a *Aggregator) auditCrashed(s *server, why string, next state, tries int) {
	a.audit.Server(audit.Server{Server: s.key, Action: audit.ServerCrash, PID: s.proc.PID(), Detail: why})
	if next == down && a.opts.MaxRestarts > 0 {
		a.audit.Server(audit.Server{Server: s.key, Action: audit.ServerFail, Detail: "given up after " + strconv.Itoa(tries) + " restarts in a row"})
	}
}

// auditFailed records that a start of the server key failed: at the start-up, a restart's
// try or a reload; err's first line says why.
func (a *Aggregator) auditFailed(key string, err error) {
	if a.audit == nil {
		return
	}
	detail, _, _ := strings.Cut(err.Error(), "\n")
	a.audit.Server(audit.Server{Server: key, Action: audit.ServerFail, Detail: strings.TrimSuffix(detail, "; its last stderr lines:")})
}

// auditStopped records that the aggregator stopped the serving process s (a reload, the end).
func (a *Aggregator) auditStopped(s *server, why string) {
	a.audit.Server(audit.Server{Server: s.key, Action: audit.ServerStop, PID: s.proc.PID(), Detail: why})
}

// beforeChange is what s tells the model before its lists change, or before another process
// of its key serves, for auditChanged; nil when nothing is to be compared: without an audit
// log, and with --pinned, where the lock withholds what changed and reportWithheld records
// that. Callers hold roster.mu.
func (a *Aggregator) beforeChange(s *server) *trust.Server {
	if a.audit == nil || a.pins != nil || s == nil {
		return nil
	}
	return s.trusted()
}

// auditChanged records each definition that s lists now changed from what it told the model
// before (beforeChange): a server that changes a definition while serving, by a list change or
// in a new process, which the lock would catch (the "rug pull"). Callers hold roster.mu; the
// comparison (digests: about a millisecond per server) runs after.
func (a *Aggregator) auditChanged(before *trust.Server, s *server) {
	if before == nil {
		return
	}
	after := s.trusted()
	if after == before {
		return
	}
	go func() {
		old := trust.NewLock()
		old.Set(before)
		for _, d := range old.Compare(after) {
			if d.Status != trust.Changed {
				continue
			}
			reason := "changed since it was last listed: " + strings.TrimPrefix(d.Summary(), "differs from the lock: ")
			if d.Kind == trust.Instructions {
				reason = "changed since they were last given"
			}
			a.audit.Definition(audit.Definition{Server: d.Server, Kind: d.Kind.String(), Name: d.Name, Action: audit.DefinitionChanged, Reason: reason})
		}
	}()
}
