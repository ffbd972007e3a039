package aggregator

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/toolsearch"
)

// The --tool-search mode (Options.ToolSearch). tools/list gives the aggregator's own tools
// instead of the catalog: search_tools, which finds tools by what they do and returns their
// full definitions, and call_tool and call_read_only_tool, which call one by its exposed name;
// plus the tools of the servers whose entry says "alwaysLoad": true, in full. Every other
// request, and a tools/call of an exposed name, is served as without the mode.
//
// The index is part of the catalog (catalog.search), built at the first search of each
// catalog: it follows list changes, restarts and reloads, and it holds what the filters let
// through, as the list does.

// The aggregator's own tools in the mode. Their names have no separator, so they are the
// exposed name of a server's tool only when the separator is "_" and a server is "search" or
// "call" (key "search", tool "tools"), or the bare name of one when a server names a tool so
// (another aggregator). Then the aggregator's tool keeps the name: it is what tools/list shows,
// and a direct tools/call of it gets the aggregator's tool. The server's tool is not lost: it is
// named on stderr (shadowWarnings), search_tools finds it with a note, and call_tool, which
// looks every name up in the catalog and never among the aggregator's own tools, calls it.
const (
	searchToolName   = "search_tools"
	callToolName     = "call_tool"
	callReadOnlyName = "call_read_only_tool"
)

// Bounds of a search's answer: at most maxSearchLimit tools, in at most searchBudget bytes of
// definitions (a tool that does not fit is named, not given; one asked for by its exact name
// is given whatever its size, within the message size limit).
const (
	defaultSearchLimit = 5
	maxSearchLimit     = 20
	searchBudget       = 32 << 10
)

// ownNames are the names of the aggregator's tools in the mode.
var ownNames = []string{searchToolName, callToolName, callReadOnlyName}

// The search tool's description names servers by key only, and only within keysBudget bytes:
// a line per server with a summary, as the instructions have, grew the list by about 90
// bytes a server (2,226 tokens at 70 servers). The rest are counted, and found by searching.
const keysBudget = 600

// searchState is what the mode needs of a catalog, each part built once from it when first
// needed: the list (cheap) at the first tools/list, the index at the first search.
type searchState struct {
	listOnce sync.Once
	list     json.RawMessage // the answer to tools/list
	servers  string          // a line per server: key, tool count, summary
	keys     []string        // the keys of the servers with tools
	shadowed map[string]bool // servers' tools named like the aggregator's own, by exposed name

	indexOnce sync.Once
	index     *toolsearch.Index // of the catalog's tools, in the order of catalog.order
}

// searching returns the catalog's list of the mode, building it at the first call.
func (c *catalog) searching() *searchState {
	st := &c.search
	st.listOnce.Do(func() { st.build(c) })
	return st
}

// searchIndex returns the catalog's index, building it at the first call.
func (c *catalog) searchIndex() *toolsearch.Index {
	st := &c.search
	st.indexOnce.Do(func() {
		tools := make([]toolsearch.Tool, len(c.order))
		for i, e := range c.order {
			tools[i] = toolsearch.FromDefinition(e.exposed, e.server.key, e.original, e.def)
		}
		st.index = toolsearch.New(tools)
	})
	return st.index
}

func (st *searchState) build(c *catalog) {
	counts := map[*server]int{}
	for _, e := range c.order {
		counts[e.server]++
	}
	var lines []string
	for _, s := range c.servers {
		n := counts[s]
		if n == 0 {
			continue
		}
		st.keys = append(st.keys, s.key)
		listed := ""
		if s.cfg.AlwaysLoad {
			listed = ", listed in full"
		}
		lines = append(lines, fmt.Sprintf("- %s (%d tools%s): %s", s.key, n, listed, serverSummary(s, c.order, c.silenced[s])))
	}
	st.servers = strings.Join(lines, "\n")
	st.shadowed = map[string]bool{}
	for _, name := range ownNames {
		if e, ok := c.named(kindTools, []byte(name)); ok {
			// Said at each new catalog that still has it (a list change, a reload), as
			// the user may not have seen it at the start.
			e.server.log.Warn(shadowWarning(e, name))
			st.shadowed[e.exposed] = e.exposed == name // by its exposed name, a direct call reaches it
		}
	}
	defs := ownToolDefs(keysLine(st.keys))
	for _, e := range c.order {
		// A list with two tools of one name is one that clients reject whole.
		if e.server.cfg.AlwaysLoad && !slices.Contains(ownNames, e.exposed) {
			defs = append(defs, e.def)
		}
	}
	st.list = encodeList("tools", defs)
}

