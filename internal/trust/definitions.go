package trust

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// Kind is the kind of a definition, in the order of the aggregator's lists.
type Kind int

const (
	Tool Kind = iota
	Prompt
	Resource
	ResourceTemplate
	// Instructions are the server's instructions (the initialize result's, or the
	// server/discover result's), one text.
	Instructions
	numKinds
)

var kindNames = [numKinds]string{Tool: "tool", Prompt: "prompt", Resource: "resource", ResourceTemplate: "resource template", Instructions: "instructions"}

func (k Kind) String() string { return kindNames[k] }

// MarshalText writes the kind as its name, for check --json.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// identity is the member that names each kind in its list and in the lock.
var identity = [numKinds]string{Tool: "name", Prompt: "name", Resource: "uri", ResourceTemplate: "uriTemplate"}

// unread are the members no client gives the model: _meta (for the client and its extensions,
// such as an MCP App's user interface) and icons (images for the user). Everything else of
// a definition is what the model may read, and is scanned and pinned. The specification
// describes the rest as text for the model; for a tool's description: "This can be used by
// clients to improve the LLM's understanding of available tools. It can be thought of like
// a 'hint' to the model." (schema.ts, Tool; the same of resources and templates), and of
// the instructions: "This can be used by clients to improve an LLM's understanding of
// available tools (e.g., by including it in a system prompt)." (DiscoverResult).
var unread = []string{"_meta", "icons"}

// Lists are what one server offers, as it sent them: each list's definitions byte for byte,
// and its instructions.
type Lists struct {
	Tools, Prompts, Resources, ResourceTemplates []json.RawMessage
	Instructions                                 string
}

// Server is what one server's definitions tell the model, read from its lists once: each
// definition is decoded at most once, the first time its scan (Findings) or its digests
// (for the lock) need it, and both are kept. A Server is safe for concurrent use; make a new
// one when the server's lists change.
type Server struct {
	key      string
	defs     []*definition
	findings func() []Finding
}

// definition is one definition of a server (or its instructions).
type definition struct {
	kind  Kind
	index int
	raw   json.RawMessage // "" for the instructions
	text  string          // the instructions
	// read decodes it once, for the scan and the lock; pins makes its members' digests
	// once, for the lock only (see members).
	read func() *decoded
	pins func() map[string]string
}

type decoded struct {
	name     string
	nameless bool // no string identity: it cannot be pinned
	value    any  // the instructions' text, or the decoded JSON (the raw text when it is not JSON)
}

// Read takes the lists of the server key. It does no work yet: the scan and the digests are
// made when first asked for.
func Read(key string, l Lists) *Server {
	s := &Server{key: key}
	for k, list := range [...][]json.RawMessage{Tool: l.Tools, Prompt: l.Prompts, Resource: l.Resources, ResourceTemplate: l.ResourceTemplates} {
		for i, raw := range list {
			s.add(&definition{kind: Kind(k), index: i, raw: raw})
		}
	}
	if l.Instructions != "" {
		s.add(&definition{kind: Instructions, text: l.Instructions})
	}
	s.findings = sync.OnceValue(s.scan)
	return s
}

func (s *Server) add(d *definition) {
	d.read = sync.OnceValue(d.decode)
	d.pins = sync.OnceValue(func() map[string]string { return members(d.kind, d.read().value) })
	s.defs = append(s.defs, d)
}

// Key is the server's key.
func (s *Server) Key() string { return s.key }

// decode reads the definition. A definition that is not a JSON object is its whole value
// (one member, ""), and has no name.
func (d *definition) decode() *decoded {
	if d.kind == Instructions {
		return &decoded{value: d.text, nameless: true}
	}
	out := &decoded{}
	if start, end, ok := rawjson.Member(d.raw, identity[d.kind]); ok {
		if name, ok := rawjson.String(d.raw[start:end]); ok {
			out.name = string(name)
		} else if json.Unmarshal(d.raw[start:end], &out.name) != nil {
			out.nameless = true
		}
	} else {
		out.nameless = true
	}
	v, err := decode(d.raw)
	if err != nil {
		// The aggregator's lists come from valid JSON messages, so this is a caller's bug;
		// the text still gets a digest, which will never match.
		v = string(d.raw)
	}
	out.value = v
	return out
}

// name names the definition as messages do, without reading more than its name.
func (d *definition) name() string { return d.read().name }

