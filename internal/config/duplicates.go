package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// duplicateKeys lists the members of data's objects whose key appeared before in the same
// object. JSON parsers keep the last one (encoding/json here, JSON.parse in Claude Desktop), so
// an earlier server entry with the same key would vanish without a word. data must be valid
// JSON.
func duplicateKeys(file string, data []byte) []Warning {
	type frame struct {
		object bool
		seen   map[string]bool
		key    bool // the next token of an object is a key
		index  int  // the next element of an array
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var (
		stack    []*frame
		path     []string // the reference tokens of the value being read
		warnings []Warning
	)
	// value is called before each value: it pushes the value's reference token.
	value := func() {
		if len(stack) == 0 {
			return
		}
		if f := stack[len(stack)-1]; !f.object {
			path = append(path, strconv.Itoa(f.index))
			f.index++
		}
	}
	// done is called after each value: it pops the value's reference token.
	done := func() {
		if len(stack) == 0 {
			return
		}
		path = path[:len(path)-1]
		if f := stack[len(stack)-1]; f.object {
			f.key = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return warnings
		}
		if len(stack) > 0 {
			if f := stack[len(stack)-1]; f.object && f.key {
				if d, ok := tok.(json.Delim); ok && d == '}' {
					stack = stack[:len(stack)-1]
					done()
					continue
				}
				key, _ := tok.(string)
				path = append(path, key)
				if f.seen[key] {
					msg := serverPrefix(path) + fmt.Sprintf("the key %q appears more than once in this object, and only its last value is used; remove the others", key)
					if len(path) == 2 && (path[0] == "mcpServers" || path[0] == vscodeRoot) {
						msg = fmt.Sprintf("server %q appears more than once in %q, and only its last entry is used; remove or rename the others", key, path[0])
					}
					warnings = append(warnings, Warning{File: file, Problem: Problem{Pointer: pointer(path...), Message: msg}})
				}
				f.seen[key] = true
				f.key = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			value()
			stack = append(stack, &frame{object: true, seen: map[string]bool{}, key: true})
		case json.Delim('['):
			value()
			stack = append(stack, &frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			done()
		default:
			value()
			done()
		}
	}
}
