package aggregator

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/audit"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/mcpschema"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/trust"
)

// Definitions that the client would reject are withheld. The TypeScript SDK clients (and so
// Claude Code, Claude Desktop, Gemini CLI, the Inspector) reject a whole tools/list when one
// tool breaks the MCP schema ("Invalid result for tools/list: tools.1.inputSchema.type:
// expected object"); through the aggregator that would cost every server's tools. So every
// definition a server lists is checked against the schema of the client's era
// (internal/mcpschema, which follows those clients where they differ from the specification's
// schema); one that fails is left out of the lists, named once on stderr and to the client,
// and a call to it gets an error that says why. Everything else passes byte for byte.
//
// With --pinned, a definition that differs from the lock file is withheld the same way, for
// that reason (pinned.go): one mechanism, two reasons.

// withheldDef is one definition a server lists that is not served: the client's era rejects
// it, or (--pinned) it differs from the lock.
type withheldDef struct {
	server *server
	// kind is its list, or kindInstructions for the server's instructions (--pinned).
	kind kind
	// name is what it is known by in messages: the tool's or prompt's name, the resource's
	// URI, the template's URI template; "" when it has none that is a string.
	name string
	// index is its place in the server's list (from 0), for a definition without a name.
	index int
	// The reason, one of the two: the rules of the MCP schema it breaks, or how it differs
	// from the lock.
	violations []mcpschema.Violation
	difference *trust.Difference
}

// kindInstructions stands for a server's instructions in a withheldDef: --pinned withholds
// them when they differ from the lock. They are no list: screen's result has them after the
// lists, at index 0.
const kindInstructions = numKinds

// kindNames name the kinds in messages.
var kindNames = [numKinds + 1]string{kindTools: "tool", kindPrompts: "prompt", kindResources: "resource", kindTemplates: "resource template",
	kindInstructions: "instructions"}

// schemaKinds are the kinds as mcpschema knows them.
var schemaKinds = [numKinds]mcpschema.Kind{kindTools: mcpschema.Tool, kindPrompts: mcpschema.Prompt, kindResources: mcpschema.Resource, kindTemplates: mcpschema.ResourceTemplate}

// identity is the member that names each kind.
var identity = [numKinds]string{kindTools: "name", kindPrompts: "name", kindResources: "uri", kindTemplates: "uriTemplate"}

// what names the definition: `tool "plain"`, `tool #3 of the list`, `the instructions`.
func (w withheldDef) what() string {
	switch {
	case w.kind == kindInstructions:
		return "the instructions"
	case w.name == "":
		return fmt.Sprintf("%s #%d of the list", kindNames[w.kind], w.index+1)
	}
	return fmt.Sprintf("%s %q", kindNames[w.kind], w.name)
}

// reason says why it is withheld, without naming it: the rule of the MCP schema it breaks
// (the first, by pointer) and how many more, or how it differs from the lock (`differs from
// the lock: description changed`).
func (w withheldDef) reason() string {
	if w.difference != nil {
		return w.difference.Summary()
	}
	msg := w.violations[0].Message
	if n := len(w.violations) - 1; n == 1 {
		msg += " (and 1 more problem)"
	} else if n > 1 {
		msg += fmt.Sprintf(" (and %d more problems)", n)
	}
	return msg
}

// why is the reason as messages give it; for a difference from the lock, with how to accept
// it: `it differs from the lock: description changed; to serve it, run mcp-simple-aggregator
// pin --config c.json --server gh`.
func (w withheldDef) why() string {
	if w.difference == nil {
		return w.reason()
	}
	subject, object := "it", "it"
	if w.kind == kindInstructions {
		subject, object = "they", "them"
	}
	return fmt.Sprintf("%s %s; to serve %s, run %s", subject, w.reason(), object, pinCommand(w.server.pins.config, w.server.key))
}

// String is the line that names it on stderr, to the client and in check:
// `server "raw": tool "plain" is withheld: /inputSchema/type is missing; the MCP schema requires "object"`,
// `server "gh": tool "x" is withheld (--pinned): it differs from the lock: description changed; to serve it, run ...`.
func (w withheldDef) String() string {
	verb := "is withheld"
	if w.kind == kindInstructions {
		verb = "are withheld"
	}
	if w.difference != nil {
		verb += " (--pinned)"
	}
	return fmt.Sprintf("server %q: %s %s: %s", w.server.key, w.what(), verb, w.why())
}

// callError is the error message for a request that names the withheld definition (by its
// exposed name, or its URI).
func (w withheldDef) callError() string {
	if w.difference != nil {
		return fmt.Sprintf("server %q lists this %s, but it is withheld because it does not match the lock file %s (--pinned): %s",
			w.server.key, kindNames[w.kind], w.server.pins.path, w.why())
	}
	return fmt.Sprintf("server %q lists this %s, but it is withheld because clients would reject the whole list over its definition: %s",
		w.server.key, kindNames[w.kind], w.why())
}

// screen checks the lists of s against the schema of era e and, with --pinned, against the
// lock, and returns the definitions it withholds, by kind and place in its list; the
// instructions, when the lock withholds them, at [kindInstructions][0]. The schema's reason
// comes first: a definition that breaks it is not served whatever the lock says. Tools that
// its filters hide are not looked at: they are not served anyway. Callers hold roster.mu
// (s.lists, s.filter) or own s.
func screen(s *server, e era.Era) [numKinds + 1]map[int]withheldDef {
	var out [numKinds + 1]map[int]withheldDef
	add := func(w withheldDef) {
		if out[w.kind] == nil {
			out[w.kind] = map[int]withheldDef{}
		}
		out[w.kind][w.index] = w
	}
	unpinned := s.unpinned()
	for k := range numKinds {
		for i, def := range s.lists[k] {
			name, _ := stringMember(def, identity[k])
			if k == kindTools && name != "" {
				if _, hidden := s.filter.Hidden(name); hidden {
					continue
				}
			}
			w := withheldDef{server: s, kind: k, name: name, index: i, violations: s.verdict(e, k, i, def)}
			if w.violations == nil {
				d, differs := unpinned[pinKey{trust.Kind(k), i}]
				if !differs {
					continue
				}
				w.difference = &d
			}
			add(w)
		}
	}
	if d, differs := unpinned[pinKey{trust.Instructions, 0}]; differs {
		add(withheldDef{server: s, kind: kindInstructions, difference: &d})
	}
	return out
}

