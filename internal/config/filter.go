package config

import (
	"fmt"
	"slices"
	"strings"
)

// Filter decides which of a server's tools are served, from the entry's "includeTools" (only
// these), "excludeTools" and "disabledTools" (never these; exclusion wins). A pattern is a
// tool name, matched exactly, in which a "*" also matches any run of characters (tool names do
// not contain "*", so a client's existing list keeps its meaning).
//
// The zero Filter hides nothing. Hidden runs on the call path: it does not allocate.
type Filter struct {
	key string // the server's key, for messages
	// include is nil when "includeTools" is absent; an empty, non-nil list includes nothing,
	// as in Gemini CLI, which defines the field.
	include []pattern
	exclude []pattern
	// notIncluded is the reason given for a tool that no "includeTools" pattern matches.
	notIncluded string
}

// pattern is one compiled tool name pattern.
type pattern struct {
	field   string // the field it came from, such as "excludeTools"
	pointer string // its JSON Pointer, such as "/mcpServers/gh/excludeTools/2"
	text    string // as written
	// parts are the pieces between the "*"s; nil when text has no "*" (an exact name).
	parts []string
	// why is the reason given for a tool it hides, built once.
	why string
}

// FilterField is one tool filter field of a server entry, as written.
type FilterField struct {
	// Name is the field, "includeTools", "excludeTools" or "disabledTools".
	Name string
	// Patterns are its items; a nil slice means the field is absent.
	Patterns []string
}

// NewFilter compiles the filter fields of the server key of file, whose servers are in the
// top-level object root ("mcpServers", or VS Code's "servers"). Patterns of "includeTools"
// select; those of every other field exclude.
func NewFilter(file, root, key string, fields ...FilterField) Filter {
	f := Filter{key: key}
	for _, field := range fields {
		if field.Patterns == nil {
			continue
		}
		include := field.Name == "includeTools"
		if include && f.include == nil {
			f.include = []pattern{}
			f.notIncluded = fmt.Sprintf("hidden by %q (which does not list it) in %s", field.Name, file)
		}
		for i, text := range field.Patterns {
			p := pattern{
				field:   field.Name,
				pointer: pointer(root, key, field.Name, fmt.Sprint(i)),
				text:    text,
				why:     fmt.Sprintf("hidden by %q (%q) in %s", field.Name, text, file),
			}
			if strings.Contains(text, "*") {
				p.parts = strings.Split(text, "*")
			}
			if include {
				f.include = append(f.include, p)
			} else {
				f.exclude = append(f.exclude, p)
			}
		}
	}
	if f.Empty() {
		return Filter{} // one value for "no filter", whatever the server
	}
	return f
}

// Equal reports whether f and g are the same filter, from the same fields of the same entry
// (a reload that changes only filters keeps the process; go-cmp uses it to compare Servers).
func (f Filter) Equal(g Filter) bool {
	same := func(a, b []pattern) bool {
		return slices.EqualFunc(a, b, func(p, q pattern) bool {
			return p.field == q.field && p.pointer == q.pointer && p.text == q.text && p.why == q.why
		})
	}
	return f.key == g.key && (f.include == nil) == (g.include == nil) && f.notIncluded == g.notIncluded &&
		same(f.include, g.include) && same(f.exclude, g.exclude)
}

// Hidden reports whether the filter hides the tool name; when it does, why names the field, the
// pattern and the file, such as `hidden by "excludeTools" ("delete_*") in /home/u/config.json`.
func (f Filter) Hidden(name string) (why string, hidden bool) {
	for i := range f.exclude {
		if f.exclude[i].match(name) {
			return f.exclude[i].why, true
		}
	}
	if f.include == nil {
		return "", false
	}
	for i := range f.include {
		if f.include[i].match(name) {
			return "", false
		}
	}
	return f.notIncluded, true
}

// Unmatched returns a problem for each pattern that matches none of names, the server's tools,
// at the pattern's JSON Pointer: a misspelt pattern would otherwise hide or keep tools without a
// word.
func (f Filter) Unmatched(names []string) []Problem {
	var problems []Problem
	for _, list := range [][]pattern{f.include, f.exclude} {
		for _, p := range list {
			found := false
			for _, name := range names {
				if p.match(name) {
					found = true
					break
				}
			}
			if !found {
				problems = append(problems, Problem{
					Pointer: p.pointer,
					Message: fmt.Sprintf("server %q: %q pattern %q matches none of the server's %d tools: check its spelling against the server's tool names", f.key, p.field, p.text, len(names)),
				})
			}
		}
	}
	return problems
}

// Empty reports whether the filter hides nothing whatever the names: no filter field is given.
func (f Filter) Empty() bool { return f.include == nil && len(f.exclude) == 0 }

// match reports whether name matches the pattern, without allocating.
func (p *pattern) match(name string) bool {
	if p.parts == nil {
		return name == p.text
	}
	first, last := p.parts[0], p.parts[len(p.parts)-1]
	if len(name) < len(first)+len(last) || !strings.HasPrefix(name, first) || !strings.HasSuffix(name, last) {
		return false
	}
	// The middle pieces are found leftmost first, each after the one before: the earliest
	// place leaves the most room for the rest, so this finds a match whenever there is one.
	rest := name[len(first) : len(name)-len(last)]
	for _, part := range p.parts[1 : len(p.parts)-1] {
		i := strings.Index(rest, part)
		if i < 0 {
			return false
		}
		rest = rest[i+len(part):]
	}
	return true
}
