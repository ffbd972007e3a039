package mcpschema

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The TypeScript SDK v1 client (@modelcontextprotocol/sdk 1.32) compiles the outputSchema of
// every tool it lists, with Ajv (draft-07; strict: false, validateSchema: false), and a schema
// that does not compile makes listTools() throw: the whole list is lost
// (client/index.js, listTools: `this.cacheToolMetadata(result.tools)`, which calls
// `this._jsonSchemaValidator.getValidator(tool.outputSchema)` for each tool, outside any try).
// v2 catches such errors per tool. No schema keyword says what Ajv refuses to compile, so
// compileProblems finds it: only what certainly fails in Ajv, so that nothing v1 accepts is
// withheld (test/interop compares with Ajv itself on the corpus).
//
// What Ajv refuses (ajv 8, dist/compile/validate): a keyword of its draft-07 vocabularies whose
// value has the wrong type (KeywordCxt: "<keyword> value must be <types>"); a "type" that is
// not a JSON type (getJSONTypes); "nullable" without "type", or false with "type": "null"
// (getSchemaTypes); a "$ref" that does not resolve (MissingRefError); a "pattern" or a
// "patternProperties" key that is not a valid regular expression with the "u" flag
// (usePattern: new RegExp(pattern, "u")). Only the schemas Ajv compiles are looked at: the
// root, the subschemas of its applicators, and those "$ref" leads to.

// keywordTypes are the value types Ajv 8 requires of the keywords of its draft-07 vocabularies
// (each keyword definition's schemaType).
var keywordTypes = map[string][]string{
	"$ref":                 {"string"},
	"maximum":              {"number"},
	"minimum":              {"number"},
	"exclusiveMaximum":     {"number"},
	"exclusiveMinimum":     {"number"},
	"multipleOf":           {"number"},
	"maxLength":            {"number"},
	"minLength":            {"number"},
	"pattern":              {"string"},
	"maxProperties":        {"number"},
	"minProperties":        {"number"},
	"required":             {"array"},
	"maxItems":             {"number"},
	"minItems":             {"number"},
	"uniqueItems":          {"boolean"},
	"type":                 {"string", "array"},
	"nullable":             {"boolean"},
	"enum":                 {"array"},
	"not":                  {"object", "boolean"},
	"anyOf":                {"array"},
	"oneOf":                {"array"},
	"allOf":                {"array"},
	"if":                   {"object", "boolean"},
	"then":                 {"object", "boolean"},
	"else":                 {"object", "boolean"},
	"propertyNames":        {"object", "boolean"},
	"additionalProperties": {"boolean", "object"},
	"dependencies":         {"object"},
	"properties":           {"object"},
	"patternProperties":    {"object"},
	"additionalItems":      {"boolean", "object"},
	"items":                {"object", "array", "boolean"},
	"contains":             {"object", "boolean"},
	"format":               {"string"},
}

var jsonTypes = []string{"number", "integer", "string", "boolean", "array", "object", "null"}

// ajvType is the type Ajv sees of a decoded JSON value, as validSchemaType tells them apart.
func ajvType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number, float64:
		return "number"
	case bool:
		return "boolean"
	}
	return "null"
}

// compileProblems returns what makes Ajv refuse to compile the output schema root, which is at
// base in the definition.
func compileProblems(root any, base string) []Violation {
	w := &ajvWalk{root: root, base: base, seen: map[string]bool{}}
	w.hasID = hasMember(root, "$id")
	w.schema(root, "")
	return w.out
}

type ajvWalk struct {
	root  any
	base  string
	hasID bool // refs resolve against $ids: they are not looked at
	seen  map[string]bool
	out   []Violation
}

func (w *ajvWalk) add(at, rule, format string, args ...any) {
	p := w.base + at
	w.out = append(w.out, Violation{p, rule, p + " " + fmt.Sprintf(format, args...) +
		"; the TypeScript SDK v1 client compiles each tool's outputSchema when it lists tools, and one that does not compile makes it reject the whole list"})
}

