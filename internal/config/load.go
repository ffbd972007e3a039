package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
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
	if problems := validate(doc); len(problems) > 0 {
		return nil, nil, &Error{File: file, Problems: problems}
	}
	var raw genconfig.Config
	if err := json.Unmarshal(data, &raw); err != nil {
		// The schema accepted the document, so the generated types must accept it too.
		return nil, nil, fmt.Errorf("%s: decoding a valid configuration failed (please report this): %w", file, err)
	}
	cfg, warnings := convert(file, doc, raw)
	if err := expand(cfg, lookup); err != nil {
		return nil, nil, err
	}
	return cfg, append(duplicateKeys(file, data), warnings...), nil
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

// convert turns the generated types into the domain types, with servers sorted by key, and
// lists the fields of server entries that the schema does not describe.
func convert(file string, doc any, raw genconfig.Config) (*Config, []Warning) {
	cfg := &Config{File: file, Servers: make([]Server, 0, len(raw.McpServers))}
	for key, s := range raw.McpServers {
		srv := Server{Key: key, Args: slices.Clone(s.Args), Env: map[string]string{}}
		if s.Command != nil {
			srv.Command = *s.Command
		}
		for k, v := range s.Env {
			srv.Env[k] = v
		}
		cfg.Servers = append(cfg.Servers, srv)
	}
	slices.SortFunc(cfg.Servers, func(a, b Server) int { return strings.Compare(a.Key, b.Key) })

	var warnings []Warning
	servers, _ := doc.(map[string]any)["mcpServers"].(map[string]any)
	for _, srv := range cfg.Servers {
		entry, _ := servers[srv.Key].(map[string]any)
		var unknown []string
		for field := range entry {
			if !knownServerFields[field] {
				unknown = append(unknown, field)
			}
		}
		slices.Sort(unknown)
		for _, field := range unknown {
			warnings = append(warnings, Warning{File: file, Problem: Problem{
				Pointer: pointer("mcpServers", srv.Key, field),
				Message: fmt.Sprintf("server %q: field %q is not used by mcp-simple-aggregator and is ignored", srv.Key, field),
			}})
		}
	}
	return cfg, warnings
}

// expand resolves the environment references of every server in place, and reports every
// variable that is missing, each where it is used.
func expand(cfg *Config, lookup LookupFunc) error {
	var problems []Problem
	anyMissing := false
	report := func(key string, missing []string, tokens ...string) {
		for _, name := range missing {
			anyMissing = true
			problems = append(problems, Problem{
				Pointer: pointer(append([]string{"mcpServers", key}, tokens...)...),
				Message: fmt.Sprintf("server %q: environment variable %s is not set", key, name),
			})
		}
	}
	for i := range cfg.Servers {
		s := &cfg.Servers[i]
		var missing []string
		s.Command, missing = Expand(s.Command, lookup)
		report(s.Key, missing, "command")
		if s.Command == "" && len(missing) == 0 {
			problems = append(problems, Problem{
				Pointer: pointer("mcpServers", s.Key, "command"),
				Message: fmt.Sprintf("server %q: \"command\" is empty once environment references are expanded", s.Key),
			})
		}
		for j, arg := range s.Args {
			s.Args[j], missing = Expand(arg, lookup)
			report(s.Key, missing, "args", fmt.Sprint(j))
		}
		for _, name := range slices.Sorted(maps.Keys(s.Env)) {
			s.Env[name], missing = Expand(s.Env[name], lookup)
			report(s.Key, missing, "env", name)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	e := &Error{File: cfg.File, Problems: problems}
	if anyMissing {
		e.Hint = "set the missing variables in the environment that starts mcp-simple-aggregator, " +
			"or give a default in the configuration as ${NAME:-default}"
	}
	return e
}