// withhold records w in the catalog.
func (c *catalog) withhold(w withheldDef) {
	c.withheld = append(c.withheld, w)
	if w.kind == kindInstructions {
		if c.silenced == nil {
			c.silenced = map[*server]bool{}
		}
		c.silenced[w.server] = true
		return
	}
	if w.name == "" {
		return
	}
	key := w.name // resources and templates: their URI
	if w.kind == kindTools || w.kind == kindPrompts {
		key = w.server.key + c.sep + w.name
	}
	if c.withheldBy[w.kind] == nil {
		c.withheldBy[w.kind] = map[string]withheldDef{}
	}
	if _, dup := c.withheldBy[w.kind][key]; !dup {
		c.withheldBy[w.kind][key] = w
	}
}

// withheldAs finds the withheld definition of kind k with the exposed name (tools, prompts)
// or URI (resources, templates) key.
func (c *catalog) withheldAs(k kind, key string) (withheldDef, bool) {
	w, ok := c.withheldBy[k][key]
	return w, ok
}

// withInstructions are the servers of the catalog whose instructions are given to the client:
// all but those whose instructions --pinned withholds.
func (c *catalog) withInstructions() []*server {
	if len(c.silenced) == 0 {
		return c.servers
	}
	var out []*server
	for _, s := range c.servers {
		if !c.silenced[s] {
			out = append(out, s)
		}
	}
	return out
}

// reportWithheld names each definition that cat withholds and old did not (old is nil for
// the first catalog), once: on the log, and to the client as a log message at warning level,
// so that the user learns which server is to blame; and records each in the audit log. The
// definitions of a server that has no entry in the lock (--pinned) are named in one line for
// the server. Whoever publishes a catalog calls it.
func (a *Aggregator) reportWithheld(old, cat *catalog) {
	before := map[string]bool{}
	if old != nil {
		for _, w := range old.withheld {
			before[w.String()] = true
		}
	}
	var lines []string
	var unpinned [][]withheldDef // by server, in the catalog's order
	for _, w := range cat.withheld {
		line := w.String()
		if before[line] {
			continue
		}
		a.audit.Definition(audit.Definition{Server: w.server.key, Kind: kindNames[w.kind], Name: w.name, Action: audit.DefinitionWithheld, Reason: w.reason()})
		if w.difference != nil && w.difference.Status == trust.Unpinned {
			if n := len(unpinned); n == 0 || unpinned[n-1][0].server != w.server {
				unpinned = append(unpinned, nil)
			}
			unpinned[len(unpinned)-1] = append(unpinned[len(unpinned)-1], w)
			continue
		}
		lines = append(lines, line)
	}
	for _, ws := range unpinned {
		lines = append(lines, unpinnedLine(ws))
	}
	if len(lines) == 0 {
		return
	}
	for _, line := range lines {
		a.log.Warn(line)
	}
	// Written from a goroutine of its own, in order: publish calls this holding roster.mu, and
	// a client that does not read must not hold up the catalog.
	go func() {
		for _, line := range lines {
			a.client.clientLog("warning", line)
		}
	}()
}

// unpinnedLine names in one line the definitions of a server that --pinned withholds because
// the lock has no entry for it: `server "new" has no entry in the lock file c.lock.json, so
// what it lists is withheld (--pinned): 13 tools, 1 prompt, the instructions; to serve them,
// run ...`.
func unpinnedLine(ws []withheldDef) string {
	s := ws[0].server
	var counts [numKinds + 1]int
	for _, w := range ws {
		counts[w.kind]++
	}
	var parts []string
	for k, n := range counts {
		switch {
		case n == 0:
		case k == int(kindInstructions):
			parts = append(parts, "the instructions")
		case n == 1:
			parts = append(parts, "1 "+kindNames[k])
		default:
			parts = append(parts, fmt.Sprintf("%d %ss", n, kindNames[k]))
		}
	}
	where := "has no entry in the lock file " + s.pins.path
	if s.pins.missing {
		where = "is not pinned (there is no lock file " + s.pins.path + ")"
	}
	return fmt.Sprintf("server %q %s, so what it lists is withheld (--pinned): %s; to serve them, run %s",
		s.key, where, strings.Join(parts, ", "), pinCommand(s.pins.config, s.key))
}

// verdict is what the MCP schema of era e says of the definition def, item i of the list k of s,
// checked once per list read: the catalog is built again at every change of any server, and
// checking is the costly part of it (BENCHMARKS.md). Callers hold roster.mu (or own s alone,
// as check does); whoever sets s.lists clears s.verdicts.
func (s *server) verdict(e era.Era, k kind, i int, def json.RawMessage) []mcpschema.Violation {
	key := verdictKey{e, k, i}
	if v, ok := s.verdicts[key]; ok {
		return v
	}
	v := mcpschema.Check(e, schemaKinds[k], def)
	if s.verdicts == nil {
		s.verdicts = map[verdictKey][]mcpschema.Violation{}
	}
	s.verdicts[key] = v
	return v
}

// verdictKey names one definition of a server's lists, for one era.
type verdictKey struct {
	era era.Era
	k   kind
	i   int
}
