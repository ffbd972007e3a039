package trust

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The digests are of the JSON Canonicalization Scheme (RFC 8785) of a value: members sorted
// by their names' UTF-16 code units, no whitespace, strings escaped one way, numbers written
// as JavaScript writes a double. So a definition that a server re-serializes with another
// key order, indentation, escaping or number spelling (1.0 for 1) keeps its digest, and
// anyone can recompute one with a JCS library.

// digest is the SHA-256 of the canonical form of v, in hex.
func digest(v any) string {
	var b bytes.Buffer
	canonical(&b, v)
	sum := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(sum[:])
}

// decode reads one JSON value as canonical wants it: objects as map[string]any, arrays as
// []any, numbers as json.Number (their text, which canonical writes as a double).
func decode(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// canonical writes the RFC 8785 form of v, a value from decode (or a string).
func canonical(b *bytes.Buffer, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case string:
		canonicalString(b, v)
	case json.Number:
		b.WriteString(canonicalNumber(string(v)))
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			canonical(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, compareUTF16)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			canonicalString(b, k)
			b.WriteByte(':')
			canonical(b, v[k])
		}
		b.WriteByte('}')
	default:
		panic(fmt.Sprintf("trust: canonical: %T is not a decoded JSON value", v))
	}
}

// compareUTF16 orders strings by their UTF-16 code units (RFC 8785, 3.2.3), which differs
// from the order of their UTF-8 bytes only where a character above U+FFFF meets one from
// U+E000 to U+FFFF.
func compareUTF16(a, b string) int {
	if isASCII(a) && isASCII(b) {
		return strings.Compare(a, b)
	}
	return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// canonicalString writes s as RFC 8785 does (3.2.2.2): the escapes \" \\ \b \f \n \r \t,
// \u00xx for the other control characters, and every other character as it is.
func canonicalString(b *bytes.Buffer, s string) {
	const hexDigits = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20:
			b.WriteByte(c)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		default:
			b.WriteString(`\u00`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xF])
		}
	}
	b.WriteByte('"')
}

// canonicalNumber writes the JSON number text as RFC 8785 does (3.2.2.3): the double it
// denotes, as ECMAScript's Number.prototype.toString writes it. A number beyond the range
// of a double, which RFC 8785 cannot represent, is kept as written.
func canonicalNumber(text string) string {
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) {
		return text
	}
	return es6Number(f)
}

// es6Number is Number.prototype.toString of f (ECMA-262, Number::toString): the shortest
// digits that read back as f, in plain notation for exponents from -7 to 20, else with an
// exponent.
func es6Number(f float64) string {
	if f == 0 {
		return "0" // also -0
	}
	if f < 0 {
		return "-" + es6Number(-f)
	}
	// The shortest digits s and exponent: f = 0.s × 10^n.
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±x
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	k, n := len(digits), x+1
	switch {
	case k <= n && n <= 21:
		return digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		return digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		return "0." + strings.Repeat("0", -n) + digits
	}
	sign := "+"
	if n-1 < 0 {
		sign = "-"
	}
	exponent := strconv.Itoa(abs(n - 1))
	if k == 1 {
		return digits + "e" + sign + exponent
	}
	return digits[:1] + "." + digits[1:] + "e" + sign + exponent
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
