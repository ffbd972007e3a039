package shared

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/child"
)

// A server process is shared by the sessions whose servers would see the same command,
// arguments, environment and working directory: a session sees what it would see unshared.
// The environment is the session's whole environment with the entry's env over it, less the
// variables below, which only name a client's session, or the shell or terminal it runs in,
// and which no server reads for meaning; the process keeps the values of the session that
// started it. The working directory is the entry's "cwd", else the session's own; an entry
// with a "cwd" of its own does not depend on where the client runs, so the session's
// directory and the variables that only restate it are left out, and it is shared by the
// sessions of every project.

// sessionOnly are the variables that only name a session. The clients' are those that differ
// between two sessions of one client, measured for six clients (docs/client-environments.md:
// of them only Claude Code, 2.1.330 and 2.1.332, names each session to the servers it starts,
// and only a Claude Code process beneath the session reads these); the shells' and terminals'
// name a shell level, the previous directory, the last command, or a terminal's window or
// tab.
var sessionOnly = map[string]bool{
	// Claude Code.
	"CLAUDE_CODE_SESSION_ID":              true,
	"CLAUDE_CODE_LAUNCHED_BY_SESSION_IDS": true,
	"CLAUDE_CODE_CHILD_NOTES_DIR":         true,
	"CLAUDE_CODE_MESSAGING_SOCKET":        true, // the session's own socket
	"CLAUDE_CODE_MESSAGING_TOKEN":         true, // and its key
	// Shells.
	"SHLVL":  true,
	"OLDPWD": true,
	"_":      true,
	// Terminals: a window, a tab, a pane.
	"TERM_SESSION_ID":       true, // macOS Terminal
	"ITERM_SESSION_ID":      true, // iTerm2
	"SECURITYSESSIONID":     true, // macOS login session
	"WINDOWID":              true, // X11 terminals
	"TMUX_PANE":             true,
	"KITTY_WINDOW_ID":       true,
	"WEZTERM_PANE":          true,
	"ALACRITTY_WINDOW_ID":   true,
	"WT_SESSION":            true, // Windows Terminal
	"GNOME_TERMINAL_SCREEN": true,
	// The aggregator's own: the configuration files of the aggregators above a nested one
	// (aggregator.chainVar), which only a nested aggregator reads, to catch a loop.
	"MCP_SIMPLE_AGGREGATOR_CONFIG_CHAIN": true,
}

// restatesDir are the variables that only restate the session's directory: the shell's, and
// the project directory that clients and package runners set. They are left out of the
// identity of an entry with a "cwd" of its own.
var restatesDir = map[string]bool{
	"PWD":                true,
	"CLAUDE_PROJECT_DIR": true, // Claude Code
	"INIT_CWD":           true, // npm and npx
}

// seen is what a server of an entry would see, as far as sharing goes.
type seen struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
	Dir     string            `json:"dir"` // the entry's "cwd", else the session's directory
}

// seenBy is what the server of sp would see; ownDir says that the entry has a "cwd" of its own
// (sp.Dir is then that directory, and otherwise the session's).
func seenBy(sp child.Spec, ownDir bool) seen {
	s := seen{Command: sp.Command, Args: slices.Clone(sp.Args), Env: map[string]string{}, Dir: sp.Dir}
	for _, kv := range sp.Env {
		k, v, _ := strings.Cut(kv, "=")
		if sessionOnly[k] || (ownDir && restatesDir[k]) {
			continue
		}
		s.Env[k] = v
	}
	return s
}

// identity is the key of what is seen: two sessions whose servers see the same share a
// process.
func (s seen) identity() string {
	h := sha256.New()
	enc := json.NewEncoder(h)
	env := make([]string, 0, len(s.Env))
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		env = append(env, k+"="+s.Env[k])
	}
	_ = enc.Encode([]any{s.Command, s.Args, env, s.Dir})
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// apart says what keeps the processes of one entry (the same command and arguments) apart in
// two sessions: the variables that differ, by name (never by value: they may be secrets), and
// the working directory; "" when they are of different entries, or see the same.
func apart(a, b seen) string {
	if a.Command != b.Command || !slices.Equal(a.Args, b.Args) {
		return ""
	}
	var differ []string
	for k, v := range a.Env {
		if w, ok := b.Env[k]; !ok || w != v {
			differ = append(differ, k)
		}
	}
	for k := range b.Env {
		if _, ok := a.Env[k]; !ok {
			differ = append(differ, k)
		}
	}
	slices.Sort(differ)
	var why []string
	switch len(differ) {
	case 0:
	case 1:
		why = append(why, "the variable "+differ[0]+" differs")
	default:
		why = append(why, "the variables "+strings.Join(differ, ", ")+" differ")
	}
	if a.Dir != b.Dir {
		why = append(why, fmt.Sprintf("the working directory differs (%s, %s)", a.Dir, b.Dir))
	}
	return strings.Join(why, "; ")
}