// keysLine names servers for the search tool's description: their keys, as many as fit in
// keysBudget, then how many more there are.
func keysLine(keys []string) string {
	var b strings.Builder
	for i, k := range keys {
		if b.Len()+len(k) > keysBudget {
			fmt.Fprintf(&b, " and %d more", len(keys)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k)
	}
	return b.String()
}

// shadowWarning says that the server's tool e, exposed or reachable by its bare name as
// name, has the name of one of the aggregator's own tools, and how to reach it.
func shadowWarning(e entry, name string) string {
	how := "exposed as"
	if e.exposed != name {
		how = "reachable by its bare name"
	}
	return fmt.Sprintf("tool %q is %s %q, the name of the aggregator's own tool with --tool-search: "+
		"a tools/call of %q gets the aggregator's tool, and this one is reached through %s {\"name\": %q}; "+
		"to call it directly, rename the server key or choose another --separator", e.original, how, name, name, callToolName, e.exposed)
}

// serverSummary says in one line what a server is for: the first sentence of its instructions,
// or else (or when --pinned withholds them: silenced) the names of its first tools.
func serverSummary(s *server, order []entry, silenced bool) string {
	if text := strings.TrimSpace(s.instructions); text != "" && !silenced {
		line, _, _ := strings.Cut(text, "\n")
		if i := strings.Index(line, ". "); i > 0 {
			line = line[:i+1]
		}
		line = strings.TrimLeft(line, "# ")
		if len([]rune(line)) > 120 {
			line = string([]rune(line)[:117]) + "..."
		}
		if line != "" {
			return line
		}
	}
	var names []string
	for _, e := range order {
		if e.server == s && len(names) < 4 {
			names = append(names, e.original)
		}
	}
	return "tools such as " + strings.Join(names, ", ")
}

// ownToolDefs are the definitions of the aggregator's tools; servers names the servers for the
// search tool's description (keysLine).
func ownToolDefs(servers string) []json.RawMessage {
	type schema struct {
		Type       string         `json:"type"`
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	type annotations struct {
		Title           string `json:"title"`
		ReadOnlyHint    bool   `json:"readOnlyHint"`
		DestructiveHint *bool  `json:"destructiveHint,omitempty"`
		OpenWorldHint   bool   `json:"openWorldHint"`
	}
	type tool struct {
		Name        string      `json:"name"`
		Title       string      `json:"title"`
		Description string      `json:"description"`
		InputSchema schema      `json:"inputSchema"`
		Annotations annotations `json:"annotations"`
	}
	no, yes := false, true
	callArgs := map[string]any{
		"name":      map[string]string{"type": "string", "description": "The tool's exact name, as search_tools gave it"},
		"arguments": map[string]string{"type": "object", "description": "The tool's arguments, as its inputSchema says"},
	}
	defs := []tool{
		{searchToolName, "Search tools",
			"Finds the tools of the aggregator's servers by what they do, and returns their full definitions (name, description, inputSchema, annotations). " +
				"Search before calling a tool: describe the task in a few words, or give a tool's exact name; for a task of several steps, search with the whole task " +
				"or step by step. A server's key finds its tools. Call what you find with " + callToolName +
				" (or " + callReadOnlyName + " for tools marked readOnlyHint). Servers: " + servers + ".",
			schema{"object", map[string]any{
				"query":  map[string]string{"type": "string", "description": "What you want to do (\"open a pull request\", \"read a file\"), the steps of a task, or a tool's exact name"},
				"server": map[string]string{"type": "string", "description": "Only the tools of the server with this key"},
				"limit":  map[string]any{"type": "integer", "minimum": 1, "maximum": maxSearchLimit, "description": fmt.Sprintf("The most tools to return (default %d)", defaultSearchLimit)},
			}, []string{"query"}},
			annotations{"Search tools", true, nil, false}},
		{callToolName, "Call a tool",
			"Calls a tool found with " + searchToolName + " by its exact name, with its arguments, and returns the tool's own result. " +
				"For a tool whose annotations say readOnlyHint: true, " + callReadOnlyName + " does the same.",
			schema{"object", callArgs, []string{"name"}},
			annotations{"Call a tool", false, &yes, true}},
		{callReadOnlyName, "Call a read-only tool",
			"Calls a tool found with " + searchToolName + " whose annotations say readOnlyHint: true, by its exact name, with its arguments, and returns the tool's own result. " +
				"It refuses any other tool: call those with " + callToolName + ".",
			schema{"object", callArgs, []string{"name"}},
			annotations{"Call a read-only tool", true, &no, true}},
	}
	out := make([]json.RawMessage, len(defs))
	for i, d := range defs {
		out[i] = json.RawMessage(strings.TrimSpace(string(marshal(d))))
	}
	return out
}

// searchInstructions are the client's instructions in the mode: what servers are there, and to
// search before calling, followed by the servers' own instructions (combineInstructions), all
// within limit characters when limit > 0.
func searchInstructions(c *catalog, servers []*server, sep string, limit int) string {
	st := c.searching()
	text := fmt.Sprintf("This aggregator serves %d tools of %d servers through a search. Call %s with what you want to do to get the matching tools' definitions, "+
		"then call one with %s (or %s when it is marked readOnlyHint), giving its exact name and arguments. Search before calling: do not guess tool names. "+
		"Servers:\n%s", len(c.order), len(st.keys), searchToolName, callToolName, callReadOnlyName, st.servers)
	if limit > 0 && length(text) > limit {
		return cut(text, limit)
	}
	left := 0
	if limit > 0 {
		left = max(limit-length(text)-2, 1)
	}
	if rest := combineInstructions(servers, sep, left); rest != "" && (limit == 0 || length(rest) <= left) {
		text += "\n\n" + rest
	}
	return text
}

// callOwnTool serves a tools/call of one of the aggregator's tools in the mode; it reports
// false, doing nothing, for any other name.
func (se *session) callOwnTool(req *jsonrpc.Request) bool {
	ns, ne, ms, me, ok := scanParams(req.Params, "name")
	if !ok || ns < 0 {
		return false
	}
	name, _ := rawjson.Decode(req.Params[ns:ne])
	if name != searchToolName && name != callToolName && name != callReadOnlyName {
		return false
	}
	var args json.RawMessage
	as, ae, hasArgs := rawjson.Member(req.Params, "arguments")
	if hasArgs {
		args = req.Params[as:ae]
	}
	cat := se.a.catalog.Load()
	if name == searchToolName {
		// Off the client's reader: the first search of a catalog builds its index (about
		// 12 ms for 300 tools, half a second for 10,000), and nothing else should wait for it.
		args = slices.Clone(args) // the request's bytes are not ours once this returns
		go func() { se.answerClient(req.ID, se.searchTools(cat, args), nil) }()
		return true
	}
	var p struct {
		Name *string `json:"name"`
	}
	if json.Unmarshal(args, &p) != nil || p.Name == nil {
		se.answerClient(req.ID, toolError("%s needs the arguments {\"name\": <a tool's exact name>, \"arguments\": {...}}", name), nil)
		return true
	}
	// The lookup of tools/call (callNamed), and its messages, as an error result: the
	// exposed name, or the name the server declared when only one server lists it.
	e, found := cat.named(kindTools, []byte(*p.Name))
	if !found {
		se.a.refuse(req, cat, kindTools, *p.Name, true) // unknown.go
		return true
	}
	if name == callReadOnlyName && !readOnly(e.def) {
		se.answerClient(req.ID, toolError("%s is not marked read-only (its annotations do not say readOnlyHint: true): %s refuses it; call it with %s", e.exposed, callReadOnlyName, callToolName), nil)
		return true
	}
	// The server gets the tools/call it would get if the client had called the tool by name:
	// the same params with the tool's name and the inner arguments in place of ours.
	inner := []byte("{}")
	if is, ie, ok := rawjson.Member(args, "arguments"); ok {
		inner = args[is:ie]
	}
	var parts [][]byte
	if ns < as {
		parts = [][]byte{req.Params[:ns], e.quoted, req.Params[ne:as], inner, req.Params[ae:]}
	} else {
		parts = [][]byte{req.Params[:as], inner, req.Params[ae:ns], e.quoted, req.Params[ne:]}
	}
	task := se.a.tasksCaps != nil && rawjson.Has(req.Params, "task")
	c := &call{to: e.server, doing: "calling tool %q", subject: e.original, task: task, label: "tool", value: e.exposed}
	se.forward(req, c, progressToken(req.Params, ms, me), parts...)
	return true
}

// readOnly reports whether a tool definition's annotations say readOnlyHint: true.
func readOnly(def json.RawMessage) bool {
	s, e, ok := rawjson.Member(def, "annotations")
	if !ok {
		return false
	}
	rs, re, ok := rawjson.Member(def[s:e], "readOnlyHint")
	return ok && string(def[s:e][rs:re]) == "true"
}

// searchTools answers search_tools with args: the definitions of the tools found, within the
// bounds, as the text of the result ({"tools": [...]}, with "omitted" and "note" when some did
// not fit, and a "hint" when none matched).
func (se *session) searchTools(cat *catalog, args json.RawMessage) json.RawMessage {
	var p struct {
		Query  *string `json:"query"`
		Server string  `json:"server"`
		Limit  int     `json:"limit"`
	}
	if err := json.Unmarshal(args, &p); err != nil || p.Query == nil {
		return toolError("%s needs the arguments {\"query\": \"what you want to do\"} (and optionally \"server\" and \"limit\")", searchToolName)
	}
	st := cat.searching()
	if p.Server != "" && !slices.Contains(st.keys, p.Server) {
		return toolError("There is no server %q with tools; the servers are: %s", p.Server, strings.Join(st.keys, ", "))
	}
	limit := p.Limit
	if limit <= 0 {
		limit = defaultSearchLimit
	}
	limit = min(limit, maxSearchLimit)
	hits := cat.searchIndex().Search(*p.Query, toolsearch.Options{Server: p.Server, Limit: limit})
	var b strings.Builder
	b.WriteString(`{"tools":[`)
	var omitted, shadowed []string
	n := 0
	for i, h := range hits {
		e := cat.order[h.Tool]
		q := strings.TrimSpace(*p.Query)
		exact := i == 0 && (strings.EqualFold(q, e.exposed) || strings.EqualFold(q, e.original))
		if !exact && b.Len()+len(e.def) > searchBudget {
			omitted = append(omitted, e.exposed)
			continue
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.Write(e.def)
		n++
		if st.shadowed[e.exposed] {
			shadowed = append(shadowed, e.exposed)
		}
	}
	b.WriteByte(']')
	var notes []string
	switch {
	case len(hits) == 0:
		fmt.Fprintf(&b, `,"hint":%s`, marshalString(fmt.Sprintf("No tool matches any word of this query. Search again with other words: what the tool acts on (a file, an issue, a page, a message) and what it does; a server's key narrows the search (servers: %s).", strings.Join(st.keys, ", "))))
	case len(omitted) > 0:
		q, _ := json.Marshal(omitted)
		fmt.Fprintf(&b, `,"omitted":%s`, q)
		notes = append(notes, fmt.Sprintf("The omitted tools matched too but their definitions did not fit in this answer (%d KB at most): search for each by its exact name to get its definition.", searchBudget>>10))
	}
	for _, name := range shadowed {
		notes = append(notes, fmt.Sprintf("%s has the name of the aggregator's own tool: call it with %s {\"name\": %q, \"arguments\": {...}}, not directly.", name, callToolName, name))
	}
	if len(notes) > 0 {
		fmt.Fprintf(&b, `,"note":%s`, marshalString(strings.Join(notes, " ")))
	}
	b.WriteByte('}')
	return marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": b.String()}}})
}

// toolError is a tools/call result that reports a failure to the model (isError), as the
// MCP spec asks for errors the model can act on.
func toolError(format string, args ...any) json.RawMessage {
	return marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": fmt.Sprintf(format, args...)}}, "isError": true})
}

func marshalString(s string) string { return strings.TrimSpace(string(marshal(s))) }
