package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	genconfig "github.com/mcp-simple-aggregator/mcp-simple-aggregator/gen/config"
)

// Load reads, parses, validates, decodes and expands the configuration file at path, in that
// order, stopping at the first stage that fails. Environment references are resolved with
// lookup (os.LookupEnv in the program). The warnings list the ignored parts of the file.
//
// Every error it returns names the file; parse errors give line and column, schema and
// expansion errors list every problem found, each with its JSON Pointer.
func Load(path string, lookup LookupFunc) (*Config, []Warning, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		reason := err
		var pe *fs.PathError
		if errors.As(err, &pe) {
			reason = pe.Err
		}
		return nil, nil, fmt.Errorf("%s: cannot read the configuration file: %v", path, reason)
	}
	return Parse(path, data, lookup)
}

// Parse is Load for a configuration already read; file names it in messages.
func Parse(file string, data []byte, lookup LookupFunc) (*Config, []Warning, error) {
	data = bytes.TrimPrefix(data, []byte("\uFEFF")) // a byte order mark, as some editors write
	doc, err := parseJSON(file, data)
	if err != nil {
		return nil, nil, err
	}
	root, rootWarnings := serversRoot(file, doc)
	warnings := append(duplicateKeys(file, data), rootWarnings...)
	warnings = append(warnings, fieldWarnings(file, root, doc)...)
	if problems := validate(doc); len(problems) > 0 {
		// The ignored fields are reported too: a misspelt "comand" explains a missing
		// "command".
		return nil, warnings, &Error{File: file, Problems: problems}
	}
	var raw genconfig.Config
	if err := decode(doc, root, &raw); err != nil {
		// The schema accepted the document, so the generated types must accept it too.
		return nil, nil, fmt.Errorf("%s: decoding a valid configuration failed (please report this): %w", file, err)
	}
	servers := raw.McpServers
	if root == vscodeRoot {
		servers = raw.Servers
	}
	cfg, entries, skipped := convert(file, root, servers, doc)
	warnings = append(warnings, skipped...)
	if err := expand(cfg, root, entries, newExpansion(file, lookup)); err != nil {
		return nil, warnings, err
	}
	return cfg, warnings, nil
}

