package aggregator

import (
	"encoding/json"
	"testing"
)

func TestRenameTool(t *testing.T) {
	for _, tc := range []struct{ in, name, want, old string }{
		{`{"name":"echo","inputSchema":{}}`, "a:echo", `{"name":"a:echo","inputSchema":{}}`, "echo"},
		{`{ "z" : 1, "name" : "x\u00e9" , "a":{"name":"inner"} }`, "k/é:xé", `{ "z" : 1, "name" : "k/é:xé" , "a":{"name":"inner"} }`, "xé"},
		{`{"inputSchema":{"maximum":123456789012345678901234567890},"name":"n"}`, "s__n", `{"inputSchema":{"maximum":123456789012345678901234567890},"name":"s__n"}`, "n"},
	} {
		got, old, err := renameTool(json.RawMessage(tc.in), tc.name)
		if err != nil || string(got) != tc.want || old != tc.old {
			t.Errorf("renameTool(%s, %q) = %s, %q, %v; want %s, %q", tc.in, tc.name, got, old, err, tc.want, tc.old)
		}
	}
	for _, bad := range []string{`{"title":"no name"}`, `{"name":5}`, `[]`, `"x"`, `{"name":`} {
		if _, _, err := renameTool(json.RawMessage(bad), "x"); err == nil {
			t.Errorf("renameTool(%s) succeeded, want an error", bad)
		}
	}
}
