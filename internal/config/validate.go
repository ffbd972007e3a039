package config

import (
	"bytes"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/schema"
)

// The schema is compiled once, on first use, not at package init: every process of the program
// pays what init does, also one that never reads a configuration (a --share forwarder, `stop`),
// and compiling it costs about 0.6 MB and 1 ms. It is part of the program, so a schema that
// does not compile is a bug and panics at its first use (and in every test).
var theSchema = sync.OnceValue(compileSchema)

// printer words the validator's messages; made on first use for the same reason.
var printer = sync.OnceValue(func() *message.Printer { return message.NewPrinter(language.English) })

// compiledSchema is the configuration schema, compiled, with what is read from its document.
type compiledSchema struct {
	schema *jsonschema.Schema
	remote []remoteBranch  // the ways for an entry to be remote (remoteField)
	doc    map[string]any  // the document, for its "x-messages"
	fields map[string]bool // the fields of a server entry (knownServerFields)
}

// remoteBranch is one way for an entry to be remote: a branch of the "if" of a server in the
// schema, and the field it is about (the first of its "required").
type remoteBranch struct {
	field  string
	schema *jsonschema.Schema
}

func compileSchema() *compiledSchema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema.Config))
	if err != nil {
		panic(fmt.Sprintf("schema/config.schema.json: %v", err))
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schema.ConfigURL, doc); err != nil {
		panic(fmt.Sprintf("schema/config.schema.json: %v", err))
	}
	s, err := c.Compile(schema.ConfigURL)
	if err != nil {
		panic(fmt.Sprintf("schema/config.schema.json: %v", err))
	}
	var branches []remoteBranch
	anyOf, _ := lookupSchema(doc, "/$defs/server/if/anyOf").([]any)
	for i := range anyOf {
		ptr := fmt.Sprintf("/$defs/server/if/anyOf/%d", i)
		required, _ := lookupSchema(doc, ptr+"/required").([]any)
		field, _ := firstOf(required).(string)
		b, err := c.Compile(schema.ConfigURL + "#" + ptr)
		if err != nil || field == "" {
			panic(fmt.Sprintf("schema/config.schema.json: %s: a branch must compile and name its field first in \"required\": %v", ptr, err))
		}
		branches = append(branches, remoteBranch{field: field, schema: b})
	}
	if len(branches) == 0 {
		panic("schema/config.schema.json: /$defs/server/if/anyOf: no branches")
	}
	m := doc.(map[string]any)
	return &compiledSchema{schema: s, remote: branches, doc: m, fields: serverFields(m)}
}

func firstOf(list []any) any {
	if len(list) == 0 {
		return nil
	}
	return list[0]
}

// remoteField returns the field that makes a server entry remote, by the branches of the "if"
// of a server in the schema, or "" when the entry is a stdio server.
func remoteField(entry any) string {
	for _, b := range theSchema().remote {
		if b.schema.Validate(entry) == nil {
			return b.field
		}
	}
	return ""
}

// knownServerFields are the fields the schema describes for a server entry. Any other field is
// reported as ignored: the list comes from the schema so that it is never written twice.
func knownServerFields() map[string]bool { return theSchema().fields }

// serverFields reads the fields of a server entry from the schema's document.
func serverFields(doc map[string]any) map[string]bool {
	props, _ := lookupSchema(doc, "/$defs/server/properties").(map[string]any)
	fields := map[string]bool{}
	for name := range props {
		fields[name] = true
	}
	return fields
}

// validate checks the raw document against the schema and returns every violation, sorted by
// pointer and message.
func validate(doc any) []Problem {
	err := theSchema().schema.Validate(doc)
	if err == nil {
		return nil
	}
	verr, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return []Problem{{Message: err.Error()}}
	}
	var problems []Problem
	for _, leaf := range leaves(verr, nil) {
		problems = append(problems, Problem{
			Pointer: pointer(leaf.InstanceLocation...),
			Message: serverPrefix(leaf.InstanceLocation) + leafMessage(leaf),
		})
	}
	slices.SortFunc(problems, func(a, b Problem) int {
		if c := strings.Compare(a.Pointer, b.Pointer); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	return slices.Compact(problems)
}

// leaves returns the errors at the bottom of the tree: each is one concrete violation, the
// inner nodes only say which subschema contained it.
func leaves(e *jsonschema.ValidationError, out []*jsonschema.ValidationError) []*jsonschema.ValidationError {
	if pn, ok := e.ErrorKind.(*kind.PropertyNames); ok {
		// A property name is validated as a document of its own, so its errors are located
		// at the root: place them at the property they are about.
		for _, c := range e.Causes {
			relocate(c, append(slices.Clip(e.InstanceLocation), pn.Property))
		}
	}
	if len(e.Causes) == 0 {
		return append(out, e)
	}
	for _, c := range e.Causes {
		out = leaves(c, out)
	}
	return out
}

func relocate(e *jsonschema.ValidationError, loc []string) {
	e.InstanceLocation = loc
	for _, c := range e.Causes {
		relocate(c, loc)
	}
}

// leafMessage is the message of a violation: the schema's own message for the keyword that
// failed when the subschema has one in "x-messages" (written for people, next to the rule it
// explains), and the validator's message otherwise.
func leafMessage(e *jsonschema.ValidationError) string {
	if _, frag, ok := strings.Cut(e.SchemaURL, "#"); ok {
		if ptr, err := url.PathUnescape(frag); err == nil {
			node, _ := lookupSchema(theSchema().doc, ptr).(map[string]any)
			messages, _ := node["x-messages"].(map[string]any)
			if msg, ok := messages[keyword(e.ErrorKind)].(string); ok {
				return msg
			}
		}
	}
	return e.ErrorKind.LocalizedString(printer())
}

// keyword is the schema keyword that failed.
func keyword(k jsonschema.ErrorKind) string {
	if _, ok := k.(*kind.Not); ok {
		return "not" // its KeywordPath is empty in jsonschema/v6
	}
	if path := k.KeywordPath(); len(path) > 0 {
		return path[0]
	}
	return ""
}

// lookupSchema resolves a JSON Pointer in the schema document.
func lookupSchema(doc any, ptr string) any {
	if ptr == "" {
		return doc
	}
	node := doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch n := node.(type) {
		case map[string]any:
			node = n[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(n) {
				return nil
			}
			node = n[i]
		default:
			return nil
		}
	}
	return node
}

// closestField returns the field the schema describes for a server entry that field is most
// likely a misspelling of, or "" when none is close: within one edit (an insertion, deletion,
// substitution or swap of neighbours, case ignored) per three characters, at most three. A
// short field must also start with the same letter, so that a short field of some other tool
// ("dir") is not taken for a misspelt "env".
func closestField(field string) string {
	lower := strings.ToLower(field)
	limit := min(max(1, len([]rune(lower))/3), 3)
	best, bestDist := "", limit+1
	for _, known := range slices.Sorted(maps.Keys(knownServerFields())) {
		k := strings.ToLower(known)
		if len([]rune(lower)) < 5 && (lower == "" || k[0] != lower[0]) {
			continue
		}
		if d := editDistance(lower, k); d < bestDist {
			best, bestDist = known, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b, in runes: the
// number of insertions, deletions, substitutions and transpositions of adjacent runes that
// turn one into the other, no substring being edited twice.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	// d[i][j] is the distance between ra[:i] and rb[:j].
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
