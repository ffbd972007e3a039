package rawjson

// Reading a line that is not yet known to be well-formed: Members checks it as json.Valid does
// while it finds the members, so that a message is scanned once, not twice (json.Valid's
// scanner, a step function called per byte, cost as much as the rest of decoding a message).

// maxDepth is encoding/json's limit on nesting (maxNestingDepth): a value nested deeper is
// invalid for it, and so for Members.
const maxDepth = 10000

// Members is Object for input not known to be well-formed: it reports true only when obj is a
// JSON object that json.Valid accepts and fn accepted every member (it returns false as soon as
// fn does, or as the input turns out malformed; fn may have seen members by then). The key is
// only valid during the call.
func Members(obj []byte, fn func(key []byte, start, end int) bool) bool {
	return eachMember(obj, true, func(key []byte, _, start, end int) bool { return fn(key, start, end) })
}

// validValue returns the index after the well-formed value that starts at b[i], where depth
// containers enclose it; -1 when there is none.
func validValue(b []byte, i, depth int) int {
	if i >= len(b) {
		return -1
	}
	switch c := b[i]; c {
	case '"':
		end, _ := validString(b, i)
		return end
	case '{', '[':
		if depth >= maxDepth {
			return -1
		}
		return validContainer(b, i, depth+1)
	case 't':
		return literal(b, i, "true")
	case 'f':
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	default:
		return validNumber(b, i)
	}
}

// validContainer returns the index after the well-formed object or array that starts at b[i],
// at nesting depth depth; -1 when there is none.
func validContainer(b []byte, i, depth int) int {
	closing := byte('}')
	if b[i] == '[' {
		closing = ']'
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == closing {
		return i + 1
	}
	for {
		if closing == '}' {
			if i >= len(b) || b[i] != '"' {
				return -1
			}
			end, _ := validString(b, i)
			if end < 0 {
				return -1
			}
			i = skipSpace(b, end)
			if i >= len(b) || b[i] != ':' {
				return -1
			}
			i = skipSpace(b, i+1)
		}
		if i = validValue(b, i, depth); i < 0 {
			return -1
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case closing:
			return i + 1
		default:
			return -1
		}
	}
}

// validString returns the index after the well-formed string that starts at b[i] (a quote),
// and whether it has escapes; -1 when it does not end or is malformed (a control character, an
// unknown escape). Bytes that are not UTF-8 are accepted, as encoding/json accepts them.
func validString(b []byte, i int) (end int, escaped bool) {
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return j + 1, escaped
		case c == '\\':
			escaped = true
			if j++; j >= len(b) {
				return -1, false
			}
			switch b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(b) {
					return -1, false
				}
				for _, h := range b[j+1 : j+5] {
					if !isHex(h) {
						return -1, false
					}
				}
				j += 4
			default:
				return -1, false
			}
		case c < 0x20:
			return -1, false
		}
	}
	return -1, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// literal returns the index after the literal word at b[i]; -1 when b does not have it there.
func literal(b []byte, i int, word string) int {
	if len(b)-i < len(word) || string(b[i:i+len(word)]) != word {
		return -1
	}
	return i + len(word)
}

// validNumber returns the index after the JSON number at b[i]: -?(0|[1-9][0-9]*)(.[0-9]+)?
// ([eE][+-]?[0-9]+)?; -1 when there is none. What follows it is the caller's to check.
func validNumber(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

// digits returns the index after the decimal digits at b[i:].
func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
