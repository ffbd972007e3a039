package aggregator

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Why a request reaches no server. Every path that routes by name or URI (tools/call and
// prompts/get in callNamed, call_tool of --tool-search in callOwnTool, completion/complete in
// callCompletion, resources/read and (un)subscribe in callResource) refuses through refuse,
// which asks whyUnknown; and every call held for a key that does not come back is answered
// with unavailable. So each path gives the same reason in the same words, and only the form of
// the answer differs, as the protocol has it: -32602 for a tool or a prompt, -32002 for a
// resource, a tool result with isError for call_tool (the model reads it).

// refusal is why a name or a URI reaches no server.
type refusal struct {
	// why is what follows the name in the answer; "" when nothing is known but that no
	// server lists it.
	why string
	// withheld is the definition it names when it is withheld (withheld.go): its refusal is
	// audited.
	withheld *withheldDef
}

// refuse answers the client's request req for name, a tool's or a prompt's (k) or a
// resource's URI (kindResources), which reaches no server in cat, saying why (whyUnknown).
// asResult answers with a tools/call result that reports the error (call_tool), which then
// says how to find a tool's exact name when nothing else is known.
func (a *Aggregator) refuse(req *jsonrpc.Request, cat *catalog, k kind, name string, asResult bool) {
	r := a.whyUnknown(cat, k, name)
	var result, errObj json.RawMessage
	switch {
	case k == kindResources:
		errObj = resourceNotFound(name, r.why)
	case asResult:
		if r.why == "" {
			r.why = fmt.Sprintf("use %s to find a tool's exact name", searchToolName)
		}
		result = toolError("Unknown tool: %s: %s", name, r.why)
	case r.why == "":
		errObj = unknownName(kindNames[k], name)
	default:
		errObj = rpcError(jsonrpc.CodeInvalidParams, nil, "Unknown %s: %s: %s", kindNames[k], name, r.why)
	}
	if r.withheld != nil {
		a.auditRefused(req, *r.withheld, result, errObj) // before the client has its answer
	}
	a.client.answerClient(req.ID, result, errObj)
}

// whyUnknown says why the tool or prompt (k) of the name, or the resource or resource template
// of the URI (kindResources), reaches no server in cat. The first that holds: its definition is
// withheld; the tool is hidden by its server's filters; its server listed it and lists it no
// more; its server's key does not serve, or is not started (notServing); for a URI, why no
// server was chosen, naming the servers that are down (one of them might serve it).
func (a *Aggregator) whyUnknown(cat *catalog, k kind, name string) refusal {
	if w, ok := cat.withheldAs(k, name); ok {
		return refusal{why: w.callError(), withheld: &w}
	}
	if k == kindResources {
		if w, ok := cat.withheldAs(kindTemplates, name); ok {
			return refusal{why: w.callError(), withheld: &w}
		}
		_, why := cat.resourceOwner(name)
		if down := a.downServers(); len(down) > 0 {
			why += fmt.Sprintf("; servers that do not serve now might: %s (a call of one of their tools says why)", strings.Join(down, ", "))
		}
		return refusal{why: why}
	}
	if why, hidden := cat.hidden[name]; hidden && k == kindTools {
		return refusal{why: "the tool is " + why}
	}
	if key, gone := cat.gone[k][name]; gone {
		return refusal{why: fmt.Sprintf("server %q lists it no more (its list changed; ask for the list again)", key)}
	}
	return refusal{why: a.notServing(k, name)}
}

// notServing says why the server of an exposed name (its key, the separator, the name its
// server gives it) serves nothing: the key is configured and does not serve (unavailable), or
// its entry is disabled or remote (in check's words). It is "" when no key of the name is
// configured, or its key serves (or is not started yet, and starts on its first request): the
// name is not one of its server's.
func (a *Aggregator) notServing(k kind, name string) string {
	r := &a.roster
	r.mu.Lock()
	defer r.mu.Unlock()
	owns := func(key string) bool { return strings.HasPrefix(name, key+a.opts.Separator) }
	var sl *slot
	for key, s := range r.slots {
		if owns(key) && (sl == nil || len(key) > len(sl.key)) {
			sl = s
		}
	}
	if r.cfg != nil {
		for _, sk := range r.cfg.Skipped {
			if owns(sk.Key) && (sl == nil || len(sk.Key) > len(sl.key)) {
				return fmt.Sprintf("server %q is not started: %s", sk.Key, sk.Reason) // check's words
			}
		}
	}
	if sl == nil || sl.state == serving || sl.state == dormant {
		return ""
	}
	why := a.unavailable(sl)
	if sl.listed != nil {
		why += fmt.Sprintf(" (its last list did not have this %s)", kindNames[k])
	}
	return why
}

// downServers are the keys, quoted, that are configured and do not serve and have no lists in
// the catalog (they are down, or starting for the first time), in key order.
func (a *Aggregator) downServers() []string {
	r := &a.roster
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, sl := range r.sorted() {
		if sl.state != serving && sl.state != dormant && sl.listed == nil {
			out = append(out, fmt.Sprintf("%q", sl.key))
		}
	}
	return out
}

// unavailable says why the slot sl does not serve, naming its server: for a server that could
// not start, in the words of check (ServerReport.Error: the start-up's report says the same);
// for the others, in the words of the log's report of what happened to it (crashed and
// restarting, given up, down with restarts off, removed). Callers hold roster.mu.
func (a *Aggregator) unavailable(sl *slot) string {
	const again = "save the configuration file or send SIGHUP to start it again"
	fault := sl.why
	failed := sl.why == failedToStart && sl.startErr != nil
	if failed {
		fault = fmt.Sprintf("failed to start (%v)", sl.startErr)
	}
	switch {
	case a.roster.closed:
		return errShuttingDown.Error()
	case sl.state == down && sl.initial && failed:
		return startResult{cfg: sl.cfg, err: sl.startErr}.failure("could not start") // check's ServerReport.Error
	case sl.state == down && sl.gaveUp:
		if failed {
			fault = fmt.Sprintf("could not be restarted (%v)", sl.startErr) // restart's report
		}
		return a.givenUp(sl.key, fault, sl.tries)
	case sl.state == down && a.opts.MaxRestarts == 0:
		return fmt.Sprintf("server %q %s; its tools, prompts and resources are no longer available (restarts are off: --max-restarts 0); %s", sl.key, fault, again)
	case sl.state == down:
		return fmt.Sprintf("server %q %s; its tools, prompts and resources are no longer available; %s", sl.key, fault, again)
	case sl.state == waiting:
		in := max(time.Until(sl.retryAt), 0).Round(time.Millisecond)
		if in > time.Second {
			in = in.Round(time.Second)
		}
		return fmt.Sprintf("server %q %s; it is restarted in %v (try %d of %d)", sl.key, fault, in, sl.tries, a.opts.MaxRestarts) // crashed's report
	case sl.state == starting && sl.tries > 0:
		return fmt.Sprintf("server %q is being restarted (try %d of %d)", sl.key, sl.tries, a.opts.MaxRestarts)
	case sl.state == draining && sl.removing:
		return fmt.Sprintf("server %q was removed from the configuration", sl.key)
	case sl.state == draining:
		return fmt.Sprintf("server %q %s", sl.key, sl.why) // "was restarted because its configuration changed"
	case sl.state == dormant && failed:
		return fmt.Sprintf("server %q could not be started for a request: %v; its next request starts it again", sl.key, sl.startErr) // wake's report
	case sl.state == dormant:
		return fmt.Sprintf("server %q is not started; its next request starts it", sl.key)
	}
	return fmt.Sprintf("server %q is %s", sl.key, sl.state)
}
