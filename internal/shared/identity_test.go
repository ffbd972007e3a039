package shared

import (
	"slices"
	"strings"
	"testing"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/child"
)

// The identity of a server process is what its server sees: command, arguments, the whole
// environment but for the variables that only name a session, and the directory; an entry with
// its own "cwd" leaves out the variables that restate the session's directory too.
func TestIdentity(t *testing.T) {
	env := []string{"HOME=/home/u", "PATH=/usr/bin", "PROJECT_TOKEN=alpha", "PWD=/work/one", "SHLVL=1", "CLAUDE_CODE_SESSION_ID=s1", "ADDED=1"}
	spec := func(change func(*child.Spec)) child.Spec {
		sp := child.Spec{Key: "k", Command: "/usr/bin/server", Args: []string{"-a", "b"}, Env: slices.Clone(env), Dir: "/work/one"}
		if change != nil {
			change(&sp)
		}
		return sp
	}
	base := seenBy(spec(nil), false).identity()
	if len(base) != 32 {
		t.Errorf("identity %q: want 32 hex digits", base)
	}
	set := func(name, value string) func(*child.Spec) {
		return func(sp *child.Spec) { sp.Env = withValue(sp.Env, name, value) }
	}
	same := map[string]child.Spec{
		"the same entry":               spec(nil),
		"another key":                  spec(func(sp *child.Spec) { sp.Key = "other" }),
		"env in another order":         spec(func(sp *child.Spec) { sp.Env = reversed(sp.Env) }),
		"another session of Claude":    spec(set("CLAUDE_CODE_SESSION_ID", "s2")),
		"Claude's notes directory":     spec(set("CLAUDE_CODE_CHILD_NOTES_DIR", "/tmp/notes-2")),
		"Claude's messaging socket":    spec(set("CLAUDE_CODE_MESSAGING_SOCKET", "/tmp/cc-socks/2.sock")),
		"Claude's messaging token":     spec(set("CLAUDE_CODE_MESSAGING_TOKEN", "0123456789abcdef0123456789abcdef")),
		"another shell level":          spec(set("SHLVL", "3")),
		"another terminal tab":         spec(set("TERM_SESSION_ID", "w0t1p0:ABC")),
		"the last command":             spec(set("_", "/usr/bin/claude")),
		"another configuration chain":  spec(set("MCP_SIMPLE_AGGREGATOR_CONFIG_CHAIN", "/b/config.json")),
		"without a session-only value": spec(func(sp *child.Spec) { sp.Env = without(sp.Env, "SHLVL") }),
	}
	for name, sp := range same {
		if got := seenBy(sp, false).identity(); got != base {
			t.Errorf("%s: identity %s, want the same as the entry's, %s", name, got, base)
		}
	}
	different := map[string]child.Spec{
		"another command":                 spec(func(sp *child.Spec) { sp.Command = "/usr/bin/other" }),
		"other arguments":                 spec(func(sp *child.Spec) { sp.Args = []string{"-a", "c"} }),
		"the arguments split apart":       spec(func(sp *child.Spec) { sp.Args = []string{"-a b"} }),
		"an argument more":                spec(func(sp *child.Spec) { sp.Args = []string{"-a", "b", ""} }),
		"no arguments":                    spec(func(sp *child.Spec) { sp.Args = nil }),
		"another token in the session":    spec(set("PROJECT_TOKEN", "beta")),
		"another added value":             spec(set("ADDED", "2")),
		"a session variable less":         spec(func(sp *child.Spec) { sp.Env = without(sp.Env, "PROJECT_TOKEN") }),
		"a variable more":                 spec(set("AWS_PROFILE", "prod")),
		"another directory":               spec(func(sp *child.Spec) { sp.Dir = "/work/two" }),
		"another PWD, without a cwd":      spec(set("PWD", "/work/two")),
		"an empty value for a variable":   spec(set("ADDED", "")),
		"a variable named like a session": spec(set("CLAUDE_CODE_SESSION", "x")),
	}
	seenIDs := map[string]string{base: "the entry"}
	for name, sp := range different {
		got := seenBy(sp, false).identity()
		if prev, ok := seenIDs[got]; ok {
			t.Errorf("%s: identity %s, the same as %s's", name, got, prev)
		}
		seenIDs[got] = name
	}

	// An entry with its own cwd: the session's directory and what restates it do not count.
	own := func(change func(*child.Spec)) string {
		sp := spec(change)
		sp.Dir = "/srv/shared"
		return seenBy(sp, true).identity()
	}
	ownBase := own(nil)
	for name, change := range map[string]func(*child.Spec){
		"another PWD":                 set("PWD", "/work/two"),
		"another Claude project":      set("CLAUDE_PROJECT_DIR", "/work/two"),
		"another npm start directory": set("INIT_CWD", "/work/two"),
	} {
		if got := own(change); got != ownBase {
			t.Errorf("an entry with its own cwd, %s: identity %s, want %s", name, got, ownBase)
		}
	}
	if own(set("PROJECT_TOKEN", "beta")) == ownBase {
		t.Error("an entry with its own cwd: another PROJECT_TOKEN has the same identity")
	}
}

// apart names what keeps two processes of one entry apart: variables by name, never by value,
// and the directory.
func TestApart(t *testing.T) {
	a := seen{Command: "srv", Args: []string{"x"}, Env: map[string]string{"PROJECT_TOKEN": "alpha-secret", "HOME": "/h", "ONLY_A": "1"}, Dir: "/one"}
	b := seen{Command: "srv", Args: []string{"x"}, Env: map[string]string{"PROJECT_TOKEN": "beta-secret", "HOME": "/h", "ONLY_B": "2"}, Dir: "/one"}
	if got, want := apart(a, b), "the variables ONLY_A, ONLY_B, PROJECT_TOKEN differ"; got != want {
		t.Errorf("apart = %q, want %q", got, want)
	}
	b.Env = map[string]string{"PROJECT_TOKEN": "beta-secret", "HOME": "/h", "ONLY_A": "1"}
	b.Dir = "/two"
	got := apart(a, b)
	if want := "the variable PROJECT_TOKEN differs; the working directory differs (/one, /two)"; got != want {
		t.Errorf("apart = %q, want %q", got, want)
	}
	if strings.Contains(got, "secret") {
		t.Errorf("apart tells a value: %q", got)
	}
	if got := apart(a, a); got != "" {
		t.Errorf("apart of the same = %q", got)
	}
	c := a
	c.Command = "other"
	if got := apart(a, c); got != "" {
		t.Errorf("apart of two entries = %q, want nothing: they are not one entry's", got)
	}
}

func without(env []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}
