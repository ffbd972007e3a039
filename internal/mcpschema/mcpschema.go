// Package mcpschema checks the definitions a server lists (tools, prompts, resources and
// resource templates) against the MCP specification's schema of the era a client speaks, as
// the TypeScript SDK clients check them: a client that finds one definition it rejects rejects
// the whole list ("Invalid result for tools/list"), so an aggregator must leave such a
// definition out rather than lose every server's list.
//
// The schemas are the specification's own schema.json files (spec/, with their source and
// license), compiled once with santhosh-tekuri/jsonschema. Each kind is checked against its
// definition in them ("#/$defs/Tool", ...), not against the whole list result. Where the
// clients accept more than the schema, or reject more, the schema is adjusted at load time, each
// change with the client code it follows (deviations.go): the rule is the clients', so that
// nothing they accept is withheld and nothing they reject is served.
package mcpschema

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
)

// Each era has one schema for its definitions, that of its latest version (era.Latest): the
// legacy era's is 2025-11-25's, whose rules the TypeScript clients apply to every legacy session
// (the older schemas require nothing more of these definitions: spec/README.md); the modern
// era's is 2026-07-28's (spec/<version>.json).

// Kind is the kind of a definition.
type Kind int

const (
	Tool Kind = iota
	Prompt
	Resource
	ResourceTemplate
	numKinds
)

// definitions are the names of the kinds' definitions in the schemas.
var definitions = [numKinds]string{Tool: "Tool", Prompt: "Prompt", Resource: "Resource", ResourceTemplate: "ResourceTemplate"}

func (k Kind) String() string { return definitions[k] }

// Violation is one rule a definition breaks.
type Violation struct {
	// Pointer is the JSON Pointer of the offending value in the definition ("" for the
	// definition itself); for a missing member, where it should be.
	Pointer string `json:"pointer"`
	// Rule is the schema keyword broken ("required", "type", "const", "enum", "minimum",
	// "maximum", "pattern", ...).
	Rule string `json:"rule"`
	// Message says it in words, starting with the pointer:
	// `/inputSchema/type is missing; the MCP schema requires "object"`.
	Message string `json:"message"`
}

func (v Violation) String() string { return v.Message }

//go:embed spec/2025-11-25.json
var legacyJSON []byte

//go:embed spec/2026-07-28.json
var modernJSON []byte

// checker holds the compiled definitions of one era, and every compiled schema by its
// location, to describe what a missing member should have been.
type checker struct {
	kinds [numKinds]*jsonschema.Schema
	byLoc map[string]*jsonschema.Schema
}

// The schemas are part of the program: one that does not load or compile is a bug and panics
// at its first use (and in every test). They are compiled at first use, not at start-up:
// compiling both takes about 40 ms, which would delay every start of the program, also one
// that never checks a definition (Warm starts it early, beside other work).
var (
	checkers = [era.Count]func() *checker{
		era.Legacy: sync.OnceValue(func() *checker { return compile(era.Legacy, legacyJSON) }),
		era.Modern: sync.OnceValue(func() *checker { return compile(era.Modern, modernJSON) }),
	}
	printer = message.NewPrinter(language.English)
)

// Warm compiles the schema of era now, so that the first Check does not wait for it.
func Warm(e era.Era) { checkers[e]() }

// schemaURL is where an era's schema is registered with the compiler (nothing is fetched).
func schemaURL(e era.Era) string {
	return "https://modelcontextprotocol.io/schema/" + era.Latest(e) + "/schema.json"
}

func compile(e era.Era, raw []byte) *checker {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		panic(fmt.Sprintf("mcpschema: spec/%s.json: %v", e, err))
	}
	if err := applyDeviations(doc, deviations[e]); err != nil {
		panic(fmt.Sprintf("mcpschema: spec/%s.json: %v", e, err))
	}
	c := jsonschema.NewCompiler()
	url := schemaURL(e)
	if err := c.AddResource(url, doc); err != nil {
		panic(fmt.Sprintf("mcpschema: spec/%s.json: %v", e, err))
	}
	ch := &checker{byLoc: map[string]*jsonschema.Schema{}}
	for k := range numKinds {
		s, err := c.Compile(url + "#/$defs/" + definitions[k])
		if err != nil {
			panic(fmt.Sprintf("mcpschema: spec/%s.json: %v", e, err))
		}
		ch.kinds[k] = s
		index(s, ch.byLoc)
	}
	return ch
}

// index records s and every schema below it by location.
func index(s *jsonschema.Schema, byLoc map[string]*jsonschema.Schema) {
	if s == nil || byLoc[s.Location] != nil {
		return
	}
	byLoc[s.Location] = s
	index(s.Ref, byLoc)
	for _, p := range s.Properties {
		index(p, byLoc)
	}
	if sub, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
		index(sub, byLoc)
	}
	index(s.Items2020, byLoc)
	if sub, ok := s.Items.(*jsonschema.Schema); ok && sub != nil {
		index(sub, byLoc)
	}
	for _, sub := range slices.Concat(s.AllOf, s.AnyOf, s.OneOf) {
		index(sub, byLoc)
	}
}

