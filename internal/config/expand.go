package config

import "strings"

// LookupFunc returns the value of an environment variable and whether it is set, like
// os.LookupEnv (which is what the program passes).
type LookupFunc func(name string) (string, bool)

// Expand replaces environment references in s. It understands
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
// Expand never runs anything: there is no command substitution, arithmetic or globbing, and the
// result is never given to a shell. It returns the names of the variables that were referenced
// without a default and are not set, in order of appearance, each once.
func Expand(s string, lookup LookupFunc) (string, []string) {
	if strings.IndexByte(s, '$') < 0 {
		return s, nil
	}
	e := expander{lookup: lookup}
	out := e.expand(s)
	return out, e.missing
}

type expander struct {
	lookup  LookupFunc
	missing []string
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
