package stdio

import (
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

// Decoding the messages of every call allocates the message, a copy of its params or result
// (the reader's buffer is reused) and its ID: for a string ID its bytes and one header, for an
// integer one at most one word (MakeID's way took one more each).
func TestDecodeAllocations(t *testing.T) {
	for _, tc := range []struct {
		line string
		most float64
	}{
		{`{"jsonrpc":"2.0","id":"agg-3-17","result":{"content":[{"type":"text","text":"hi"}]}}`, 4},
		{`{"jsonrpc":"2.0","id":300,"method":"tools/call","params":{"name":"s__echo","arguments":{}}}`, 3},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"s__echo","arguments":{}}}`, 2},
	} {
		line := []byte(tc.line)
		if n := testing.AllocsPerRun(100, func() { _, _ = decodeMessage(line, false) }); n > tc.most {
			t.Errorf("decoding %s: %v allocations, want at most %v", tc.line, n, tc.most)
		}
	}
}
