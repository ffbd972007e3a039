package stdio

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A batch is read as its messages, and the answers to its requests are written together as
// one array in the order of the requests, whatever order they are answered in; elements that
// are not messages are answered with errors in place; notifications and cancelled requests
// get no answer.
func TestBatch(t *testing.T) {
	in := strings.NewReader(`[{"jsonrpc":"2.0","id":1,"method":"a"}, {"jsonrpc":"2.0","method":"n"}, 5, {"jsonrpc":"2.0","id":"two","method":"b"}, {"jsonrpc":"2.0","id":3,"method":"c"}, {"jsonrpc":"2.0","id":1,"method":"dup"}]` + "\n" +
		`[{"jsonrpc":"2.0","method":"only-a-notification"}]` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}` + "\n" +
		`{"jsonrpc":"2.0","id":9,"method":"alone"}` + "\n" +
		"[]\n")
	var out lockedWriter
	allowed := true
	c := New(in, &out, &Options{Batches: func() bool { return allowed }})
	msgs := readAll(t, c)
	var methods []string
	for _, m := range msgs {
		methods = append(methods, m.(*jsonrpc.Request).Method)
	}
	if got := strings.Join(methods, " "); got != "a n b c only-a-notification notifications/cancelled alone" {
		t.Fatalf("read %s", got)
	}
	if got := out.String(); got != `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: an empty batch"}}`+"\n" {
		t.Fatalf("before any answer, wrote %q; want only the answer to the empty batch", got)
	}
	out.Reset()
	id := func(v any) jsonrpc.ID { i, _ := jsonrpc.MakeID(v); return i }
	c.Write(&jsonrpc.Response{ID: id(float64(9)), Result: json.RawMessage(`"alone"`)})
	c.WriteResponse(id("two"), json.RawMessage(`{"b": 2}`), nil)
	if got := out.String(); got != `{"jsonrpc":"2.0","id":9,"result":"alone"}`+"\n" {
		t.Fatalf("with the batch incomplete, wrote %q; want only the answer outside it", got)
	}
	out.Reset()
	c.Write(&jsonrpc.Response{ID: id(float64(1)), Error: &jsonrpc.Error{Code: -1, Message: "no"}})
	want := `[{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"no"}},` +
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: unmarshaling jsonrpc message: json: cannot unmarshal number into Go value of type stdio.wireMessage"}},` +
		`{"jsonrpc":"2.0","id":"two","result":{"b": 2}},` +
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: the request ID 1 is already in use by a request in a batch"}}]` + "\n"
	if got := out.String(); got != want {
		t.Errorf("the batch's answer:\n got %s\nwant %s", got, want)
	}

	// Where batches are not allowed, they are bad lines.
	allowed = false
	var bad []badLine
	c = New(strings.NewReader(`[{"jsonrpc":"2.0","id":1,"method":"a"}]`+"\n"), &out, &Options{Batches: func() bool { return allowed }})
	if msgs := readAll(t, c, &bad); len(msgs) != 0 || len(bad) != 1 {
		t.Errorf("a batch where none is allowed: read %v, bad lines %v", msgs, bad)
	}
}

// lockedWriter is a bytes.Buffer for writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func (w *lockedWriter) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Reset()
}

// Whatever a batch holds, every request read from it is answered exactly once, inside the
// batch's array (in the order read) or, when its ID was taken, on a line of its own; every
// line written is valid JSON; and nothing is written for a batch without requests.
func FuzzBatch(f *testing.F) {
	for _, s := range []string{
		`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"n"}]`,
		`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":1,"method":"b"},7,[],{}]`,
		`[{"jsonrpc":"2.0","id":"x","method":"a","params":{"_meta":{}}},{"jsonrpc":"2.0","id":"x","result":{}}]`,
		`[]`,
		`[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}},{"jsonrpc":"2.0","id":1,"method":"a"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.ContainsAny(line, "\r\n") {
			return
		}
		var out lockedWriter
		c := New(bytes.NewReader(append(line, '\n')), &out, &Options{Batches: func() bool { return true }})
		var calls []jsonrpc.ID
		var bad []badLine
		for _, m := range readAll(t, c, &bad) {
			if r, ok := m.(*jsonrpc.Request); ok && r.IsCall() {
				calls = append(calls, r.ID)
			}
		}
		before := out.String()
		for i, id := range calls {
			c.WriteResponse(id, json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), nil)
		}
		answered := map[int]int{}
		for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if l == "" {
				continue
			}
			if !json.Valid([]byte(l)) {
				t.Fatalf("wrote a line that is not JSON: %q", l)
			}
			var msgs []struct {
				Result struct {
					N *int `json:"n"`
				} `json:"result"`
			}
			if l[0] != '[' {
				l = "[" + l + "]"
			}
			if err := json.Unmarshal([]byte(l), &msgs); err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			for _, m := range msgs {
				if m.Result.N != nil {
					answered[*m.Result.N]++
				}
			}
		}
		for i := range calls {
			if answered[i] != 1 {
				t.Fatalf("request %d (id %v) answered %d times; output:\n%s", i, calls[i].Raw(), answered[i], out.String())
			}
		}
		if len(calls) == 0 && before != out.String() {
			t.Fatalf("answers written without requests")
		}
	})
}

// writesRecorder keeps each write apart.
type writesRecorder struct {
	mu     sync.Mutex
	writes []string
}

func (w *writesRecorder) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, string(p))
	return len(p), nil
}

// A batch's answer is written in one write, however large its answers: a reader of the output
// sees the array whole (a shared process's receipts name each request it answers).
func TestBatchAnswerInOneWrite(t *testing.T) {
	var out writesRecorder
	c := New(strings.NewReader(`[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","id":2,"method":"b"}]`+"\n"), &out, &Options{Batches: func() bool { return true }})
	readAll(t, c)
	id := func(v any) jsonrpc.ID { i, _ := jsonrpc.MakeID(v); return i }
	large := `"` + strings.Repeat("x", 100<<10) + `"`
	c.WriteResponse(id(float64(1)), json.RawMessage(large), nil)
	c.WriteResponse(id(float64(2)), json.RawMessage(`{}`), nil)
	want := `[{"jsonrpc":"2.0","id":1,"result":` + large + `},{"jsonrpc":"2.0","id":2,"result":{}}]` + "\n"
	if len(out.writes) != 1 || out.writes[0] != want {
		t.Errorf("the batch's answer in %d writes (want 1), of %d bytes in all", len(out.writes), len(strings.Join(out.writes, "")))
	}
}

// raceEnabled says the tests run under the race detector (race_test.go).
var raceEnabled bool

// An ID is encoded in one allocation, however long a plain string it is.
func TestEncodeIDAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates beside the code")
	}
	id, _ := jsonrpc.MakeID(strings.Repeat("agg-3-", 20))
	if n := testing.AllocsPerRun(100, func() { _, _ = EncodeID(id) }); n != 1 {
		t.Errorf("EncodeID of a long string: %v allocations, want 1", n)
	}
}
