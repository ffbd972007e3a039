package config

import (
	"bytes"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/schema"
)

// The schema is compiled once; it is part of the program, so a schema that does not compile
// is a bug and panics at start-up (and in every test).
var (
	configSchema, schemaDoc = compileSchema()
	knownServerFields       = serverFields(schemaDoc)
	printer                 = message.NewPrinter(language.English)
)

func compileSchema() (*jsonschema.Schema, map[string]any) {
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
	return s, doc.(map[string]any)
}

// serverFields are the fields the schema describes for a server entry. Any other field is
// reported as ignored: the list comes from the schema so that it is never written twice.
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
	err := configSchema.Validate(doc)
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
			node, _ := lookupSchema(schemaDoc, ptr).(map[string]any)
			messages, _ := node["x-messages"].(map[string]any)
			if msg, ok := messages[keyword(e.ErrorKind)].(string); ok {
				return msg
			}
		}
	}
	return e.ErrorKind.LocalizedString(printer)
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
		m, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		node = m[tok]
	}
	return node
}
