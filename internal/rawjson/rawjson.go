// Package rawjson finds the members of a JSON object without decoding it: the byte ranges of
// their values, so that a message can be routed and forwarded with its values as they were
// written. Object and the functions built on it expect well-formed JSON (a message already
// decoded, a definition already checked); on malformed input they report failure, not always,
// and never panic. Members (valid.go) reads input not known to be well-formed, checking it as
// json.Valid does in the same pass.
package rawjson

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// Object calls fn for each member of the JSON object obj, in order, with its key (unescaped)
// and the byte range of its value in obj. It stops early when fn returns false. It reports
// whether obj is an object whose members could all be read (true as well when fn stopped it).
// The key is only valid during the call.
func Object(obj []byte, fn func(key []byte, start, end int) bool) bool {
	return eachMember(obj, false, func(key []byte, _, start, end int) bool { return fn(key, start, end) })
}

// eachMember is Object, with where each member's key starts in obj too; strict, it is Members
// (valid.go): it checks every value as json.Valid does, and fails when fn stops it.
func eachMember(obj []byte, strict bool, fn func(key []byte, keyStart, start, end int) bool) bool {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return false
	}
	i = skipSpace(obj, i+1)
	if i < len(obj) && obj[i] == '}' {
		return skipSpace(obj, i+1) == len(obj)
	}
	for i < len(obj) {
		if obj[i] != '"' {
			return false
		}
		kstart := i
		var kend int
		var escaped bool
		if strict {
			kend, escaped = validString(obj, i)
		} else {
			kend, escaped = skipString(obj, i)
		}
		if kend < 0 {
			return false
		}
		key := obj[i+1 : kend-1]
		if escaped || !utf8.Valid(key) { // encoding/json unescapes, and replaces bad bytes
			var s string
			if json.Unmarshal(obj[i:kend], &s) != nil {
				return false
			}
			key = []byte(s)
		}
		i = skipSpace(obj, kend)
		if i >= len(obj) || obj[i] != ':' {
			return false
		}
		start := skipSpace(obj, i+1)
		var end int
		if strict {
			end = validValue(obj, start, 1)
		} else {
			end = skipValue(obj, start)
		}
		if end < 0 {
			return false
		}
		if !fn(key, kstart, start, end) {
			return !strict
		}
		i = skipSpace(obj, end)
		if i >= len(obj) {
			return false
		}
		switch obj[i] {
		case ',':
			i = skipSpace(obj, i+1)
		case '}':
			return skipSpace(obj, i+1) == len(obj)
		default:
			return false
		}
	}
	return false
}

// Array calls fn with the byte range of each element of the JSON array arr, in order. It stops
// early when fn returns false. It reports whether arr is an array whose elements could all be
// read (true as well when fn stopped it). Like Object, it expects well-formed JSON.
func Array(arr []byte, fn func(start, end int) bool) bool {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return false
	}
	i = skipSpace(arr, i+1)
	if i < len(arr) && arr[i] == ']' {
		return skipSpace(arr, i+1) == len(arr)
	}
	for i < len(arr) {
		end := skipValue(arr, i)
		if end < 0 {
			return false
		}
		if !fn(i, end) {
			return true
		}
		i = skipSpace(arr, end)
		if i >= len(arr) {
			return false
		}
		switch arr[i] {
		case ',':
			i = skipSpace(arr, i+1)
		case ']':
			return skipSpace(arr, i+1) == len(arr)
		default:
			return false
		}
	}
	return false
}

// Member finds the value of the top-level member key of the JSON object obj. When the key
// occurs more than once, the last one counts, as with encoding/json.
func Member(obj []byte, key string) (start, end int, ok bool) {
	found := false
	valid := Object(obj, func(k []byte, s, e int) bool {
		if string(k) == key {
			start, end, found = s, e, true
		}
		return true
	})
	return start, end, valid && found
}

