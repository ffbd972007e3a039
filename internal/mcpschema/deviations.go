package mcpschema

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
)

// The clients' rules differ from the specification's schemas in a few places. The rule that
// counts is the clients': a definition the TypeScript SDK clients accept must be served, and
// one that makes either of them reject the list must not be. The clients are
// @modelcontextprotocol/sdk 1.32 (v1: dist/esm/types.js) and @modelcontextprotocol/client 2.4
// (v2: its 2025-11-25 wire schemas for legacy sessions, its 2026-07-28 ones for modern
// sessions), both on zod 4; a definition is withheld when either of them rejects it.
//
// One rule is not a schema's: the v1 client compiles each tool's outputSchema, and rejects the
// list when one does not compile (outputschema.go).
//
// Formats: the schemas give "format": "uri" (Resource.uri, Icon.src) and "uri-template"
// (ResourceTemplate.uriTemplate); the clients check only that these are strings
// (`uri: z.string()`, `src: z.string()`, `uriTemplate: z.string()`). Formats are annotations
// in draft 2020-12 and the compiler does not assert them, so no change is needed for those.

// deviation is one change to an era's schema: at the JSON Pointer at, value replaces what is
// there (nil deletes it); why quotes the client code it follows.
type deviation struct {
	at    string
	value any
	why   string
}

// zodDateTime is zod 4.6's z.iso.datetime({ offset: true }) (zod/v4/core/regexes.js, datetime):
// a date, "T", hours, minutes and seconds (with any fraction), then "Z" or an offset +hh:mm.
const zodDateTime = `^(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|(?:02)-(?:0[1-9]|1\d|2[0-8])))T(?:(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?(?:Z|([+-](?:[01]\d|2[0-3]):[0-5]\d)))$`

// common are the deviations of both eras.
var common = []deviation{
	{
		at:    "/$defs/Resource/properties/size",
		value: map[string]any{"type": "number"},
		why: "the schema says integer; both clients, in both eras: ResourceSchema " +
			"`size: z.optional(z.number())`, so 1.5 is accepted",
	},
	{
		at:    "/$defs/PromptArgument/properties/title",
		value: nil,
		why: "the schema has a string title; both clients, in both eras: PromptArgumentSchema = " +
			"z.object({ name: z.string(), description: z.optional(z.string()), required: z.optional(z.boolean()) }), " +
			"and z.object strips members it does not know: a title of any type is accepted",
	},
	{
		at:    "/$defs/Annotations/properties/lastModified/pattern",
		value: zodDateTime,
		why: "the schema says any string; both clients, in both eras: AnnotationsSchema " +
			"`lastModified: z.iso.datetime({ offset: true }).optional()`: a resource or template whose " +
			"lastModified is not such a date-time makes them reject the list",
	},
}

// deviations are the changes to each era's schema.
var deviations = [era.Count][]deviation{
	era.Legacy: append(append([]deviation(nil), common...),
		deviation{
			at:    "/$defs/Tool/properties/inputSchema/properties/properties/additionalProperties",
			value: map[string]any{"type": []any{"object", "array"}},
			why: "the schema wants each property's schema to be an object; v1: `properties: " +
				"z.record(z.string(), AssertObjectSchema)` with AssertObjectSchema = " +
				"z.custom((v) => v !== null && (typeof v === 'object' || typeof v === 'function')), which an " +
				"array passes too; v2 accepts any JSON value there (`z.record(z.string(), JSONValueSchema)`): " +
				"v1, the stricter, decides",
		},
		deviation{
			at:    "/$defs/Tool/properties/outputSchema/properties/properties/additionalProperties",
			value: map[string]any{"type": []any{"object", "array"}},
			why:   "as for inputSchema: v1's outputSchema has the same `properties: z.record(z.string(), AssertObjectSchema)`",
		},
		deviation{
			at:    "/$defs/Tool/properties/inputSchema/properties/$schema",
			value: nil,
			why: "the schema wants a string $schema; both clients' legacy inputSchema is " +
				"z.object({ type, properties, required }).catchall(z.unknown()): no rule for $schema",
		},
		deviation{
			at:    "/$defs/Tool/properties/outputSchema/properties/$schema",
			value: nil,
			why:   "as for inputSchema: the legacy outputSchema is .catchall(z.unknown()) too",
		},
	),
	// The 2026-07-28 Tool is v2's: inputSchema z.looseObject({ $schema: z.string().optional(),
	// type: z.literal("object") }), outputSchema z.looseObject({ $schema: z.string().optional() }),
	// as the schema says.
	era.Modern: common,
}

// applyDeviations changes doc, a decoded schema, as devs say. A deviation whose place does not
// exist (the schema changed) is an error: the rule it follows must be looked at again.
func applyDeviations(doc any, devs []deviation) error {
	for _, d := range devs {
		i := strings.LastIndexByte(d.at, '/')
		parent, last := lookup(doc, d.at[:i]), d.at[i+1:]
		obj, ok := parent.(map[string]any)
		if !ok {
			return fmt.Errorf("deviation %s: %s is not an object in the schema", d.at, d.at[:i])
		}
		if _, exists := obj[last]; !exists && (d.value == nil || last != "pattern") {
			return fmt.Errorf("deviation %s: not in the schema; look at it again: %s", d.at, d.why)
		}
		if d.value == nil {
			delete(obj, last)
			continue
		}
		// A copy through JSON: the schema's values are json.Number, never float64.
		b, _ := json.Marshal(d.value)
		var v any
		_ = json.Unmarshal(b, &v)
		obj[last] = v
	}
	return nil
}

// lookup finds the value at the JSON Pointer ptr in doc; nil when there is none.
func lookup(doc any, ptr string) any {
	if ptr == "" {
		return doc
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		doc = obj[strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")]
	}
	return doc
}
