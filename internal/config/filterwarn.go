package config

import (
	"fmt"
	"strings"
)

// filterWarnings are what the configuration alone says about the tool filters of the server
// key, before its server has listed a tool: a filter that hides every tool, a pattern given
// twice or both included and excluded, and a pattern written with the server's prefix (a
// pattern is the tool's name as the server lists it). They are said at start-up, before any
// client connects; the patterns that match none of the server's tools are known only once it
// has listed them (Filter.Unmatched).
func filterWarnings(file, root, key string, fields ...FilterField) []Warning {
	var warnings []Warning
	warn := func(ptr, msg string, args ...any) {
		warnings = append(warnings, Warning{File: file, Problem: Problem{Pointer: ptr, Message: fmt.Sprintf("server %q: ", key) + fmt.Sprintf(msg, args...)}})
	}
	type seen struct {
		field string
		index int
	}
	first := map[string]seen{}
	for _, field := range fields {
		if field.Patterns == nil {
			continue
		}
		include := field.Name == "includeTools"
		if include && len(field.Patterns) == 0 {
			warn(pointer(root, key, field.Name), "%q is empty, so every tool of the server is hidden; remove the field to serve them all", field.Name)
		}
		for i, text := range field.Patterns {
			ptr := pointer(root, key, field.Name, fmt.Sprint(i))
			switch {
			case !include && strings.Trim(text, "*") == "":
				warn(ptr, "%q pattern %q hides every tool of the server; to switch the server off, use \"disabled\": true", field.Name, text)
			case strings.HasPrefix(text, key+":") || strings.HasPrefix(text, key+"__"):
				bare, ok := strings.CutPrefix(text[len(key):], ":")
				if !ok {
					bare = text[len(key)+2:]
				}
				warn(ptr, "%q pattern %q starts with the server's key: a pattern is the tool's name as the server lists it, without the prefix the aggregator adds: write %q",
					field.Name, text, bare)
			}
			prev, dup := first[text]
			switch {
			case !dup:
				first[text] = seen{field.Name, i}
			case prev.field == field.Name:
				warn(ptr, "%q pattern %q is given twice (also at index %d)", field.Name, text, prev.index)
			case prev.field == "includeTools" || include:
				warn(ptr, "pattern %q is in both \"includeTools\" and %q: exclusion wins, so what it matches is hidden", text, map[bool]string{true: prev.field, false: field.Name}[include])
			}
		}
	}
	return warnings
}