// schema looks at the schema s, at the pointer at (relative to the output schema).
func (w *ajvWalk) schema(s any, at string) {
	obj, ok := s.(map[string]any)
	if !ok || w.seen[at] {
		return
	}
	w.seen[at] = true
	for _, k := range sortedKeys(obj) {
		want, known := keywordTypes[k]
		if known && !slices.Contains(want, ajvType(obj[k])) {
			w.add(at+"/"+escape(k), "type", "is %s; Ajv requires %s", article(ajvType(obj[k])), strings.Join(want, " or "))
		}
	}
	// getSchemaTypes: "type" (a name, or a list of names; "" is none) must name JSON types,
	// "nullable" needs a type, and cannot be false when the types include "null".
	var types []any
	switch t := obj["type"].(type) {
	case string:
		if t != "" {
			types = []any{t}
		}
	case []any:
		types = t
	}
	for _, t := range types {
		if name, isString := t.(string); !isString || !slices.Contains(jsonTypes, name) {
			w.add(at+"/type", "type", "has %s, which is not a JSON type", show(t))
			break
		}
	}
	if n, ok := obj["nullable"]; ok {
		if slices.Contains(types, any("null")) {
			if n == false {
				w.add(at+"/nullable", "nullable", `is false with the type "null", which Ajv refuses`)
			}
		} else if len(types) == 0 {
			w.add(at+"/nullable", "nullable", `is given without a "type", which Ajv refuses`)
		}
	}
	if p, ok := obj["pattern"].(string); ok {
		if why := jsRegexpProblem(p); why != "" {
			w.add(at+"/pattern", "pattern", "is not a valid JavaScript regular expression (with the u flag): %s", why)
		}
	}
	if ref, ok := obj["$ref"].(string); ok && !w.hasID {
		w.ref(ref, at)
	}
	// The subschemas Ajv compiles.
	for _, k := range []string{"not", "propertyNames", "contains", "additionalProperties"} {
		w.schema(obj[k], at+"/"+escape(k))
	}
	if _, ok := obj["if"]; ok && (obj["then"] != nil || obj["else"] != nil) {
		for _, k := range []string{"if", "then", "else"} {
			w.schema(obj[k], at+"/"+k)
		}
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		for i, sub := range asList(obj[k]) {
			w.schema(sub, fmt.Sprintf("%s/%s/%d", at, k, i))
		}
	}
	if props, ok := obj["properties"].(map[string]any); ok {
		for _, name := range sortedKeys(props) {
			w.schema(props[name], at+"/properties/"+escape(name))
		}
	}
	if props, ok := obj["patternProperties"].(map[string]any); ok {
		for _, p := range sortedKeys(props) {
			if why := jsRegexpProblem(p); why != "" {
				w.add(at+"/patternProperties/"+escape(p), "pattern", "is not a valid JavaScript regular expression (with the u flag): %s", why)
			}
			w.schema(props[p], at+"/patternProperties/"+escape(p))
		}
	}
	if deps, ok := obj["dependencies"].(map[string]any); ok {
		for _, name := range sortedKeys(deps) {
			w.schema(deps[name], at+"/dependencies/"+escape(name))
		}
	}
	switch items := obj["items"].(type) {
	case map[string]any:
		w.schema(items, at+"/items")
	case []any:
		for i, sub := range items {
			w.schema(sub, fmt.Sprintf("%s/items/%d", at, i))
		}
		w.schema(obj["additionalItems"], at+"/additionalItems")
	}
}

// ref follows the $ref of the schema at at: to the draft-07 meta-schema (which Ajv has), within
// the output schema (a JSON Pointer in the fragment), or nowhere.
func (w *ajvWalk) ref(ref, at string) {
	switch strings.TrimSuffix(ref, "#") {
	case "http://json-schema.org/draft-07/schema", "http://json-schema.org/schema":
		return
	case "":
		return // the root
	}
	frag, isLocal := strings.CutPrefix(ref, "#")
	if !isLocal {
		w.add(at+"/$ref", "$ref", "is %s, which Ajv cannot resolve (it loads no schemas)", show(ref))
		return
	}
	if !strings.HasPrefix(frag, "/") {
		return // an anchor: not looked at
	}
	ptr, err := url.PathUnescape(frag)
	if err != nil {
		return
	}
	target := lookup(w.root, ptr)
	if target == nil && !hasPointer(w.root, ptr) {
		w.add(at+"/$ref", "$ref", "is %s, which points to nothing in the output schema", show(ref))
		return
	}
	w.schema(target, ptr)
}

// hasPointer reports whether ptr leads to a value in doc (lookup returns nil for null too).
func hasPointer(doc any, ptr string) bool {
	i := strings.LastIndexByte(ptr, '/')
	if i < 0 {
		return false
	}
	parent := lookup(doc, ptr[:i])
	switch p := parent.(type) {
	case map[string]any:
		_, ok := p[strings.ReplaceAll(strings.ReplaceAll(ptr[i+1:], "~1", "/"), "~0", "~")]
		return ok
	}
	return false
}