// parseJSON decodes data into the generic form the validator wants (numbers as json.Number,
// so nothing is rounded), or returns an error that points at the offending line.
func parseJSON(file string, data []byte) (any, error) {
	var syntax *json.SyntaxError
	if err := json.Unmarshal(data, new(json.RawMessage)); errors.As(err, &syntax) {
		return nil, syntaxError(file, data, syntax)
	} else if err != nil {
		return nil, fmt.Errorf("%s: invalid JSON: %v", file, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: invalid JSON: %v", file, err)
	}
	return doc, nil
}

// syntaxError describes a JSON syntax error as "<file>:<line>:<column>: invalid JSON: ...",
// followed by the offending line with a caret under the column.
func syntaxError(file string, data []byte, se *json.SyntaxError) error {
	// Offset is the number of bytes read when the error was found: the offending byte is the
	// last of them, unless the input ended early.
	pos := int(se.Offset)
	if pos > 0 && pos <= len(data) && se.Error() != "unexpected end of JSON input" {
		pos--
	}
	pos = min(pos, len(data))
	lineStart := bytes.LastIndexByte(data[:pos], '\n') + 1
	lineEnd := bytes.IndexByte(data[pos:], '\n')
	if lineEnd < 0 {
		lineEnd = len(data)
	} else {
		lineEnd += pos
	}
	line := bytes.Count(data[:pos], []byte("\n")) + 1
	col := utf8.RuneCount(data[lineStart:pos]) + 1

	text := strings.TrimRight(string(data[lineStart:lineEnd]), "\r")
	caret := utf8.RuneCountInString(text[:min(pos-lineStart, len(text))])
	// Keep long lines (minified files) readable: show a window around the column.
	const window = 60
	if start := caret - window; start > 0 {
		r := []rune(text)
		end := min(len(r), caret+window)
		text = "..." + string(r[start:end])
		caret = caret - start + 3
	} else if r := []rune(text); len(r) > 2*window {
		text = string(r[:2*window]) + "..."
	}
	text = strings.ReplaceAll(text, "\t", " ")
	gutter := fmt.Sprintf("%5d | ", line)
	return fmt.Errorf("%s:%d:%d: invalid JSON: %s\n%s%s\n%s%s^",
		file, line, col, se.Error(),
		gutter, text,
		strings.Repeat(" ", len(gutter)-2)+"| ", strings.Repeat(" ", caret))
}

// decode decodes the validated document into the generated types, with only the fields the
// schema describes. encoding/json matches names without regard to case, so decoding the file
// itself would read "Disabled" or "envfile" as the fields they resemble, which the schema
// (and every client) tells apart and which are reported as ignored.
func decode(doc any, root string, raw *genconfig.Config) error {
	servers := map[string]any{}
	top, _ := doc.(map[string]any)
	docServers, _ := top[root].(map[string]any)
	for key, entry := range docServers {
		fields, _ := entry.(map[string]any)
		known := map[string]any{}
		for name, value := range fields {
			if knownServerFields()[name] {
				known[name] = value
			}
		}
		servers[key] = known
	}
	data, err := json.Marshal(map[string]any{root: servers})
	if err != nil {
		return err
	}
	return json.Unmarshal(data, raw)
}

// entry is a server to start, before expansion: its paths as written.
type entry struct {
	server  Server
	cwd     *string
	envFile *string
}

// convert turns the generated types into the domain types, sorted by key: the entries to start
// (not yet expanded), and those that are skipped; each remote entry gets a warning.
func convert(file, root string, servers genconfig.Servers, doc any) (*Config, []entry, []Warning) {
	cfg := &Config{File: file}
	var (
		entries  []entry
		warnings []Warning
	)
	docServers, _ := doc.(map[string]any)[root].(map[string]any)
	for _, key := range slices.Sorted(maps.Keys(servers)) {
		s := servers[key]
		remote := remoteField(docServers[key])
		switch {
		case s.Disabled != nil && *s.Disabled:
			cfg.Skipped = append(cfg.Skipped, Skipped{Key: key, Pointer: pointer(root, key, "disabled"), Reason: `"disabled": true`})
		case s.Enabled != nil && !*s.Enabled:
			cfg.Skipped = append(cfg.Skipped, Skipped{Key: key, Pointer: pointer(root, key, "enabled"), Reason: `"enabled": false`})
		case remote != "":
			// The address may carry a token, so only the transport's name is quoted.
			what := fmt.Sprintf("%q", remote)
			if remote == "type" && s.Type != nil {
				what = fmt.Sprintf("%q: %q", remote, *s.Type)
			}
			skip := Skipped{Key: key, Pointer: pointer(root, key, remote), Remote: true,
				Reason: fmt.Sprintf("remote server (%s): only stdio servers are served", what)}
			cfg.Skipped = append(cfg.Skipped, skip)
			warnings = append(warnings, Warning{File: file, Problem: Problem{
				Pointer: skip.Pointer,
				Message: fmt.Sprintf("server %q: %s, so it is skipped", key, skip.Reason),
			}})
		default:
			srv := Server{Key: key, Args: slices.Clone(s.Args), Env: map[string]string{}, AlwaysLoad: s.AlwaysLoad != nil && *s.AlwaysLoad}
			if s.Command != nil {
				srv.Command = *s.Command
			}
			maps.Copy(srv.Env, s.Env)
			fields := []FilterField{
				{Name: "includeTools", Patterns: s.IncludeTools},
				{Name: "excludeTools", Patterns: s.ExcludeTools},
				{Name: "disabledTools", Patterns: s.DisabledTools},
			}
			srv.Tools = NewFilter(file, root, key, fields...)
			warnings = append(warnings, filterWarnings(file, root, key, fields...)...)
			entries = append(entries, entry{server: srv, cwd: s.Cwd, envFile: s.EnvFile})
		}
	}
	return cfg, entries, warnings
}

// fieldWarnings lists the fields of server entries that the schema does not describe, each
// with the closest described field when one is close enough to be a misspelling of it. The
// fields of a remote entry are those of a transport that is not served: none of them is worth
// a warning. doc need not be valid.
func fieldWarnings(file, root string, doc any) []Warning {
	top, _ := doc.(map[string]any)
	servers, _ := top[root].(map[string]any)
	var warnings []Warning
	for _, key := range slices.Sorted(maps.Keys(servers)) {
		if remoteField(servers[key]) == "" {
			fields, _ := servers[key].(map[string]any)
			warnings = append(warnings, unknownFields(file, root, key, fields)...)
		}
	}
	return warnings
}

func unknownFields(file, root, key string, fields map[string]any) []Warning {
	var warnings []Warning
	for _, field := range slices.Sorted(maps.Keys(fields)) {
		if knownServerFields()[field] {
			continue
		}
		msg := fmt.Sprintf("server %q: field %q is not used by mcp-simple-aggregator and is ignored", key, field)
		if known := closestField(field); known != "" {
			msg += fmt.Sprintf("; did you mean %q?", known)
		}
		warnings = append(warnings, Warning{File: file, Problem: Problem{Pointer: pointer(root, key, field), Message: msg}})
	}
	return warnings
}

// expand resolves the environment references and paths of every entry to start and reads
// its env file, and reports every problem found: missing variables, each where it is used,
// VS Code inputs, which nobody can answer here, working directories that are not there, env
// files that cannot be read.
func expand(cfg *Config, root string, entries []entry, x *expansion) error {
	var problems []Problem
	missing := map[string][]string{} // by key, each name once
	report := func(key string, r expanded, tokens ...string) {
		ptr := pointer(append([]string{root, key}, tokens...)...)
		for _, name := range r.missing {
			if !slices.Contains(missing[key], name) {
				missing[key] = append(missing[key], name)
			}
			problems = append(problems, Problem{
				Pointer: ptr,
				Message: fmt.Sprintf("server %q: environment variable %s is not set", key, name),
			})
		}
		for _, ref := range r.inputs {
			problems = append(problems, Problem{
				Pointer: ptr,
				Message: fmt.Sprintf("server %q: %s is a value VS Code asks the user for when it starts the server, which cannot be done outside the editor: "+
					"write the value here instead, or refer to an environment variable that holds it, such as ${NAME}", key, ref),
			})
		}
	}
	dir := filepath.Dir(cfg.File)
	usable := &Config{File: cfg.File, Skipped: cfg.Skipped}
	var unusable []string
	byServer := map[string][]Problem{}
	for _, e := range entries {
		s := e.server
		before := len(problems)
		var r expanded
		s.Command, r = x.expand(s.Command)
		report(s.Key, r, "command")
		if s.Command == "" && r.ok() {
			problems = append(problems, Problem{
				Pointer: pointer(root, s.Key, "command"),
				Message: fmt.Sprintf("server %q: \"command\" is empty once environment references are expanded", s.Key),
			})
		}
		for j, arg := range s.Args {
			s.Args[j], r = x.expand(arg)
			report(s.Key, r, "args", fmt.Sprint(j))
		}
		for _, name := range slices.Sorted(maps.Keys(s.Env)) {
			s.Env[name], r = x.expand(s.Env[name])
			report(s.Key, r, "env", name)
		}
		if e.cwd != nil {
			path, r, p := resolvePath(root, s.Key, "cwd", *e.cwd, dir, x)
			report(s.Key, r, "cwd")
			if p == nil && r.ok() {
				p = checkDir(root, s.Key, path)
			}
			if p != nil {
				problems = append(problems, *p)
			}
			s.Dir = path
		}
		if e.envFile != nil {
			path, r, p := resolvePath(root, s.Key, "envFile", *e.envFile, dir, x)
			report(s.Key, r, "envFile")
			if p == nil && r.ok() {
				var vars map[string]string
				vars, p = readEnvFile(root, s.Key, path)
				// "env" wins over the file.
				for name, value := range vars {
					if _, set := s.Env[name]; !set {
						s.Env[name] = value
					}
				}
			}
			if p != nil {
				problems = append(problems, *p)
			}
			s.EnvFile = path
		}
		cfg.Servers = append(cfg.Servers, s)
		if len(problems) == before {
			usable.Servers = append(usable.Servers, s)
		} else {
			unusable = append(unusable, s.Key)
			byServer[s.Key] = problems[before:len(problems):len(problems)]
		}
	}
	if len(problems) == 0 {
		return nil
	}
	e := &Error{File: cfg.File, Problems: problems}
	if len(missing) > 0 {
		e.Hint = "set the missing variables in the environment that starts mcp-simple-aggregator, " +
			"or give a default in the configuration as ${NAME:-default}"
	}
	return &UnusableServersError{Err: e, Usable: usable, Missing: missing, Unusable: unusable, byServer: byServer}
}

// vscodeRoot is the object that holds the servers in VS Code's own format (.vscode/mcp.json).
const vscodeRoot = "servers"

// serversRoot is the top-level object the servers are read from: "mcpServers", the format of
// most clients, or VS Code's "servers" in a file without "mcpServers". A file with both gets a
// warning that says which one is used.
func serversRoot(file string, doc any) (string, []Warning) {
	top, _ := doc.(map[string]any)
	_, mcp := top["mcpServers"]
	_, vscode := top[vscodeRoot]
	switch {
	case mcp && vscode:
		return "mcpServers", []Warning{{File: file, Problem: Problem{
			Pointer: pointer(vscodeRoot),
			Message: "the file has both \"mcpServers\" and VS Code's \"servers\": the servers of \"mcpServers\" are used and those of \"servers\" are ignored; keep one of them",
		}}}
	case vscode:
		return vscodeRoot, nil
	}
	return "mcpServers", nil
}
