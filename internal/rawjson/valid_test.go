package rawjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// strictCases are inputs on the edges of the grammar, valid and not.
var strictCases = []string{
	`{"a":"\u00e9\uD83D\uDE00\/\b\f\n\r\t\"\\"}`, `{"a":"\u00g0"}`, `{"a":"\u00e"}`, `{"a":"\x"}`, `{"a":"\`,
	"{\"a\":\"tab\there\"}", "{\"a\":\"\x7f\xff\xfe\"}", "{\"k\xff\":1}",
	`{"a":0}`, `{"a":-0}`, `{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":.5}`, `{"a":1.5e}`, `{"a":1.5e+}`,
	`{"a":1E-07}`, `{"a":+1}`, `{"a":1x}`, `{"a":-01.0}`, `{"a":123456789012345678901234567890}`,
	`{"a":true}`, `{"a":tru}`, `{"a":truex}`, `{"a":nul}`, `{"a":false,"b":null}`, `{"a":True}`,
	`{"a":[]}`, `{"a":[,]}`, `{"a":[1,]}`, `{"a":[1 2]}`, `{"a":{}}`, `{"a":{"b"}}`, `{"a":{"b":1,}}`,
	`{"a":{1:2}}`, `{"a":[}`, `{"a":{]}`, `{"a":1}}`, `{"a":1},`, ` {"a" : 1 } ` + "\n",
	"\ufeff{}", "{}\x00", `{"a":1}{}`, `{,}`, `{"a":1,,"b":2}`, `{"a" 1}`, `{"a":"x"]`,
	`[1,2]`, `"s"`, `1`, ``, ` `, `{`, `}`,
}

// Members accepts exactly the objects json.Valid accepts, and finds what Object finds in them.
func TestMembersAgreesWithValid(t *testing.T) {
	for _, c := range append(append([]string{}, objects...), strictCases...) {
		checkStrict(t, []byte(c))
	}
}

// encoding/json refuses values nested deeper than 10,000 containers; so does Members.
func TestMembersDepth(t *testing.T) {
	for _, depth := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		// The object itself is one level: the value holds depth-1 more.
		obj := []byte(`{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`)
		got := Members(obj, func([]byte, int, int) bool { return true })
		if want := json.Valid(obj); got != want {
			t.Errorf("depth %d: Members = %v, json.Valid = %v", depth, got, want)
		}
	}
}

// Members stops, and fails, as soon as fn refuses a member.
func TestMembersStops(t *testing.T) {
	var seen []string
	ok := Members([]byte(`{"a":1,"b":2,"c":3}`), func(k []byte, _, _ int) bool {
		seen = append(seen, string(k))
		return string(k) != "b"
	})
	if ok || fmt.Sprint(seen) != "[a b]" {
		t.Errorf("Members = %v after %v; want false after [a b]", ok, seen)
	}
}

func checkStrict(t *testing.T, obj []byte) {
	t.Helper()
	var got []member
	ok := Members(obj, func(k []byte, s, e int) bool {
		got = append(got, member{string(k), string(obj[s:e])})
		return true
	})
	want := json.Valid(obj) && bytes.HasPrefix(bytes.TrimLeft(obj, " \t\r\n"), []byte("{"))
	if ok != want {
		t.Fatalf("Members(%q) = %v, want %v (json.Valid %v)", obj, ok, want, json.Valid(obj))
	}
	if !ok {
		return
	}
	if ref, _ := members(obj); fmt.Sprint(got) != fmt.Sprint(ref) {
		t.Fatalf("Members(%q):\n got %q\nwant %q", obj, got, ref)
	}
}

func FuzzMembers(f *testing.F) {
	for _, c := range append(append([]string{}, objects...), strictCases...) {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, obj []byte) { checkStrict(t, obj) })
}

// A request as a client writes it: Members against what it replaces, json.Valid and Object.
var request = []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"server:echo","arguments":{"text":"hello, world: the quick brown fox","n":[1,2,3],"ok":true},"_meta":{"progressToken":"agg-p-7"}}}`)

func BenchmarkMembers(b *testing.B) {
	b.SetBytes(int64(len(request)))
	for b.Loop() {
		if !Members(request, func([]byte, int, int) bool { return true }) {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkValidThenObject(b *testing.B) {
	b.SetBytes(int64(len(request)))
	for b.Loop() {
		if !json.Valid(request) || !Object(request, func([]byte, int, int) bool { return true }) {
			b.Fatal("invalid")
		}
	}
}
