package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPatternMatch(t *testing.T) {
	tests := []struct {
		pattern string
		match   []string
		noMatch []string
	}{
		{"read_file", []string{"read_file"}, []string{"", "read_files", "xread_file", "read_fil", "READ_FILE"}},
		{"", []string{""}, []string{"a"}},
		{"*", []string{"", "a", "read_file"}, nil},
		{"**", []string{"", "abc"}, nil},
		{"delete_*", []string{"delete_", "delete_repo"}, []string{"delete", "undelete_repo"}},
		{"*_file", []string{"_file", "read_file"}, []string{"read_files", "file"}},
		{"get_*_by_id", []string{"get_user_by_id", "get__by_id", "get_a_by_id_by_id"}, []string{"get_by_id", "get_user_by_name"}},
		{"a*b*c", []string{"abc", "aXbYc", "abbc", "acbc", "abcbc"}, []string{"ab", "acb", "a", "bc"}},
		{"a*a", []string{"aa", "aba"}, []string{"a"}},
		{"*ab*ab*", []string{"abab", "xabyabz"}, []string{"ab", "aba"}},
		{"ü*€", []string{"ü€", "üx€"}, []string{"ü"}},
	}
	for _, tt := range tests {
		f := NewFilter("c.json", "mcpServers", "s", FilterField{Name: "excludeTools", Patterns: []string{tt.pattern}})
		for _, name := range tt.match {
			if _, hidden := f.Hidden(name); !hidden {
				t.Errorf("pattern %q does not match %q, want it to", tt.pattern, name)
			}
		}
		for _, name := range tt.noMatch {
			if _, hidden := f.Hidden(name); hidden {
				t.Errorf("pattern %q matches %q, want it not to", tt.pattern, name)
			}
		}
	}
}

func TestFilterHidden(t *testing.T) {
	f := NewFilter("/home/u/config.json", "mcpServers", "gh",
		FilterField{Name: "includeTools", Patterns: []string{"get_*", "delete_repo", "search"}},
		FilterField{Name: "excludeTools", Patterns: []string{"get_secret", "delete_*"}},
		FilterField{Name: "disabledTools", Patterns: []string{"search"}},
	)
	tests := []struct {
		name, why string
	}{
		{"get_issue", ""},
		{"get_secret", `hidden by "excludeTools" ("get_secret") in /home/u/config.json`},
		{"delete_repo", `hidden by "excludeTools" ("delete_*") in /home/u/config.json`},
		{"search", `hidden by "disabledTools" ("search") in /home/u/config.json`},
		{"create_issue", `hidden by "includeTools" (which does not list it) in /home/u/config.json`},
	}
	for _, tt := range tests {
		why, hidden := f.Hidden(tt.name)
		if why != tt.why || hidden != (tt.why != "") {
			t.Errorf("Hidden(%q) = %q, %v; want %q, %v", tt.name, why, hidden, tt.why, tt.why != "")
		}
	}
	if f.Empty() {
		t.Error("Empty() = true for a filter with patterns")
	}

	// An empty "includeTools" lists nothing, so it hides everything (as in Gemini CLI).
	none := NewFilter("c.json", "mcpServers", "s", FilterField{Name: "includeTools", Patterns: []string{}})
	if _, hidden := none.Hidden("anything"); !hidden || none.Empty() {
		t.Errorf("empty includeTools: Hidden = %v, Empty = %v; want true, false", hidden, none.Empty())
	}
	// Absent fields hide nothing.
	for _, f := range []Filter{{}, NewFilter("c.json", "mcpServers", "s"), NewFilter("c.json", "mcpServers", "s", FilterField{Name: "excludeTools"})} {
		if why, hidden := f.Hidden("anything"); hidden || why != "" || !f.Empty() {
			t.Errorf("no filter: Hidden = %q, %v, Empty = %v; want \"\", false, true", why, hidden, f.Empty())
		}
	}
	// An empty exclusion list hides nothing either, but it was given.
	if f := NewFilter("c.json", "mcpServers", "s", FilterField{Name: "excludeTools", Patterns: []string{}}); !f.Empty() {
		t.Errorf("empty excludeTools: Empty = false, want true")
	}
}

func TestFilterUnmatched(t *testing.T) {
	f := NewFilter("c.json", "mcpServers", "gh",
		FilterField{Name: "includeTools", Patterns: []string{"get_*", "list_*"}},
		FilterField{Name: "excludeTools", Patterns: []string{"get_me", "delete_*", "get_mee"}},
		FilterField{Name: "disabledTools", Patterns: []string{"*"}},
	)
	got := f.Unmatched([]string{"get_me", "get_issue", "create_issue"})
	want := []Problem{
		{Pointer: "/mcpServers/gh/includeTools/1", Message: `server "gh": "includeTools" pattern "list_*" matches none of the server's 3 tools: check its spelling against the server's tool names`},
		{Pointer: "/mcpServers/gh/excludeTools/1", Message: `server "gh": "excludeTools" pattern "delete_*" matches none of the server's 3 tools: check its spelling against the server's tool names`},
		{Pointer: "/mcpServers/gh/excludeTools/2", Message: `server "gh": "excludeTools" pattern "get_mee" matches none of the server's 3 tools: check its spelling against the server's tool names`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Unmatched (-want +got):\n%s", diff)
	}
	if got := f.Unmatched(nil); len(got) != 6 {
		t.Errorf("Unmatched(no tools) = %d problems, want one per pattern (6)", len(got))
	}
	if got := (Filter{}).Unmatched([]string{"a"}); got != nil {
		t.Errorf("Unmatched of no filter = %v, want nil", got)
	}
	key := NewFilter("c.json", "mcpServers", "a/b~", FilterField{Name: "excludeTools", Patterns: []string{"x"}}).Unmatched(nil)
	if len(key) != 1 || key[0].Pointer != "/mcpServers/a~1b~0/excludeTools/0" {
		t.Errorf("Unmatched pointer for key %q = %v, want it escaped", "a/b~", key)
	}
}

// Hidden runs on every call and every listing: it must not allocate, whether the tool is
// hidden or not.
func TestFilterHiddenAllocs(t *testing.T) {
	exact := NewFilter("c.json", "mcpServers", "s",
		FilterField{Name: "includeTools", Patterns: []string{"a", "b", "c"}},
		FilterField{Name: "excludeTools", Patterns: []string{"b", "x_*_y"}},
	)
	for _, tt := range []struct {
		what string
		f    Filter
		name string
	}{
		{"no filter", Filter{}, "read_file"},
		{"exact, shown", exact, "a"},
		{"exact, excluded", exact, "b"},
		{"exact, not included", exact, "d"},
		{"pattern, excluded", exact, "x_1_y"},
	} {
		if n := testing.AllocsPerRun(100, func() { tt.f.Hidden(tt.name) }); n != 0 {
			t.Errorf("%s: Hidden(%q) allocates %v times per call, want 0", tt.what, tt.name, n)
		}
	}
}

func BenchmarkFilterHidden(b *testing.B) {
	f := NewFilter("c.json", "mcpServers", "s",
		FilterField{Name: "excludeTools", Patterns: []string{"delete_*", "write_file", "move_file"}},
	)
	for b.Loop() {
		f.Hidden("read_file")
	}
}
