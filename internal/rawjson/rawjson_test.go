package rawjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

type member struct {
	Key   string
	Value string
}

// reference reads the members of a valid JSON object with encoding/json.
func reference(obj []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not an object")
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, member{tok.(string), string(v)})
	}
	return out, nil
}

func members(obj []byte) ([]member, bool) {
	var out []member
	ok := Object(obj, func(k []byte, s, e int) bool {
		out = append(out, member{string(k), string(obj[s:e])})
		return true
	})
	return out, ok
}

var objects = []string{
	`{}`,
	` { } `,
	`{"a":1}`,
	"{ \"a\" :\t[ 1 , 2.0e3 ] ,\r\n \"b\" : {\"c\":\"}]\\\"\"} }",
	`{"k\u00e9y":"v","esc\"aped":null,"":true,"n":-0.5e-7}`,
	`{"a":{"b":[{"c":[]}]},"a":"last"}`,
	`{"s":"\\","t":"\\\\\"","u":"[{"}`,
}

func TestObjectMatchesEncodingJSON(t *testing.T) {
	for _, obj := range objects {
		check(t, []byte(obj))
	}
}

func TestMalformed(t *testing.T) {
	for _, bad := range []string{``, `[]`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":"x`, `{"a":[1}`, `{"a":1}x`, `"a"`, `{a:1}`} {
		if _, ok := members([]byte(bad)); ok {
			t.Errorf("Object(%q) succeeded", bad)
		}
	}
}

// Array finds each element of an array as encoding/json reads them, and refuses what is not
// one.
func TestArray(t *testing.T) {
	for _, arr := range []string{`[]`, ` [ 1 ] `, `[{"a":"]"},"x\"]",[1,[2]],null, -1.5e3 ,true]`} {
		var got []json.RawMessage
		if !Array([]byte(arr), func(s, e int) bool { got = append(got, json.RawMessage(arr[s:e])); return true }) {
			t.Errorf("Array(%s) failed", arr)
			continue
		}
		var want []json.RawMessage
		if err := json.Unmarshal([]byte(arr), &want); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Errorf("Array(%s): %d elements, want %d", arr, len(got), len(want))
			continue
		}
		for i := range got {
			if !bytes.Equal(bytes.TrimSpace(want[i]), got[i]) {
				t.Errorf("Array(%s) element %d: %s, want %s", arr, i, got[i], want[i])
			}
		}
	}
	for _, bad := range []string{``, `{}`, `[`, `[1,]`, `[1 2]`, `[1]x`, `["a]`} {
		if Array([]byte(bad), func(int, int) bool { return true }) {
			t.Errorf("Array(%q) succeeded", bad)
		}
	}
}

func TestMember(t *testing.T) {
	obj := []byte(`{"name":"first","arguments":{"name":"inner"},"name":"last"}`)
	s, e, ok := Member(obj, "name")
	if !ok || string(obj[s:e]) != `"last"` {
		t.Errorf("Member = %q, %v; want the last top-level \"name\"", obj[s:e], ok)
	}
	if _, _, ok := Member(obj, "missing"); ok {
		t.Error("found a missing member")
	}
}

func TestString(t *testing.T) {
	for v, want := range map[string]string{`"abc"`: "abc", `""`: ""} {
		if s, ok := String([]byte(v)); !ok || string(s) != want {
			t.Errorf("String(%s) = %q, %v", v, s, ok)
		}
	}
	for _, v := range []string{`"a\"b"`, `"a\nb"`, `1`, `"`} {
		if _, ok := String([]byte(v)); ok {
			t.Errorf("String(%s) succeeded", v)
		}
	}
}

func BenchmarkMember(b *testing.B) {
	obj := []byte(`{"name":"server:echo","arguments":{"text":"hello","n":[1,2,3]},"_meta":{"progressToken":7}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, ok := Member(obj, "name"); !ok {
			b.Fatal("not found")
		}
	}
}

func check(t *testing.T, obj []byte) {
	t.Helper()
	want, err := reference(obj)
	got, ok := members(obj)
	if err != nil || !json.Valid(obj) {
		return // only valid objects must be read; the others must merely not panic
	}
	if !ok {
		t.Fatalf("Object(%q) failed", obj)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Object(%q):\n got %q\nwant %q", obj, got, want)
	}
}

func FuzzObject(f *testing.F) {
	for _, obj := range objects {
		f.Add([]byte(obj))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		check(t, obj)
		String(obj)
	})
}

// Without leaves a valid object with every member but the ones taken out, as they were.
func FuzzWithout(f *testing.F) {
	f.Add([]byte(`{"a":1,"_meta":{"x":[1,2]},"b":"\u00e9"}`), "_meta")
	f.Add([]byte(`{}`), "a")
	f.Add([]byte(`{"a":{"a":1},"a":2}`), "a")
	f.Fuzz(func(t *testing.T, obj []byte, key string) {
		var before map[string]any
		if json.Unmarshal(obj, &before) != nil || before == nil {
			return
		}
		out := Without(obj, key)
		var after map[string]any
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("Without(%s, %q) = %s: %v", obj, key, out, err)
		}
		delete(before, key)
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("Without(%s, %q) = %s", obj, key, out)
		}
	})
}

// Without keeps the other members byte for byte, their keys too, and gives an object with
// none of the keys back as it is.
func TestWithoutBytes(t *testing.T) {
	for _, tc := range []struct{ in, key, want string }{
		{`{"\u0061":1, "x":2 ,"b" : [1, 2]}`, "x", `{"\u0061":1,"b" : [1, 2]}`},
		{`{"x":2,"a":"\u00e9"}`, "x", `{"a":"\u00e9"}`},
		{`{"a":1,"b":2,"x":3}`, "x", `{"a":1,"b":2}`},
		{` {"a": 1} `, "x", ` {"a": 1} `},
		{`{"x":1}`, "x", `{}`},
	} {
		if got := string(Without([]byte(tc.in), tc.key)); got != tc.want {
			t.Errorf("Without(%s, %q) = %s, want %s", tc.in, tc.key, got, tc.want)
		}
	}
}
