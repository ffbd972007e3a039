package mcpschema

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
)

// corpus is testdata/clients.json: definitions, and whether the TypeScript clients accept them
// in a legacy session (test/interop checks that against the clients themselves).
type corpus struct {
	Cases []struct {
		Kind       string          `json:"kind"`
		Accept     bool            `json:"accept"`
		Modern     *bool           `json:"modern"`
		Note       string          `json:"note"`
		Definition json.RawMessage `json:"definition"`
	} `json:"cases"`
}

var kindsByName = map[string]Kind{"tool": Tool, "prompt": Prompt, "resource": Resource, "resourceTemplate": ResourceTemplate}

// Check accepts what the clients accept and rejects what either rejects, in both eras ("modern"
// is the verdict of 2026-07-28 where it differs).
func TestCheckAgreesWithClients(t *testing.T) {
	b, err := os.ReadFile("testdata/clients.json")
	if err != nil {
		t.Fatal(err)
	}
	var c corpus
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	for i, tc := range c.Cases {
		k, ok := kindsByName[tc.Kind]
		if !ok {
			t.Fatalf("case %d: kind %q", i, tc.Kind)
		}
		for _, e := range []era.Era{era.Legacy, era.Modern} {
			want := tc.Accept
			if e == era.Modern && tc.Modern != nil {
				want = *tc.Modern
			}
			v := Check(e, k, tc.Definition)
			if (v == nil) != want {
				t.Errorf("%s, %s (%s): %s: violations %v; the clients accept it: %v", e, tc.Kind, tc.Note, tc.Definition, v, want)
			}
		}
	}
}

// The messages name the pointer and the rule.
func TestCheckMessages(t *testing.T) {
	for _, tc := range []struct {
		k    Kind
		def  string
		want []Violation
	}{
		{Tool, `{"name":"plain","inputSchema":{}}`, []Violation{
			{"/inputSchema/type", "required", `/inputSchema/type is missing; the MCP schema requires "object"`}}},
		{Tool, `{"inputSchema":{"type":"array"}}`, []Violation{
			{"/inputSchema/type", "const", `/inputSchema/type is "array"; the MCP schema requires "object"`},
			{"/name", "required", `/name is missing; the MCP schema requires a string`}}},
		{Tool, `{"name":"t","inputSchema":{"type":"object","properties":{"a/b~":5}},"execution":{"taskSupport":"x"}}`, []Violation{
			{"/execution/taskSupport", "enum", `/execution/taskSupport is "x"; the MCP schema requires one of "forbidden", "optional", "required"`},
			{"/inputSchema/properties/a~1b~0", "type", `/inputSchema/properties/a~1b~0 is a number; the MCP schema requires an array or an object`}}},
		{Tool, `[]`, []Violation{{"", "type", `the definition is an array; the MCP schema requires an object`}}},
		{Prompt, `{"name":"p","arguments":[{"required":"yes"}]}`, []Violation{
			{"/arguments/0/name", "required", `/arguments/0/name is missing; the MCP schema requires a string`},
			{"/arguments/0/required", "type", `/arguments/0/required is a string; the MCP schema requires a boolean`}}},
		{Resource, `{"uri":"a:b","name":"n","annotations":{"priority":1.5,"lastModified":"now"}}`, []Violation{
			{"/annotations/lastModified", "pattern", `/annotations/lastModified is "now"; the TypeScript clients require an ISO 8601 date-time with seconds and a time zone ("2025-01-12T15:00:58Z")`},
			{"/annotations/priority", "maximum", `/annotations/priority is 1.5; the MCP schema requires at most 1`}}},
		{ResourceTemplate, `{"name":"t"}`, []Violation{
			{"/uriTemplate", "required", `/uriTemplate is missing; the MCP schema requires a string`}}},
	} {
		got := Check(era.Legacy, tc.k, json.RawMessage(tc.def))
		if !slices.Equal(got, tc.want) {
			t.Errorf("Check(%s, %s):\n got %q\nwant %q", tc.k, tc.def, got, tc.want)
		}
	}
}

// Every deviation finds its place in the schema it changes (applyDeviations panics at start-up
// otherwise), and says which client behaviour it follows.
func TestDeviations(t *testing.T) {
	for e, devs := range deviations {
		for _, d := range devs {
			if !strings.Contains(d.why, "z.") {
				t.Errorf("%s: deviation %s quotes no client code: %s", era.Era(e), d.at, d.why)
			}
		}
	}
	doc := map[string]any{"$defs": map[string]any{}}
	if err := applyDeviations(doc, []deviation{{at: "/$defs/Gone/properties/x", why: "test"}}); err == nil {
		t.Error("a deviation whose place is gone applies")
	}
}

// tools are n definitions like those of a real server: a description and a few typed
// properties.
func tools(n int) []json.RawMessage {
	defs := make([]json.RawMessage, n)
	for i := range defs {
		defs[i] = json.RawMessage(fmt.Sprintf(`{"name":"tool_%04d","title":"Tool %d","description":"Does thing number %d with the repository and reports what it found.",`+
			`"inputSchema":{"type":"object","properties":{"owner":{"type":"string","description":"the owner"},"repo":{"type":"string"},`+
			`"limit":{"type":"integer","minimum":1,"maximum":100},"labels":{"type":"array","items":{"type":"string"}}},"required":["owner","repo"]},`+
			`"annotations":{"readOnlyHint":true,"openWorldHint":true}}`, i, i, i))
	}
	return defs
}

// BenchmarkCheck2000 checks 2,000 tool definitions, as a start-up with many servers does; the
// guard is TestCheck2000Fast.
func BenchmarkCheck2000(b *testing.B) {
	defs := tools(2000)
	for b.Loop() {
		for _, d := range defs {
			if v := Check(era.Legacy, Tool, d); v != nil {
				b.Fatal(v)
			}
		}
	}
}
