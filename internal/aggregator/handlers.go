package aggregator

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// The handlers of the client's requests (clientRequests in fromclient.go). A request a server
// answers is forwarded as raw JSON-RPC (toserver.go): it goes to the server with only its ID
// changed (and the tool or prompt name, where there is one), and the answer comes back with
// only the ID changed. Lists are answered from the catalog.

// scanParams scans the params of a request for the members the aggregator reads: key (the name
// or URI) and _meta. It reports false when params is not an object.
func scanParams(params json.RawMessage, key string) (keyStart, keyEnd, metaStart, metaEnd int, ok bool) {
	keyStart, metaStart = -1, -1
	ok = len(params) > 0 && rawjson.Object(params, func(k []byte, start, end int) bool {
		switch string(k) {
		case key:
			keyStart, keyEnd = start, end
		case "_meta":
			metaStart, metaEnd = start, end
		}
		return true
	})
	return
}

// callNamed forwards tools/call or prompts/get to the owner of the named tool or prompt, with
// the name the server knows it by.
func (se *session) callNamed(req *jsonrpc.Request, k kind) {
	what, doing := "tool", "calling tool %q"
	if k == kindPrompts {
		what, doing = "prompt", "getting prompt %q"
	}
	ns, ne, ms, me, ok := scanParams(req.Params, "name")
	if !ok || ns < 0 {
		se.answerClient(req.ID, nil, invalidParams("%s needs params with the %s's name", req.Method, what))
		return
	}
	if k == kindTools && se.a.opts.ToolSearch && se.callOwnTool(req) {
		return
	}
	cat := se.a.catalog.Load()
	var e entry
	var name string
	if raw, plain := rawjson.String(req.Params[ns:ne]); plain {
		e, ok = cat.named(k, raw) // no allocation on the hot path
		if !ok {
			name = string(raw)
		}
	} else if name, ok = rawjson.Decode(req.Params[ns:ne]); ok {
		e, ok = cat.named(k, []byte(name))
	} else {
		se.answerClient(req.ID, nil, invalidParams("the %s name is not a string: %.80s", what, req.Params[ns:ne]))
		return
	}
	if !ok {
		se.a.refuse(req, cat, k, name, false) // unknown.go
		return
	}
	// A call that asks for a task is answered with the task: its owner is noted then. The
	// extra scan is made only when some server offers tasks.
	task := k == kindTools && se.a.tasksCaps != nil && rawjson.Has(req.Params, "task")
	c := &call{to: e.server, doing: doing, subject: e.original, task: task, label: what, value: e.exposed}
	c.parts = [3][]byte{req.Params[:ns], e.quoted, req.Params[ne:]} // in the call: no slice made for them
	se.forward(req, c, progressToken(req.Params, ms, me), c.parts[:]...)
}

// callResource forwards resources/read, subscribe and unsubscribe to the owner of the URI.
func (se *session) callResource(req *jsonrpc.Request) {
	uri, token, ok := se.stringParam(req, "uri")
	if !ok {
		return
	}
	cat := se.a.catalog.Load()
	if text, own := cat.instructions[uri]; own {
		// A server's full instructions: answered here, never routed.
		if req.Method != "resources/read" {
			se.answerClient(req.ID, json.RawMessage(`{}`), nil) // they never change
			return
		}
		result := marshal(map[string]any{"contents": []map[string]string{{"uri": uri, "mimeType": "text/markdown", "text": text}}})
		se.writeAnswer(req.ID, req.Method, era.Legacy, result, nil) // stale at once: a reload may change them
		return
	}
	if strings.HasPrefix(uri, instructionsPrefix) {
		se.answerClient(req.ID, nil, resourceNotFound(uri, "no server with this key gives instructions (the key is percent-encoded)"))
		return
	}
	_, withheld := cat.withheldAs(kindResources, uri)
	s, _ := cat.resourceOwner(uri)
	if s == nil || withheld && cat.resources[uri] == nil {
		se.a.refuse(req, cat, kindResources, uri, false) // unknown.go
		return
	}
	if req.Method != "resources/read" {
		se.a.setup.subscribed(req.Method, uri, s.key) // subscribed again on its new processes
		if s.side().subscribeFor(req, s, uri) {
			return // a modern server's listen carries it (servermodern.go)
		}
	}
	se.forward(req, &call{to: s, doing: req.Method + " of %q", subject: uri, label: "uri", value: uri}, token, req.Params)
}

