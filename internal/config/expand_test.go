package config

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	env := lookupIn("A=alpha\nB=beta\nEMPTY=\nDOLLAR=$B\nBRACE=}")
	tests := []struct {
		in, want string
		missing  []string
	}{
		{"", "", nil},
		{"plain", "plain", nil},
		{"$A", "alpha", nil},
		{"${A}", "alpha", nil},
		{"x$A.y", "xalpha.y", nil},
		{"$A$B", "alphabeta", nil},
		{"${A}_${B}", "alpha_beta", nil},
		{"$A_B", "", []string{"A_B"}},
		{"${A}_B", "alpha_B", nil},
		{"${EMPTY}", "", nil},
		{"${EMPTY:-d}", "d", nil},
		{"${A:-d}", "alpha", nil},
		{"${X:-d}", "d", nil},
		{"${X:-}", "", nil},
		{"${X:-$A}", "alpha", nil},
		{"${X:-${Y:-$B}}", "beta", nil},
		{"${X:-${Y}}", "", []string{"Y"}},
		{"${A:-$Y}", "alpha", nil}, // the default is not expanded when it is not used
		{"${X:-a}b}", "ab}", nil},
		{"${X:-$$}", "$", nil},
		{"$DOLLAR", "$B", nil}, // values are not expanded again
		{"${BRACE}", "}", nil},
		{"$$", "$", nil},
		{"$$A", "$A", nil},
		{"$$$A", "$alpha", nil},
		{"$", "$", nil},
		{"a$", "a$", nil},
		{"$1", "$1", nil},
		{"$-", "$-", nil},
		{"${", "${", nil},
		{"${}", "${}", nil},
		{"${A", "${A", nil},
		{"${A:-", "${A:-", nil},
		{"${A-x}", "${A-x}", nil},
		{"${A:=x}", "${A:=x}", nil},
		{"${1}", "${1}", nil},
		{"$(id)", "$(id)", nil},
		{"$X $Y $X", "  ", []string{"X", "Y"}},
		{"ü$A€", "üalpha€", nil},
	}
	for _, tt := range tests {
		got, missing := expandEnv(tt.in, env)
		if got != tt.want || !slices.Equal(missing, tt.missing) {
			t.Errorf("expandEnv(%q) = %q, missing %q; want %q, missing %q", tt.in, got, missing, tt.want, tt.missing)
		}
	}
}