// String returns the contents of the JSON string value v without its quotes when it has no
// escapes and is valid UTF-8 (encoding/json would replace bad bytes), the common case that
// needs no allocation.
func String(v []byte) (s []byte, ok bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return nil, false
	}
	s = v[1 : len(v)-1]
	if bytes.IndexByte(s, '\\') >= 0 || bytes.IndexByte(s, '"') >= 0 || !utf8.Valid(s) {
		return nil, false
	}
	return s, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string that starts at b[i] (a quote), and whether
// it has escapes; -1 when it does not end.
func skipString(b []byte, i int) (end int, escaped bool) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '"':
			return j + 1, escaped
		case '\\':
			escaped = true
			j++
		}
	}
	return -1, false
}

// SkipValue returns the index after the JSON value that starts at b[i], found as Object finds
// a member's (the value is not checked); -1 when there is none.
func SkipValue(b []byte, i int) int { return skipValue(b, i) }

// skipValue returns the index after the value that starts at b[i]; -1 when there is none.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		end, _ := skipString(b, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end, _ := skipString(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	case ',', '}', ']', ':':
		return -1
	default: // number, true, false, null
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return j
			}
			j++
		}
		return j
	}
}

// Decode returns the JSON string v decoded: without allocating beyond the result in the common
// case (no escapes); ok is false when v is not a JSON string.
func Decode(v []byte) (string, bool) {
	if s, ok := String(v); ok {
		return string(s), true
	}
	var s string
	if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// StringMember returns the value of the top-level member key of obj when it is a string.
func StringMember(obj []byte, key string) (string, bool) {
	start, end, ok := Member(obj, key)
	if !ok {
		return "", false
	}
	return Decode(obj[start:end])
}

// Has reports whether the JSON object obj has the top-level member key.
func Has(obj []byte, key string) bool {
	_, _, ok := Member(obj, key)
	return ok
}

// Prepend returns the JSON object obj with member (an encoded `"key":value`) added as its
// first member; obj must be an object.
func Prepend(obj []byte, member string) []byte {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return obj
	}
	sep := ","
	if j := skipSpace(obj, i+1); j < len(obj) && obj[j] == '}' {
		sep = ""
	}
	out := make([]byte, 0, len(obj)+len(member)+1)
	out = append(out, obj[:i+1]...)
	out = append(out, member...)
	out = append(out, sep...)
	return append(out, obj[i+1:]...)
}

// Replace returns obj with the value in obj[start:end] replaced by value.
func Replace(obj []byte, start, end int, value []byte) []byte {
	out := make([]byte, 0, len(obj)-(end-start)+len(value))
	out = append(out, obj[:start]...)
	out = append(out, value...)
	return append(out, obj[end:]...)
}

// Without is the object obj without the members keys, the others as they were written, key
// and value byte for byte (the space between members is dropped); obj itself when it has none
// of them.
func Without(obj []byte, keys ...string) []byte {
	var out []byte // nil until a member is left out
	kept := 0      // members kept
	from := -1     // where the kept members written to out so far end in obj
	eachMember(obj, false, func(k []byte, ks, _, end int) bool {
		if slices.Contains(keys, string(k)) {
			if out == nil {
				out = make([]byte, 0, len(obj))
				out = append(out, '{')
				// The members before it, as they were.
				if kept > 0 {
					out = append(out, obj[firstKey(obj):from]...)
				}
			}
			return true
		}
		if out != nil {
			if kept > 0 {
				out = append(out, ',')
			}
			out = append(out, obj[ks:end]...)
		}
		kept++
		from = end
		return true
	})
	if out == nil {
		return obj
	}
	return append(out, '}')
}

// firstKey is where the first member of the object obj begins.
func firstKey(obj []byte) int {
	i := skipSpace(obj, 0)
	return skipSpace(obj, i+1)
}

// Marshal encodes v as JSON escaping only what JSON requires: encoding/json would also escape
// <, > and & (for HTML), and the texts that pass through the aggregator are read by people and
// models. nil when v cannot be encoded.
func Marshal(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
