package trust

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// TestCanonicalRFC8785 is the example of RFC 8785, 3.2.4, and its sorting example, 3.2.3.
func TestCanonicalRFC8785(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{
			`{
  "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`,
			`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		{
			`{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\"," +
				"\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
		},
		{`"\b\f\t\u001f\u007f"`, `"\b\f\t\u001f` + "\x7f" + `"`},
		{`{"a":{"c":1,"b":[{},[]]}}`, `{"a":{"b":[{},[]],"c":1}}`},
		{`1e400`, `1e400`}, // beyond a double: kept as written
	} {
		v, err := decode([]byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		canonical(&b, v)
		if b.String() != tc.want {
			t.Errorf("canonical of %s:\n got %s\nwant %s", tc.in, b.String(), tc.want)
		}
	}
}

// TestES6Number is the table of RFC 8785, Appendix B: doubles by their bits, as ECMAScript
// writes them.
func TestES6Number(t *testing.T) {
	for _, tc := range []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	} {
		if got := es6Number(math.Float64frombits(tc.bits)); got != tc.want {
			t.Errorf("%#016x: got %s, want %s", tc.bits, got, tc.want)
		}
	}
}

// TestDigestIgnoresSpelling: what a server's serializer may change without changing the
// definition leaves every digest as it was.
func TestDigestIgnoresSpelling(t *testing.T) {
	a := `{"name":"get","description":"Café <b> & 1","inputSchema":{"type":"object","properties":{"n":{"type":"integer","maximum":10,"minimum":1.0}},"required":["n"]},"annotations":{"readOnlyHint":true}}`
	b := `{
	  "annotations": {"readOnlyHint": true},
	  "inputSchema": {"required": ["n"], "properties": {"n": {"minimum": 1, "maximum": 1e1, "type": "integer"}}, "type": "object"},
	  "description": "Caf\u00e9 \u003cb\u003e \u0026 1",
	  "name": "get"
	}`
	if !json.Valid([]byte(b)) {
		t.Fatal("bad test JSON")
	}
	ma, mb := Read("s", Lists{Tools: []json.RawMessage{json.RawMessage(a)}}), Read("s", Lists{Tools: []json.RawMessage{json.RawMessage(b)}})
	da, db := ma.defs[0].pins(), mb.defs[0].pins()
	if len(da) == 0 || !equalMaps(da, db) {
		t.Errorf("members differ:\n%v\n%v", da, db)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
