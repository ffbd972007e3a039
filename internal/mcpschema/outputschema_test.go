package mcpschema

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
)

// jsRegexpProblem finds every pattern JavaScript refuses with the u flag, but for those it
// gives the benefit of the doubt, and never one it accepts (testdata/patterns.json, whose
// verdicts test/interop checks against Node).
func TestJSRegexp(t *testing.T) {
	b, err := os.ReadFile("testdata/patterns.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Patterns []struct {
			Pattern string `json:"pattern"`
			Valid   bool   `json:"valid"`
			Doubt   bool   `json:"doubt"`
		} `json:"patterns"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Patterns {
		why := jsRegexpProblem(p.Pattern)
		switch {
		case p.Valid && why != "":
			t.Errorf("%q is valid in JavaScript, but: %s", p.Pattern, why)
		case !p.Valid && !p.Doubt && why == "":
			t.Errorf("%q is invalid in JavaScript, and is not found", p.Pattern)
		case p.Doubt && why != "":
			t.Errorf("%q is given the benefit of the doubt, but: %s", p.Pattern, why)
		}
	}
}

// The messages of the output schema checks name the pointer and what Ajv refuses.
func TestCompileProblems(t *testing.T) {
	const tail = "; the TypeScript SDK v1 client compiles each tool's outputSchema when it lists tools, and one that does not compile makes it reject the whole list"
	for _, tc := range []struct{ schema, want string }{
		{`{"type":"object","properties":{"a":{"$ref":"#/$defs/x"}}}`, `/outputSchema/properties/a/$ref is "#/$defs/x", which points to nothing in the output schema`},
		{`{"type":"object","properties":{"a":{"type":"string","pattern":"(?i)x"}}}`, `/outputSchema/properties/a/pattern is not a valid JavaScript regular expression (with the u flag): "(?i)" does not start a group in JavaScript`},
		{`{"type":"object","properties":{"a":{"type":"text"}}}`, `/outputSchema/properties/a/type has "text", which is not a JSON type`},
		{`{"type":"object","properties":{"a":{"required":"x"}}}`, `/outputSchema/properties/a/required is a string; Ajv requires array`},
	} {
		got := Check(era.Legacy, Tool, json.RawMessage(`{"name":"t","inputSchema":{"type":"object"},"outputSchema":`+tc.schema+`}`))
		if len(got) != 1 || got[0].Message != tc.want+tail {
			t.Errorf("%s: %q\nwant %q", tc.schema, got, tc.want+tail)
		}
		if got := Check(era.Modern, Tool, json.RawMessage(`{"name":"t","inputSchema":{"type":"object"},"outputSchema":`+tc.schema+`}`)); got != nil {
			t.Errorf("2026-07-28 (v2 compiles each tool's output schema apart): %s: %q", tc.schema, got)
		}
	}
}