// stringParam reads the string member key of a request's params, and the progress token in
// its _meta; when the member is missing or not a string, it answers the request with an error
// and reports false.
func (se *session) stringParam(req *jsonrpc.Request, key string) (value string, token []byte, ok bool) {
	vs, ve, ms, me, ok := scanParams(req.Params, key)
	if !ok || vs < 0 {
		se.answerClient(req.ID, nil, invalidParams("%s needs params with a %s", req.Method, key))
		return "", nil, false
	}
	if value, ok = rawjson.Decode(req.Params[vs:ve]); !ok {
		se.answerClient(req.ID, nil, invalidParams("the %s is not a string: %.80s", key, req.Params[vs:ve]))
		return "", nil, false
	}
	return value, progressToken(req.Params, ms, me), true
}

// callCompletion forwards completion/complete to the owner of the prompt (renamed) or of the
// resource template.
func (se *session) callCompletion(req *jsonrpc.Request) {
	rs, re, ms, me, ok := scanParams(req.Params, "ref")
	if !ok || rs < 0 {
		se.answerClient(req.ID, nil, invalidParams("completion/complete needs params with a ref"))
		return
	}
	ref := req.Params[rs:re]
	typ, _ := rawjson.StringMember(ref, "type")
	token := progressToken(req.Params, ms, me)
	cat := se.a.catalog.Load()
	switch typ {
	case "ref/prompt":
		ns, ne, found := rawjson.Member(ref, "name")
		name, ok := "", false
		if found {
			name, ok = rawjson.Decode(ref[ns:ne])
		}
		if !ok {
			se.answerClient(req.ID, nil, invalidParams("completion/complete: the ref has no prompt name"))
			return
		}
		e, found := cat.prompts[name]
		if !found {
			se.a.refuse(req, cat, kindPrompts, name, false) // unknown.go
			return
		}
		c := &call{to: e.server, doing: "completing prompt %q", subject: e.original, label: "prompt", value: name}
		se.forward(req, c, token, req.Params[:rs], ref[:ns], e.quoted, ref[ne:], req.Params[re:])
	case "ref/resource":
		uri, ok := rawjson.StringMember(ref, "uri")
		if !ok {
			se.answerClient(req.ID, nil, invalidParams("completion/complete: the ref has no uri"))
			return
		}
		s := cat.templateOwner[uri]
		if s == nil {
			s, _ = cat.resourceOwner(uri)
		}
		if s == nil {
			se.a.refuse(req, cat, kindResources, uri, false) // unknown.go
			return
		}
		se.forward(req, &call{to: s, doing: "completing %q", subject: uri, label: "uri", value: uri}, token, req.Params)
	default:
		se.answerClient(req.ID, nil, invalidParams("completion/complete: unknown ref type %q", typ))
	}
}

// callTask forwards tasks/get, tasks/result and tasks/cancel to the server that owns the task.
func (se *session) callTask(req *jsonrpc.Request) {
	if se.a.tasksCaps == nil {
		se.answerClient(req.ID, nil, methodNotFound("no server offers tasks"))
		return
	}
	se.routeTask(req)
}

// routeTask forwards a request about a task to the server that owns it.
func (se *session) routeTask(req *jsonrpc.Request) {
	id, token, ok := se.stringParam(req, "taskId")
	if !ok {
		return
	}
	s := se.a.inflight.task(id)
	if s == nil {
		se.answerClient(req.ID, nil, rpcError(jsonrpc.CodeInvalidParams, nil, "Task not found: %s (no server reported a task with this ID, or its server went down)", id))
		return
	}
	se.forward(req, &call{to: s, doing: req.Method + " of task %q", subject: id, label: "task", value: id}, token, req.Params)
}

// answerList answers a list request from the catalog: the whole list is one page.
func (se *session) answerList(req *jsonrpc.Request) {
	k := kindTools
	for i := range numKinds {
		if kinds[i].method == req.Method {
			k = i
		}
	}
	if !se.checkNoCursor(req) {
		return
	}
	if k == kindTools && se.a.opts.ToolSearch {
		cat := se.a.catalog.Load()
		se.answerClient(req.ID, era.List(cat.era, cat.searching().list, cat.hints[kindTools]), nil)
		return
	}
	se.answerClient(req.ID, se.a.catalog.Load().lists[k], nil)
}

