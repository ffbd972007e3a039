package shared

import (
	"bytes"
	"testing"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// sameRequest says how two readings of a request differ ("" when they do not).
func sameRequest(fast, slow request) string {
	switch {
	case !bytes.Equal(fast.id, slow.id):
		return "ID " + string(fast.id) + " against " + string(slow.id)
	case fast.method != slow.method:
		return "method " + fast.method + " against " + slow.method
	case !bytes.Equal(fast.params, slow.params):
		return "params " + string(fast.params) + " against " + string(slow.params)
	case !bytes.Equal(fast.line, slow.line):
		return "line"
	case !bytes.Equal(fast.token(), slow.token()):
		return "progress token " + string(fast.token()) + " against " + string(slow.token())
	}
	return ""
}

// readBoth reads line by its places and, when they read it, member by member too, failing t
// when the two readings differ.
func readBoth(t *testing.T, line []byte) (request, bool) {
	t.Helper()
	fast, ok := readOwnRequest(line)
	if !ok {
		return request{}, false
	}
	slow, ok := readMembers(line)
	if !ok {
		t.Fatalf("%s: read by its places, not member by member", line)
	}
	if d := sameRequest(fast, slow); d != "" {
		t.Fatalf("%s: %s", line, d)
	}
	return fast, true
}

// The requests a session's core writes (stdio.Request) are read by their places, as member by
// member, and so are their progress tokens; lines of other shapes are left to the reading
// member by member.
func TestReadOwnRequest(t *testing.T) {
	own := []struct {
		method string
		params string
		token  string
	}{
		{"tools/call", `{"name":"echo","arguments":{"text":"hello"}}`, ""},
		{"tools/call", `{"name":"echo","arguments":{"text":"h\"i\\ \u00e9"},"_meta":{"progressToken":"agg-3-p1"}}`, `"agg-3-p1"`},
		{"tools/call", `{"_meta":{"progressToken":7},"name":"x"}`, `7`},
		{"tools/call", `{"name":"x","arguments":{"_meta":"not the request's"}}`, ""},
		{"tools/call", `{"name":"x","\u005fmeta":{"progressToken":"agg-3-p2"}}`, `"agg-3-p2"`},
		{"ping", ``, ""},
		{"resources/read", `{"uri":"file:///a b"}`, ""},
		{"a/method/of its own ✓", `[]`, ""},
	}
	for _, c := range own {
		var params [][]byte
		if c.params != "" {
			params = [][]byte{[]byte(c.params)}
		}
		line := bytes.TrimSpace(bytes.Join(stdio.Request("agg-3-17", c.method, params...), nil))
		fast, ok := readBoth(t, line)
		if !ok {
			t.Errorf("%s: not read by its places", line)
			continue
		}
		if string(fast.id) != "agg-3-17" || string(fast.token()) != c.token {
			t.Errorf("%s: ID %s, token %s", line, fast.id, fast.token())
		}
	}
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":"agg-3-1","method":"x","params":{}, "id":"other"}`,
		`{"jsonrpc":"2.0","id":"agg-3-1","method":"x","params":{},"id":"other"}`,
		`{"jsonrpc":"2.0","id":"agg-3-1","method":"x","params":{}}}`,
		`{"jsonrpc":"2.0","id":"agg\u002d3-1","method":"x"}`,
		`{"jsonrpc":"2.0","id":7,"method":"x"}`,
		`{"jsonrpc":"2.0","id":"agg-3-1","method":"x" }`,
		`{"jsonrpc":"2.0","id":"a","result":{}}`,
		`{"jsonrpc":"2.0","id":"","method":"x"}`,
	} {
		if _, ok := readOwnRequest([]byte(line)); ok {
			t.Errorf("%s: read by its places", line)
		}
	}
}

// Whatever line the places read, member by member reads the same.
func FuzzReadOwnRequest(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":"agg-3-17","method":"tools/call","params":{"name":"echo"}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"agg-3-17","method":"ping"}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a","method":"m","params":{"_meta":{"progressToken":1}}}`))
	f.Fuzz(func(t *testing.T, line []byte) { readBoth(t, line) })
}
