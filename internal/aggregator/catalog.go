package aggregator

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// catalog is an immutable snapshot of the exposed tools. Lookups read the current snapshot
// without locks; changes build a new one.
type catalog struct {
	tools map[string]tool // by exposed name
	order []tool          // servers in key order, each server's tools in its order
	list  json.RawMessage // the encoded tools/list result
}

// tool is one exposed tool: who owns it and its definition under the exposed name.
type tool struct {
	exposed  string
	original string
	quoted   []byte // original as a JSON string, for forwarded calls
	server   *server
	def      json.RawMessage
}

// buildCatalog exposes every tool of servers as key+sep+name. Routing uses the map, never a
// split of the name: keys and tool names may contain the separator. Two tools that would get
// the same exposed name are an error naming both.
func buildCatalog(servers []*server, sep string) (*catalog, error) {
	c := &catalog{tools: map[string]tool{}}
	var problems []string
	for _, s := range servers {
		for i, def := range s.tools {
			var t tool
			var err error
			t.server = s
			t.def, t.original, err = renameTool(def, "")
			if err != nil {
				s.log.Warn(fmt.Sprintf("tool #%d of the list is ignored: %v", i+1, err))
				continue
			}
			t.exposed = s.key + sep + t.original
			t.quoted, _ = json.Marshal(t.original) // a string always encodes
			t.def, _, _ = renameTool(def, t.exposed)
			if other, dup := c.tools[t.exposed]; dup {
				problems = append(problems, fmt.Sprintf("the tool name %q would be exposed twice: for tool %q of server %q and for tool %q of server %q; "+
					"rename one of the server keys or choose another --separator", t.exposed, other.original, other.server.key, t.original, s.key))
				continue
			}
			c.tools[t.exposed] = t
			c.order = append(c.order, t)
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(problems, "\n"))
	}
	c.encode()
	return c, nil
}

func (c *catalog) encode() {
	defs := make([]json.RawMessage, len(c.order))
	for i, t := range c.order {
		defs[i] = t.def
	}
	c.list = encodeToolList(defs)
}

// without returns the catalog minus the tools of s.
func (c *catalog) without(s *server) *catalog {
	n := &catalog{tools: make(map[string]tool, len(c.tools))}
	for _, t := range c.order {
		if t.server != s {
			n.tools[t.exposed] = t
			n.order = append(n.order, t)
		}
	}
	n.encode()
	return n
}

// apiToolName is what the Anthropic and OpenAI APIs accept as a tool name (see
// docs: clients that call those APIs withhold or drop tools with other names).
var apiToolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// rejectedNames lists the exposed names that API-backed clients would reject.
func (c *catalog) rejectedNames() []string {
	var bad []string
	for _, t := range c.order {
		if !apiToolName.MatchString(t.exposed) {
			bad = append(bad, t.exposed)
		}
	}
	return bad
}

// nameWarning is the start-up warning about names that API-backed clients reject, with what to
// do about it; "" when every name is accepted.
func nameWarning(c *catalog, sep string) string {
	bad := c.rejectedNames()
	if len(bad) == 0 {
		return ""
	}
	fix := "start with --separator __"
	for _, t := range c.order {
		if !apiToolName.MatchString(t.server.key + "__" + t.original) {
			fix = "use server keys of letters, digits, _ and - (and --separator __), keeping key and tool name within 64 characters"
			break
		}
	}
	if sep == "__" || sep == "_" || sep == "-" {
		fix = "use server keys of letters, digits, _ and -, keeping key and tool name within 64 characters"
	}
	shown := bad
	if len(shown) > 10 {
		shown = shown[:10]
	}
	more := ""
	if len(bad) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(bad)-len(shown))
	}
	return fmt.Sprintf("%d tool names have characters other than letters, digits, _ and -, or are longer than 64 characters, "+
		"and clients that use the Anthropic or OpenAI APIs (Claude Desktop, claude.ai, Cursor, ChatGPT) reject them: %s%s; to avoid it, %s",
		len(bad), quoteList(shown), more, fix)
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
