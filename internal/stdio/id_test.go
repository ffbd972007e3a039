package stdio

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// idOf makes the IDs jsonrpc.MakeID makes, equal to them (as map keys too) and holding the same
// value: the check that the SDK's ID is still the one interface value idOf takes it for.
func TestIDOf(t *testing.T) {
	for _, s := range []string{"", "agg-3-17", "x", "a longer ID than any header holds: 0123456789"} {
		want, _ := jsonrpc.MakeID(s)
		if got := idOf(s); got != want || got.Raw() != any(s) || !got.IsValid() {
			t.Errorf("idOf(%q) = %#v, MakeID: %#v", s, got.Raw(), want.Raw())
		}
	}
	for _, n := range []int64{0, 7, 255, 256, 1 << 40, -5, 999999999999999} {
		want, _ := jsonrpc.MakeID(float64(n))
		if got := idOf(n); got != want || got.Raw() != any(n) || !got.IsValid() {
			t.Errorf("idOf(%d) = %#v, MakeID: %#v", n, got.Raw(), want.Raw())
		}
		keys := map[jsonrpc.ID]bool{want: true}
		if !keys[idOf(n)] {
			t.Errorf("idOf(%d) is not the key MakeID's ID is", n)
		}
	}
}

// Decoding the messages of every call allocates the message, with its params or result and
// its ID's bytes in the same allocation when they fit (a box), and the ID's interface value: for
// a string ID one header, for an integer one at most one word. (MakeID's way took one more each,
// and the copies of the params or result and of a string ID's bytes one each.)
func TestDecodeAllocations(t *testing.T) {
	large := `{"text":"` + strings.Repeat("x", responseRoom) + `"}`
	for _, tc := range []struct {
		line string
		most float64
	}{
		{`{"jsonrpc":"2.0","id":"agg-3-17","result":{"content":[{"type":"text","text":"hi"}]}}`, 2},
		{`{"jsonrpc":"2.0","id":300,"method":"tools/call","params":{"name":"s__echo","arguments":{}}}`, 2},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"s__echo","arguments":{}}}`, 1},
		// Nothing to copy: the message, and the name of a method not of the common ones.
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 2},
		// Too large for a box: the message, its result, the ID's bytes and header.
		{`{"jsonrpc":"2.0","id":"agg-3-18","result":` + large + `}`, 4},
	} {
		line := []byte(tc.line)
		if n := testing.AllocsPerRun(100, func() { _, _ = decodeMessage(line, false) }); n > tc.most {
			t.Errorf("decoding %.80s: %v allocations, want at most %v", tc.line, n, tc.most)
		}
	}
}

// What a box holds stays as it was read: an append to the params of a message in a box (which
// hold the ID's bytes after them) copies them, and leaves the ID as it was.
func TestDecodeBoxKeepsID(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":"agg-1-2","method":"tools/call","params":{"name":"e"}}`)
	msg, err := decodeMessage(line, false)
	if err != nil {
		t.Fatal(err)
	}
	req := msg.(*jsonrpc.Request)
	_ = append(req.Params, strings.Repeat("!", 16)...)
	for i := range line {
		line[i] = 'X' // the reader's buffer, reused
	}
	if id := req.ID.Raw(); id != "agg-1-2" || string(req.Params) != `{"name":"e"}` {
		t.Errorf("after an append to the params: ID %q, params %s", id, req.Params)
	}
}