// walk calls fn for each text of v that the model reads (each string, and each member's
// name, at any depth), with the JSON Pointer of the string (of the member, for a name).
// The definition's members in unread are left out. Pointer tokens are built only for the
// texts fn is called with, so that the common case allocates nothing beyond the path.
func walk(v any, top bool, path []string, fn func(path []string, text string, key bool)) {
	switch v := v.(type) {
	case string:
		fn(path, v, false)
	case []any:
		for i, e := range v {
			walk(e, false, append(path, fmt.Sprint(i)), fn)
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			if top && slices.Contains(unread, k) {
				continue
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := append(path, k)
			fn(p, k, true)
			walk(v[k], false, p, fn)
		}
	}
}

// pointer is the JSON Pointer of path (RFC 6901).
func pointer(path []string) string {
	var b strings.Builder
	for _, t := range path {
		b.WriteByte('/')
		b.WriteString(escapeToken(t))
	}
	return b.String()
}

func escapeToken(t string) string {
	if !strings.ContainsAny(t, "~/") {
		return t
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(t)
}

// members splits a definition into the members the lock pins, each with its digest, keyed
// by JSON Pointer: so that check can say which member changed, not only that the definition
// did. The identity member (the name, the URI template) is the lock's key and not a member;
// unread ones are left out. A member is one top-level member of the definition, except:
//
//   - a tool's inputSchema and outputSchema, and any definition's annotations, are split
//     into their members ("/inputSchema/required", "/annotations/readOnlyHint"), and a
//     schema's properties into one member per property ("/inputSchema/properties/path");
//   - a prompt's arguments are one member per argument, by its name ("/arguments/city"),
//     so that inserting one changes no other, plus "/arguments", the digest of their names
//     in order (a reordering is a change too); when the names are not distinct strings the
//     arguments are one member;
//   - an object split into members that has none (an empty inputSchema) is one member, so
//     that "{}" and no member at all differ.
//
// Together the members are the whole of what is pinned: two definitions with the same
// members (digests included) have the same canonical form, but for unread.
func members(k Kind, v any) map[string]string {
	obj, ok := v.(map[string]any)
	if k == Instructions {
		ok = false // one text
	}
	if !ok {
		return map[string]string{"": digest(v)}
	}
	out := map[string]string{}
	for name, val := range obj {
		if name == identity[k] || slices.Contains(unread, name) {
			continue
		}
		p := "/" + escapeToken(name)
		switch {
		case k == Tool && (name == "inputSchema" || name == "outputSchema"):
			split(out, p, val, true)
		case name == "annotations":
			split(out, p, val, false)
		case k == Prompt && name == "arguments":
			splitArguments(out, p, val)
		default:
			out[p] = digest(val)
		}
	}
	return out
}

// split adds the members of the object v at p (and, for a schema, of its properties).
func split(out map[string]string, p string, v any, schema bool) {
	obj, ok := v.(map[string]any)
	if !ok || len(obj) == 0 {
		out[p] = digest(v)
		return
	}
	for name, val := range obj {
		q := p + "/" + escapeToken(name)
		if schema && name == "properties" {
			split(out, q, val, false)
			continue
		}
		out[q] = digest(val)
	}
}

// splitArguments adds a prompt's arguments by name, when they have distinct names.
func splitArguments(out map[string]string, p string, v any) {
	args, ok := v.([]any)
	if !ok || len(args) == 0 {
		out[p] = digest(v)
		return
	}
	names := make([]any, 0, len(args))
	seen := map[string]bool{}
	for _, a := range args {
		obj, _ := a.(map[string]any)
		name, ok := obj["name"].(string)
		if !ok || seen[name] {
			out[p] = digest(v)
			return
		}
		seen[name] = true
		names = append(names, name)
	}
	out[p] = digest(names)
	for i, a := range args {
		out[p+"/"+escapeToken(names[i].(string))] = digest(a)
	}
}

// definitionName names a definition in messages: `tool "search"`, or `tool #3 of the list`
// for one without a name.
func definitionName(k Kind, name string, index int) string {
	if k == Instructions {
		return "the instructions"
	}
	if name == "" {
		return fmt.Sprintf("%s #%d of the list", k, index+1)
	}
	return fmt.Sprintf("%s %q", k, Visible(name))
}