// Check checks the definition def, a JSON value as the server sent it, of the given kind
// against the schema of era e, and returns the rules it breaks (nil when the clients of that
// era accept it), in the order of the pointers.
func Check(e era.Era, k Kind, def json.RawMessage) []Violation {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(def))
	if err != nil {
		return []Violation{{Rule: "json", Message: fmt.Sprintf("the %s definition is not JSON: %v", k, err)}}
	}
	ch := checkers[e]()
	var out []Violation
	if err := ch.kinds[k].Validate(v); err != nil {
		verr, ok := err.(*jsonschema.ValidationError)
		if !ok {
			return []Violation{{Message: err.Error()}}
		}
		ch.collect(verr, &out)
	}
	if e == era.Legacy && k == Tool && !slices.ContainsFunc(out, func(v Violation) bool { return strings.HasPrefix(v.Pointer, "/outputSchema") }) {
		// The v1 client compiles output schemas (outputschema.go).
		if def, ok := v.(map[string]any); ok && def["outputSchema"] != nil {
			out = append(out, compileProblems(def["outputSchema"], "/outputSchema")...)
		}
	}
	if len(out) == 0 {
		return nil
	}
	slices.SortStableFunc(out, func(a, b Violation) int { return strings.Compare(a.Pointer, b.Pointer) })
	return slices.CompactFunc(out, func(a, b Violation) bool { return a.Message == b.Message })
}

// collect adds the violations of the leaves of e.
func (ch *checker) collect(e *jsonschema.ValidationError, out *[]Violation) {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			ch.collect(c, out)
		}
		return
	}
	at := pointer(e.InstanceLocation)
	where := at
	if where == "" {
		where = "the definition"
	}
	rule := strings.Join(e.ErrorKind.KeywordPath(), "/")
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		for _, m := range k.Missing {
			p := at + "/" + escape(m)
			*out = append(*out, Violation{p, rule, fmt.Sprintf("%s is missing; the MCP schema requires %s", p, ch.describe(e.SchemaURL, m))})
		}
	case *kind.Type:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = article(w)
		}
		*out = append(*out, Violation{at, rule, fmt.Sprintf("%s is %s; the MCP schema requires %s", where, article(k.Got), strings.Join(want, " or "))})
	case *kind.Const:
		*out = append(*out, Violation{at, rule, fmt.Sprintf("%s is %s; the MCP schema requires %s", where, show(k.Got), show(k.Want))})
	case *kind.Enum:
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = show(w)
		}
		*out = append(*out, Violation{at, rule, fmt.Sprintf("%s is %s; the MCP schema requires one of %s", where, show(k.Got), strings.Join(want, ", "))})
	case *kind.Minimum:
		*out = append(*out, Violation{at, rule, fmt.Sprintf("%s is %s; the MCP schema requires at least %s", where, rat(k.Got), rat(k.Want))})
	case *kind.Maximum:
		*out = append(*out, Violation{at, rule, fmt.Sprintf("%s is %s; the MCP schema requires at most %s", where, rat(k.Got), rat(k.Want))})
	case *kind.Pattern:
		what := "the MCP schema requires a value that matches " + show(k.Want)
		if k.Want == zodDateTime {
			what = `the TypeScript clients require an ISO 8601 date-time with seconds and a time zone ("2025-01-12T15:00:58Z")`
		}
		*out = append(*out, Violation{at, rule, fmt.Sprintf("%s is %s; %s", where, show(k.Got), what)})
	default:
		*out = append(*out, Violation{at, rule, fmt.Sprintf("%s: %s", where, e.ErrorKind.LocalizedString(printer))})
	}
}

// describe says what the member name of the schema at loc must be: its constant, or its type.
func (ch *checker) describe(loc, name string) string {
	s := ch.byLoc[loc]
	if s == nil {
		return "it"
	}
	p := s.Properties[name]
	for p != nil && p.Ref != nil && p.Const == nil && p.Types == nil {
		p = p.Ref
	}
	switch {
	case p == nil:
		return "it"
	case p.Const != nil:
		return show(*p.Const)
	case p.Types != nil && !p.Types.IsEmpty():
		types := p.Types.ToStrings()
		for i, t := range types {
			types[i] = article(t)
		}
		return strings.Join(types, " or ")
	}
	return "it"
}

// pointer is the JSON Pointer of a location.
func pointer(loc []string) string {
	var b strings.Builder
	for _, t := range loc {
		b.WriteByte('/')
		b.WriteString(escape(t))
	}
	return b.String()
}

func escape(token string) string {
	return strings.ReplaceAll(strings.ReplaceAll(token, "~", "~0"), "/", "~1")
}

// article names a JSON type with its article: "a string", "an object", "null".
func article(t string) string {
	switch t {
	case "null":
		return "null"
	case "object", "array", "integer":
		return "an " + t
	}
	return "a " + t
}

// show writes a JSON value, shortened to 60 bytes.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}

func rat(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return fmt.Sprint(f)
}
