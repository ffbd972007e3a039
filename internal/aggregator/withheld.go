package aggregator

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/mcpschema"
)

// Definitions that the client would reject are withheld. The TypeScript SDK clients (and so
// Claude Code, Claude Desktop, Gemini CLI, the Inspector) reject a whole tools/list when one
// tool breaks the MCP schema ("Invalid result for tools/list: tools.1.inputSchema.type:
// expected object"); through the aggregator that would cost every server's tools. So every
// definition a server lists is checked against the schema of the client's era
// (internal/mcpschema, which follows those clients where they differ from the specification's
// schema); one that fails is left out of the lists, named once on stderr and to the client,
// and a call to it gets an error that says why. Everything else passes byte for byte.

// withheldDef is one definition a server lists that the client's era rejects.
type withheldDef struct {
	server *server
	kind   kind
	// name is what it is known by in messages: the tool's or prompt's name, the resource's
	// URI, the template's URI template; "" when it has none that is a string.
	name string
	// index is its place in the server's list (from 0), for a definition without a name.
	index      int
	violations []mcpschema.Violation
}

// kindNames name the kinds in messages.
var kindNames = [numKinds]string{kindTools: "tool", kindPrompts: "prompt", kindResources: "resource", kindTemplates: "resource template"}

// schemaKinds are the kinds as mcpschema knows them.
var schemaKinds = [numKinds]mcpschema.Kind{kindTools: mcpschema.Tool, kindPrompts: mcpschema.Prompt, kindResources: mcpschema.Resource, kindTemplates: mcpschema.ResourceTemplate}

// identity is the member that names each kind.
var identity = [numKinds]string{kindTools: "name", kindPrompts: "name", kindResources: "uri", kindTemplates: "uriTemplate"}

// what names the definition: `tool "plain"`, or `tool #3 of the list`.
func (w withheldDef) what() string {
	if w.name == "" {
		return fmt.Sprintf("%s #%d of the list", kindNames[w.kind], w.index+1)
	}
	return fmt.Sprintf("%s %q", kindNames[w.kind], w.name)
}

// why is the rule it breaks (the first, by pointer), and how many more.
func (w withheldDef) why() string {
	msg := w.violations[0].Message
	if n := len(w.violations) - 1; n == 1 {
		msg += " (and 1 more problem)"
	} else if n > 1 {
		msg += fmt.Sprintf(" (and %d more problems)", n)
	}
	return msg
}

// String is the line that names it on stderr, to the client and in check:
// `server "raw": tool "plain" is withheld: /inputSchema/type is missing; the MCP schema requires "object"`.
func (w withheldDef) String() string {
	return fmt.Sprintf("server %q: %s is withheld: %s", w.server.key, w.what(), w.why())
}

// callError is the error message for a request that names the withheld definition (by its
// exposed name, or its URI).
func (w withheldDef) callError() string {
	return fmt.Sprintf("server %q lists this %s, but it is withheld because clients would reject the whole list over its definition: %s",
		w.server.key, kindNames[w.kind], w.why())
}

// screen checks the lists of s against the schema of era e, and returns the definitions it
// withholds, by kind and place in its list. Tools that its filters hide are not looked at:
// they are not served anyway. Callers hold Aggregator.mu (s.lists, s.filter) or own s.
func screen(s *server, e era.Era) [numKinds]map[int]withheldDef {
	var out [numKinds]map[int]withheldDef
	for k := range numKinds {
		for i, def := range s.lists[k] {
			name, _ := stringMember(def, identity[k])
			if k == kindTools && name != "" {
				if _, hidden := s.filter.Hidden(name); hidden {
					continue
				}
			}
			v := s.verdict(e, k, i, def)
			if v == nil {
				continue
			}
			if out[k] == nil {
				out[k] = map[int]withheldDef{}
			}
			out[k][i] = withheldDef{server: s, kind: k, name: name, index: i, violations: v}
		}
	}
	return out
}

// withhold records w in the catalog.
func (c *catalog) withhold(w withheldDef) {
	c.withheld = append(c.withheld, w)
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

// reportWithheld names each definition that cat withholds and old did not (old is nil for
// the first catalog), once: on the log, and to the client as a log message at warning level,
// so that the user learns which server is to blame. Whoever publishes a catalog calls it.
func (a *Aggregator) reportWithheld(old, cat *catalog) {
	var before []string
	if old != nil {
		for _, w := range old.withheld {
			before = append(before, w.String())
		}
	}
	var lines []string
	for _, w := range cat.withheld {
		if line := w.String(); !slices.Contains(before, line) {
			a.log.Warn(line)
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return
	}
	// Written from a goroutine of its own, in order: publish calls this holding roster.mu, and
	// a client that does not read must not hold up the catalog.
	go func() {
		for _, line := range lines {
			a.clientLog("warning", line)
		}
	}()
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