// hasMember reports whether some object in v has the member name.
func hasMember(v any, name string) bool {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x[name]; ok {
			return true
		}
		for _, sub := range x {
			if hasMember(sub, name) {
				return true
			}
		}
	case []any:
		for _, sub := range x {
			if hasMember(sub, name) {
				return true
			}
		}
	}
	return false
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// jsRegexpProblem says why p is not a valid JavaScript regular expression with the u flag, as
// far as that is certain: "" when it is valid, or when it might be (features that newer
// JavaScript engines accept, such as modifiers "(?i:...)" and duplicate group names, are given
// the benefit of the doubt, and so are property names and class ranges, which are not looked
// into). The grammar is ECMAScript's Pattern[+UnicodeMode].
func jsRegexpProblem(p string) string {
	rs := []rune(p)
	groups, names := captureGroups(rs)
	var open []bool       // the groups open, true for a lookaround (which cannot be repeated)
	quantifiable := false // the last term is an atom a quantifier may follow
	afterQuantifier := false
	for i := 0; i < len(rs); i++ {
		c := rs[i]
		switch c {
		case '\\':
			j, why := jsEscape(rs, i, false, groups, names)
			if why != "" {
				return why
			}
			quantifiable = rs[i+1] != 'b' && rs[i+1] != 'B'
			i, afterQuantifier = j, false
		case '[':
			j, why := jsClass(rs, i)
			if why != "" {
				return why
			}
			i = j
			quantifiable, afterQuantifier = true, false
		case '(':
			lookaround := false
			if i+1 < len(rs) && rs[i+1] == '?' {
				rest := string(rs[i+2:])
				skip := "" // what follows "(?" up to the group's contents
				switch {
				case strings.HasPrefix(rest, ":"):
					skip = rest[:1]
				case strings.HasPrefix(rest, "="), strings.HasPrefix(rest, "!"):
					skip, lookaround = rest[:1], true
				case strings.HasPrefix(rest, "<="), strings.HasPrefix(rest, "<!"):
					skip, lookaround = rest[:2], true
				case strings.HasPrefix(rest, "<"):
					end := strings.IndexByte(rest, '>')
					if end <= 1 || !jsIdentifier(rest[1:end]) {
						return "a group name that is not an identifier"
					}
					skip = rest[:end+1]
				case modifiers(rest):
					skip = rest[:strings.IndexByte(rest, ':')+1]
				default:
					return fmt.Sprintf(`"(?%s" does not start a group in JavaScript`, firstRunes(rest, 2))
				}
				i += 1 + len([]rune(skip))
			}
			open = append(open, lookaround)
			quantifiable, afterQuantifier = false, false
		case ')':
			if len(open) == 0 {
				return `an unmatched ")"`
			}
			lookaround := open[len(open)-1]
			open = open[:len(open)-1]
			quantifiable, afterQuantifier = !lookaround, false
		case '*', '+', '?':
			if c == '?' && afterQuantifier {
				afterQuantifier = false // lazy
				continue
			}
			if !quantifiable {
				return fmt.Sprintf("nothing to repeat before %q", c)
			}
			quantifiable, afterQuantifier = false, true
		case '{':
			j, why := quantifierEnd(rs, i)
			if why != "" {
				return why
			}
			if !quantifiable {
				return "nothing to repeat before " + string(rs[i:j+1])
			}
			i = j
			quantifiable, afterQuantifier = false, true
		case '}', ']':
			return fmt.Sprintf(`a lone %q (the u flag wants "\%c")`, c, c)
		case '|', '^', '$':
			quantifiable, afterQuantifier = false, false
		default:
			quantifiable, afterQuantifier = true, false
		}
	}
	if len(open) > 0 {
		return `an unterminated group (a "(" without its ")")`
	}
	return ""
}

// captureGroups counts the capturing groups of the pattern rs and collects their names.
func captureGroups(rs []rune) (int, []string) {
	n, inClass := 0, false
	var names []string
	for i := 0; i < len(rs); i++ {
		switch {
		case rs[i] == '\\':
			i++
		case inClass:
			inClass = rs[i] != ']'
		case rs[i] == '[':
			inClass = true
		case rs[i] == '(':
			rest := string(rs[i+1:])
			if !strings.HasPrefix(rest, "?") {
				n++
			} else if strings.HasPrefix(rest, "?<") && !strings.HasPrefix(rest, "?<=") && !strings.HasPrefix(rest, "?<!") {
				n++
				if end := strings.IndexByte(rest, '>'); end > 2 {
					names = append(names, rest[2:end])
				}
			}
		}
	}
	return n, names
}