// checkNoCursor answers a list request whose params are not an object or carry a cursor with
// an error, and reports whether the request is fine: the aggregator's lists are always one
// page, so it never handed out a cursor.
func (se *session) checkNoCursor(req *jsonrpc.Request) bool {
	p := req.Params
	if len(p) == 0 || string(p) == "null" {
		return true
	}
	cs, ce, _, _, ok := scanParams(p, "cursor")
	if !ok {
		se.answerClient(req.ID, nil, invalidParams("%s: params must be an object", req.Method))
		return false
	}
	if cs >= 0 {
		cursor, ok := rawjson.Decode(p[cs:ce])
		if !ok {
			se.answerClient(req.ID, nil, invalidParams("%s: the cursor must be a string, not %.80s", req.Method, p[cs:ce]))
			return false
		}
		if cursor != "" {
			se.answerClient(req.ID, nil, invalidParams("invalid cursor %q", cursor))
			return false
		}
	}
	return true
}

// setLevel passes logging/setLevel to every server that offers logging and answers once all
// of them have: with the empty result when any accepted it, else with the first error.
func (se *session) setLevel(req *jsonrpc.Request) {
	se.a.setup.leveled(req.Params) // set again on the servers' new processes
	var targets []*server
	for _, s := range se.a.servingServers() {
		if s.offers("logging") && s.side().setsLevel() { // a modern one takes the level per request
			targets = append(targets, s)
		}
	}
	if len(targets) == 0 {
		// Logging is offered whatever the servers do (a reload may add one that logs).
		se.answerClient(req.ID, json.RawMessage(`{}`), nil)
		return
	}
	params := req.Params
	if len(params) == 0 {
		params = json.RawMessage(`{}`)
	}
	errObjs := make([]json.RawMessage, len(targets))
	se.a.fanOut(req, targets, "setting the log level", func(i int, s *server) func(context.Context) {
		q := se.a.begin(s, req.Method, "setting the log level to %s", string(params), params)
		return func(ctx context.Context) {
			_, errObj, err := q.wait(ctx)
			if errObj == nil && err != nil { // its server closed its output: it did not take the level
				errObj = rpcError(jsonrpc.CodeInternalError, nil, "Internal error: server %q: %v", s.key, err)
			}
			errObjs[i] = errObj
		}
	}, func() (json.RawMessage, json.RawMessage) {
		for _, e := range errObjs {
			if e == nil {
				return json.RawMessage(`{}`), nil
			}
		}
		return nil, errObjs[0]
	})
}

// listTasks answers tasks/list with the tasks of every server that lists them, every page of
// each, in one page. A session hosted by the shared process gets its own tasks alone: a server
// it shares lists those of every session on its one connection, where unshared it would list
// this session's.
func (se *session) listTasks(req *jsonrpc.Request) {
	var targets []*server
	if se.a.tasksCaps != nil {
		for _, s := range se.a.servingServers() {
			if rawjson.Has(s.tasks, "list") {
				targets = append(targets, s)
			}
		}
	}
	if len(targets) == 0 {
		se.answerClient(req.ID, nil, methodNotFound("no server lists tasks"))
		return
	}
	if !se.checkNoCursor(req) {
		return
	}
	found := make([][]json.RawMessage, len(targets))
	se.a.fanOut(req, targets, "listing the tasks", func(i int, s *server) func(context.Context) {
		return func(ctx context.Context) {
			tasks, err := se.a.listAll(ctx, s, "tasks/list", "tasks", nil)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("tasks/list failed; its tasks are left out of the list", "error", err)
				}
				return
			}
			var mine []json.RawMessage
			for _, t := range tasks {
				id, _ := rawjson.StringMember(t, "taskId")
				if se.a.opts.Hosted {
					if se.a.inflight.madeBy(id, s) {
						mine = append(mine, t)
					}
					continue
				}
				se.a.inflight.setTask(id, s, false)
				mine = append(mine, t)
			}
			found[i] = mine
		}
	}, func() (json.RawMessage, json.RawMessage) {
		return encodeList("tasks", slices.Concat(found...)), nil
	})
}
