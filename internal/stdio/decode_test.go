package stdio

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

var decodeSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a:echo","arguments":{ "x" : 1 }}}`,
	`{"jsonrpc":"2.0","id":"agg-7","result":{"content":[]}}`,
	`{"jsonrpc":"2.0","id":3,"error":{"code":-32042,"message":"no","data":[1,2]}}`,
	`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}`,
	`{"jsonrpc":"2.0","id":1.5,"result":{}}`,
	`{"jsonrpc":"2.0","id":12345678901234567890,"result":{}}`,
	`{"jsonrpc":"2.0","id":"\u0041","method":"p\u0069ng"}`,
	`{"jsonrpc":"2.0","ID":1,"Method":"x"}`,
	`{"jsonrpc":"2.0","id":1,"method":null,"result":null}`,
	`{"jsonrpc":"1.0","id":1,"method":"x"}`,
	`{"jsonrpc":"2.0","id":true,"method":"x"}`,
	`{"jsonrpc":"2.0","method":"x","method":"y","params":null}`,
	`{"jsonrpc":"2.0","id":1,"method":"\xff"}`,
	`{"jsonrpc":"2.0","result":{}}`,
	`[{"jsonrpc":"2.0","id":1,"method":"x"}]`,
	`{"jsonrpc":"2.0","id":1,"method":"x"`,
	// Malformed deep inside, where the fast path's one pass must find it as json.Valid does.
	`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":[01]}}`,
	`{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"\q"}}`,
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"a\":\"\x01\"}}",
	`{"jsonrpc":"2.0","id":1,"result":{"a":tru}}`,
}

// The fast decoder gives exactly what encoding/json gives, for every input.
func TestDecodeMatchesEncodingJSON(t *testing.T) {
	for _, s := range decodeSeeds {
		checkDecode(t, []byte(s))
	}
}

// FuzzDecodeMessage covers the message path of both sides: every line from the client and from
// a child is decoded here first.
func FuzzDecodeMessage(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkDecode(t, line)
	})
}

func checkDecode(t *testing.T, line []byte) {
	t.Helper()
	for _, owned := range []bool{false, true} {
		in := bytes.Clone(line)
		got, gotErr := decodeMessage(in, owned)
		want, wantErr := decodeSlow(line)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%s: error %v, encoding/json: %v", line, gotErr, wantErr)
		}
		if gotErr != nil {
			continue
		}
		if !owned && got != nil {
			// Nothing may point into a line that is not owned: the reader reuses its buffer.
			for i := range in {
				in[i] = 'X'
			}
		}
		if d := diffMessage(got, want); d != "" {
			t.Fatalf("%s (owned %v): %s", line, owned, d)
		}
	}
}

func diffMessage(got, want jsonrpc.Message) string {
	switch w := want.(type) {
	case *jsonrpc.Request:
		g, ok := got.(*jsonrpc.Request)
		switch {
		case !ok:
			return "not a request"
		case g.ID != w.ID:
			return "ID differs"
		case g.Method != w.Method:
			return "method " + g.Method + " != " + w.Method
		case !sameRaw(g.Params, w.Params):
			return "params " + string(g.Params) + " != " + string(w.Params)
		}
	case *jsonrpc.Response:
		g, ok := got.(*jsonrpc.Response)
		switch {
		case !ok:
			return "not a response"
		case g.ID != w.ID:
			return "ID differs"
		case !sameRaw(g.Result, w.Result):
			return "result " + string(g.Result) + " != " + string(w.Result)
		case (g.Error == nil) != (w.Error == nil):
			return "error presence differs"
		case g.Error != nil && !sameError(g.Error, w.Error):
			return "error differs"
		}
	}
	return ""
}

func sameError(a, b error) bool {
	ea, oka := a.(*jsonrpc.Error)
	eb, okb := b.(*jsonrpc.Error)
	return oka && okb && ea.Code == eb.Code && ea.Message == eb.Message && sameRaw(ea.Data, eb.Data)
}

func sameRaw(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// Lines longer than the reader's buffer arrive whole, the last one also without a newline.
func TestLongLines(t *testing.T) {
	var in bytes.Buffer
	var want []string
	for i, size := range []int{readBufferSize - 40, readBufferSize * 3, 1 << 20, readBufferSize*2 + 7} {
		params := `{"text":"` + strings.Repeat(string(rune('a'+i)), size) + `"}`
		want = append(want, params)
		in.WriteString(`{"jsonrpc":"2.0","method":"m","params":` + params + `}`)
		if i < 3 {
			in.WriteString("\n")
		}
	}
	c := New(&in, io.Discard, nil)
	msgs := readAll(t, c)
	if len(msgs) != len(want) {
		t.Fatalf("read %d messages, want %d", len(msgs), len(want))
	}
	for i, m := range msgs {
		if got := string(m.(*jsonrpc.Request).Params); got != want[i] {
			t.Errorf("message %d: params of %d bytes, want %d", i, len(got), len(want[i]))
		}
	}
}
