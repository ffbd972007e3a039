package config

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// LookupFunc returns the value of an environment variable and whether it is set, like
// os.LookupEnv (which is what the program passes).
type LookupFunc func(name string) (string, bool)

// EnvLookup is the LookupFunc of env, an environment as NAME=value (a session's that is not
// this process's): the last of a name wins, as exec's does, and names compare without case on
// Windows, as os.LookupEnv's do.
func EnvLookup(env []string) LookupFunc {
	return func(name string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(env[i], "="); ok && (k == name || runtime.GOOS == "windows" && strings.EqualFold(k, name)) {
				return v, true
			}
		}
		return "", false
	}
}

// The environment references understood are
//
//	$VAR              the value of VAR
//	${VAR}            the value of VAR
//	${VAR:-default}   the value of VAR, or default when VAR is unset or empty;
//	                  default may itself hold references
//	$$                a literal $
//
// where a name is a letter or underscore followed by letters, digits and underscores. A $
// followed by anything else is kept as it is (so "$5", "a $ b" and "${1x}" pass unchanged).
// A variable that is set to the empty string expands to the empty string.
//
// Nothing is ever run: there is no command substitution, arithmetic or globbing, and the
// result is never given to a shell. The variables referred to without a default that are not
// set are reported, in order of appearance, each once.

// expansion expands the values of one configuration file: the environment references above, and the predefined variables that VS Code and Cursor define for their MCP
// configuration files, with the meaning they have there:
//
//	${env:NAME}                  the same as ${NAME}
//	${userHome}                  the home directory (HOME; USERPROFILE on Windows)
//	${workspaceFolder}           the workspace the file belongs to: the directory above
//	                             .vscode or .cursor when the file is in one, else the
//	                             file's own directory
//	${workspaceFolderBasename}   the last element of ${workspaceFolder}
//	${pathSeparator}, ${/}       the operating system's path separator
//	${input:ID}                  a value VS Code asks the user for: reported, since
//	                             nobody can be asked here
//
// The braces are needed, as in those clients: $userHome is the environment variable userHome.
type expansion struct {
	lookup LookupFunc
	// vars are the predefined variables, by name.
	vars map[string]string
}

func newExpansion(file string, lookup LookupFunc) *expansion {
	dir := filepath.Dir(file)
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	workspace := dir
	if base := filepath.Base(dir); base == ".vscode" || base == ".cursor" {
		workspace = filepath.Dir(dir)
	}
	sep := string(os.PathSeparator)
	return &expansion{lookup: lookup, vars: map[string]string{
		"workspaceFolder":         workspace,
		"workspaceFolderBasename": filepath.Base(workspace),
		"pathSeparator":           sep,
		"/":                       sep,
	}}
}

// expanded is what an expansion found besides the value: the environment variables that are
// not set and the VS Code inputs referred to (as written, such as "${input:token}").
type expanded struct {
	missing []string
	inputs  []string
}

func (r expanded) ok() bool { return len(r.missing) == 0 && len(r.inputs) == 0 }

func (x *expansion) expand(s string) (string, expanded) {
	if strings.IndexByte(s, '$') < 0 {
		return s, expanded{}
	}
	e := expander{lookup: x.lookup, predefined: x}
	out := e.expand(s)
	return out, expanded{missing: e.missing, inputs: e.inputs}
}

// homeVar is the variable that holds the home directory, which ${userHome} stands for.
func homeVar() string {
	if runtime.GOOS == "windows" {
		return "USERPROFILE"
	}
	return "HOME"
}

type expander struct {
	lookup  LookupFunc
	missing []string
	// predefined is nil for plain environment references (the tests).
	predefined *expansion
	inputs     []string
}

// editorRef expands a reference of VS Code's at the start of s, which begins with "${": it
// returns its length and value, or ok=false when s does not start with one.
func (e *expander) editorRef(s string) (n int, value string, ok bool) {
	end := strings.IndexByte(s, '}')
	if end < 0 {
		return 0, "", false
	}
	inner := s[2:end]
	if name, found := strings.CutPrefix(inner, "env:"); found && validName(name) {
		return end + 1, e.value(name), true
	}
	if id, found := strings.CutPrefix(inner, "input:"); found && id != "" {
		e.inputs = append(e.inputs, s[:end+1])
		return end + 1, "", true
	}
	if inner == "userHome" {
		return end + 1, e.value(homeVar()), true
	}
	if v, found := e.predefined.vars[inner]; found {
		return end + 1, v, true
	}
	return 0, "", false
}

func validName(name string) bool {
	if name == "" || !isNameStart(name[0]) {
		return false
	}
	for i := 1; i < len(name); i++ {
		if !isNameChar(name[i]) {
			return false
		}
	}
	return true
}

func (e *expander) expand(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		switch next := s[i+1]; {
		case next == '$':
			b.WriteByte('$')
			i += 2
		case next == '{':
			n, value, ok := e.braced(s[i:])
			if !ok {
				b.WriteByte('$')
				i++
				continue
			}
			b.WriteString(value)
			i += n
		case isNameStart(next):
			j := i + 2
			for j < len(s) && isNameChar(s[j]) {
				j++
			}
			b.WriteString(e.value(s[i+1 : j]))
			i = j
		default:
			b.WriteByte('$')
			i++
		}
	}
	return b.String()
}

// braced expands the reference at the start of s, which begins with "${". It returns the
// length of the reference and its value, or ok=false when s does not start with a reference
// this expander understands (the text is then kept as it is).
func (e *expander) braced(s string) (n int, value string, ok bool) {
	if e.predefined != nil {
		if n, value, ok := e.editorRef(s); ok {
			return n, value, true
		}
	}
	j := 2
	if j == len(s) || !isNameStart(s[j]) {
		return 0, "", false
	}
	for j < len(s) && isNameChar(s[j]) {
		j++
	}
	name := s[2:j]
	if j == len(s) {
		return 0, "", false
	}
	if s[j] == '}' {
		return j + 1, e.value(name), true
	}
	if !strings.HasPrefix(s[j:], ":-") {
		return 0, "", false
	}
	start := j + 2
	end, found := closingBrace(s, start)
	if !found {
		return 0, "", false
	}
	if v, set := e.lookup(name); set && v != "" {
		return end + 1, v, true
	}
	return end + 1, e.expand(s[start:end]), true
}

// closingBrace finds the "}" that closes a default starting at s[start:], skipping the
// references nested inside it.
func closingBrace(s string, start int) (int, bool) {
	depth := 0
	for k := start; k < len(s); k++ {
		switch {
		case s[k] == '$' && k+1 < len(s) && s[k+1] == '$':
			k++
		case s[k] == '$' && k+1 < len(s) && s[k+1] == '{':
			depth++
			k++
		case s[k] == '}':
			if depth == 0 {
				return k, true
			}
			depth--
		}
	}
	return 0, false
}

func (e *expander) value(name string) string {
	v, ok := e.lookup(name)
	if !ok {
		for _, m := range e.missing {
			if m == name {
				return ""
			}
		}
		e.missing = append(e.missing, name)
	}
	return v
}

func isNameStart(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func isNameChar(c byte) bool {
	return isNameStart(c) || '0' <= c && c <= '9'
}