func FuzzExpand(f *testing.F) {
	for _, s := range []string{"", "$A", "${A}", "${A:-d}", "${X:-${Y:-$A}}", "$$", "${", "a $ b", "${A:-}}", "$$$$A"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		setAll := func(name string) (string, bool) { return "<" + name + ">", true }
		setNone := func(string) (string, bool) { return "", false }

		out, missing := expandEnv(s, setAll)
		if len(missing) != 0 {
			t.Fatalf("expandEnv(%q) with every variable set reported missing %q", s, missing)
		}
		if !strings.Contains(s, "$") && out != s {
			t.Fatalf("expandEnv(%q) = %q, want the input unchanged", s, out)
		}
		if again, _ := expandEnv(s, setAll); again != out {
			t.Fatalf("expandEnv(%q) is not deterministic: %q then %q", s, out, again)
		}
		_, missing = expandEnv(s, setNone)
		for i, name := range missing {
			if !strings.Contains(s, name) || name == "" || !isNameStart(name[0]) || slices.Contains(missing[:i], name) {
				t.Fatalf("expandEnv(%q) reported missing %q: not a distinct name from the input", s, missing)
			}
		}
	})
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"mcpServers": {}}`,
		`{"mcpServers": {"a": {"command": "x", "args": ["$A"], "env": {"K": "${B:-c}"}}}}`,
		`{"mcpServers": {"a": {"url": "http://x"}}}`,
		`{"mcpServers": {"": {"command": ""}}}`,
		`{"mcpServers": {"a": {"command": "x", "cwd": "/"}}}`,
		`{"mcpServers": [`,
		`[]`,
		`{"mcpServers": {"a": {"command": "$NOPE", "disabled": true}, "b": {"command": "x", "enabled": false}}}`,
		`{"mcpServers": {"a": {"type": "http", "url": "http://x"}, "b": {"httpUrl": "h"}, "c": {"serverUrl": "s"}, "d": {"tcp": "t"}}}`,
		`{"mcpServers": {"a": {"command": "x", "includeTools": ["a*"], "excludeTools": ["*b"], "disabledTools": []}}}`,
		`{"mcpServers": {"a": {"command": "x", "cwd": "~", "envFile": "nope.env", "comand": 1, "Disabled": true}}}`,
		`{"servers": {"a": {"type": "stdio", "command": "${userHome}${/}x", "args": ["${env:A}", "${input:t}", "${workspaceFolder}"]}}, "inputs": []}`,
		`{"mcpServers": {"a": {"command": "x"}}, "servers": {"a": {"command": "y", "dev": {}}, "a": {}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lookup := lookupIn("A=1")
		cfg, warnings, err := Parse("c.json", data, lookup)
		// Every warning names the file and a place in it (a key written twice can be anywhere);
		// one about a server entry names the server.
		for _, w := range warnings {
			if !strings.HasPrefix(w.String(), "c.json: /") {
				t.Fatalf("warning %q does not name the file and a JSON Pointer", w)
			}
			if tokens := strings.Split(w.Pointer, "/"); len(tokens) > 2 && (tokens[1] == "mcpServers" || tokens[1] == "servers") && !strings.Contains(w.Message, "server ") {
				t.Fatalf("warning %q is about a server entry and does not name the server", w)
			}
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "c.json") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		keys := map[string]bool{}
		for i, s := range cfg.Servers {
			if s.Key == "" || s.Command == "" {
				t.Fatalf("server %d has an empty key or command: %+v", i, s)
			}
			if i > 0 && cfg.Servers[i-1].Key >= s.Key {
				t.Fatalf("servers not sorted by key: %q before %q", cfg.Servers[i-1].Key, s.Key)
			}
			if s.Dir != "" && !filepath.IsAbs(s.Dir) || s.EnvFile != "" && !filepath.IsAbs(s.EnvFile) {
				t.Fatalf("server %q: relative path: dir %q, envFile %q", s.Key, s.Dir, s.EnvFile)
			}
			keys[s.Key] = true
		}
		for i, s := range cfg.Skipped {
			if keys[s.Key] || !strings.HasPrefix(s.Pointer, pointer("mcpServers", s.Key)+"/") && !strings.HasPrefix(s.Pointer, pointer("servers", s.Key)+"/") || s.Reason == "" {
				t.Fatalf("skipped entry %d: %+v: started too, or no pointer into it, or no reason", i, s)
			}
			if i > 0 && cfg.Skipped[i-1].Key >= s.Key {
				t.Fatalf("skipped entries not sorted by key: %q before %q", cfg.Skipped[i-1].Key, s.Key)
			}
		}
	})
}

// expandEnv expands the environment references of s alone, without the predefined variables
// of VS Code and Cursor.
func expandEnv(s string, lookup LookupFunc) (string, []string) {
	e := expander{lookup: lookup}
	return e.expand(s), e.missing
}

// EnvLookup reads an environment given as NAME=value, as os.LookupEnv reads the process's: the
// last of a name wins, an empty value is set, a missing name is not.
func TestEnvLookup(t *testing.T) {
	lookup := EnvLookup([]string{"A=1", "B=", "A=2", "C=x=y", "broken"})
	for name, want := range map[string]struct {
		v  string
		ok bool
	}{"A": {"2", true}, "B": {"", true}, "C": {"x=y", true}, "D": {"", false}, "broken": {"", false}} {
		if v, ok := lookup(name); v != want.v || ok != want.ok {
			t.Errorf("lookup(%q) = %q, %v; want %q, %v", name, v, ok, want.v, want.ok)
		}
	}
}