// jsEscape checks the escape that starts at rs[i] ("\"), in a character class or not, and
// returns the index of its last character.
func jsEscape(rs []rune, i int, inClass bool, groups int, names []string) (int, string) {
	if i+1 >= len(rs) {
		return i, `it ends with "\"`
	}
	i++
	e := rs[i]
	hex := func(from, n int) bool {
		if from+n > len(rs) {
			return false
		}
		for _, r := range rs[from : from+n] {
			if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
				return false
			}
		}
		return true
	}
	switch {
	case strings.ContainsRune(`^$\.*+?()[]{}|/`, e), strings.ContainsRune("dDsSwWfnrtv", e):
		return i, ""
	case e == '-' && inClass, e == 'b':
		return i, ""
	case e == 'B' && !inClass:
		return i, ""
	case e == 'x':
		if !hex(i+1, 2) {
			return i, `"\x" without two hexadecimal digits`
		}
		return i + 2, ""
	case e == 'u':
		if i+1 < len(rs) && rs[i+1] == '{' {
			end := slices.Index(rs[i+1:], '}')
			if end < 2 || !hex(i+2, end-1) {
				return i, `"\u{" without hexadecimal digits and "}"`
			}
			digits := strings.TrimLeft(string(rs[i+2:i+1+end]), "0")
			if v, _ := strconv.ParseUint("0"+digits, 16, 64); len(digits) > 6 || v > 0x10FFFF {
				return i, `"\u{...}" beyond U+10FFFF`
			}
			return i + 1 + end, ""
		}
		if !hex(i+1, 4) {
			return i, `"\u" without four hexadecimal digits`
		}
		return i + 4, ""
	case e == 'c':
		if i+1 >= len(rs) || !(rs[i+1] >= 'a' && rs[i+1] <= 'z' || rs[i+1] >= 'A' && rs[i+1] <= 'Z') {
			return i, `"\c" without a letter`
		}
		return i + 1, ""
	case e == 'p' || e == 'P':
		end := -1
		if i+1 < len(rs) && rs[i+1] == '{' {
			end = slices.Index(rs[i+1:], '}')
		}
		if end < 2 {
			return i, fmt.Sprintf(`"\%c" without a property in braces`, e)
		}
		return i + 1 + end, "" // the property's name is not looked into
	case e == '0':
		if i+1 < len(rs) && rs[i+1] >= '0' && rs[i+1] <= '9' {
			return i, `"\0" followed by a digit`
		}
		return i, ""
	case e >= '1' && e <= '9' && !inClass:
		j := i
		for j+1 < len(rs) && rs[j+1] >= '0' && rs[j+1] <= '9' {
			j++
		}
		if n, err := strconv.Atoi(string(rs[i : j+1])); err != nil || n > groups {
			return i, fmt.Sprintf(`"\%s" refers to a group the pattern does not have`, string(rs[i:j+1]))
		}
		return j, ""
	case e == 'k' && !inClass:
		end := -1
		if i+1 < len(rs) && rs[i+1] == '<' {
			end = slices.Index(rs[i+1:], '>')
		}
		if end < 2 || !slices.Contains(names, string(rs[i+2:i+1+end])) {
			return i, `"\k" without the name of one of the pattern's groups`
		}
		return i + 1 + end, ""
	}
	if inClass {
		return i, fmt.Sprintf(`"\%c" is not an escape the u flag allows in a character class`, e)
	}
	return i, fmt.Sprintf(`"\%c" is not an escape the u flag allows`, e)
}

// jsClass checks the character class that starts at rs[i] ("["), and returns the index of its
// closing "]".
func jsClass(rs []rune, i int) (int, string) {
	for j := i + 1; j < len(rs); j++ {
		switch rs[j] {
		case '\\':
			end, why := jsEscape(rs, j, true, 0, nil)
			if why != "" {
				return 0, why
			}
			j = end
		case ']':
			return j, ""
		}
	}
	return 0, `an unterminated character class (a "[" without its "]")`
}

// quantifierEnd returns the index of the "}" of the quantifier {n}, {n,} or {n,m} at rs[i].
func quantifierEnd(rs []rune, i int) (int, string) {
	j := i + 1
	number := func() string {
		from := j
		for j < len(rs) && rs[j] >= '0' && rs[j] <= '9' {
			j++
		}
		return string(rs[from:j])
	}
	notQuantifier := `a "{" that is not a quantifier (the u flag wants "\{")`
	low := number()
	if low == "" {
		return 0, notQuantifier
	}
	high := low
	if j < len(rs) && rs[j] == ',' {
		j++
		high = number()
	}
	if j >= len(rs) || rs[j] != '}' {
		return 0, notQuantifier
	}
	if high != "" && numberLess(high, low) {
		return 0, "the numbers of " + string(rs[i:j+1]) + " are out of order"
	}
	return j, ""
}

// numberLess compares two decimal numbers of any length.
func numberLess(a, b string) bool {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// modifiers reports whether rest (after "(?") is a modifiers group, "i:", "-m:", "s-i:" ...,
// which newer engines accept.
func modifiers(rest string) bool {
	end := strings.IndexByte(rest, ':')
	if end <= 0 {
		return false
	}
	return strings.Trim(rest[:end], "ims-") == ""
}

func jsIdentifier(s string) bool {
	for i, r := range s {
		letter := r == '_' || r == '$' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 0x7f
		if !letter && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return s != ""
}

func firstRunes(s string, n int) string {
	rs := []rune(s)
	return string(rs[:min(n, len(rs))])
}
