package stdio

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

type badLine struct {
	line string
	err  error
}

// readAll reads messages until the end of the input; bad lines go to bad when it is not nil,
// and fail the test otherwise.
func readAll(t *testing.T, c *Conn, bad ...*[]badLine) []jsonrpc.Message {
	t.Helper()
	var msgs []jsonrpc.Message
	for {
		m, err := c.Read()
		if errors.Is(err, io.EOF) {
			return msgs
		}
		var bl *BadLineError
		if errors.As(err, &bl) && len(bad) > 0 {
			*bad[0] = append(*bad[0], badLine{string(bl.Line), bl.Err})
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
}

func TestReadSkipsAndReportsBadLines(t *testing.T) {
	var bad []badLine
	in := strings.NewReader("\n" +
		`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\r\n" +
		"   \n" +
		"not json\n" +
		`{"jsonrpc":"1.0","id":2,"method":"ping"}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		strings.Repeat("x", 300) + "\n" +
		`{"jsonrpc":"2.0","id":"last","result":{}}`) // no final newline
	c := New(in, io.Discard, &Options{MaxMessageSize: 100})
	msgs := readAll(t, c, &bad)
	if len(msgs) != 3 {
		t.Fatalf("read %d messages, want 3: %v", len(msgs), msgs)
	}
	if r, ok := msgs[0].(*jsonrpc.Request); !ok || r.Method != "ping" {
		t.Errorf("first message %#v, want the ping", msgs[0])
	}
	if r, ok := msgs[2].(*jsonrpc.Response); !ok || r.ID.Raw() != "last" {
		t.Errorf("last message %#v, want the response without a final newline", msgs[2])
	}
	if len(bad) != 3 || bad[0].line != "not json" || !strings.Contains(bad[1].line, `"1.0"`) || !errors.Is(bad[2].err, ErrTooLarge) || len(bad[2].line) != 256 {
		t.Errorf("bad lines %+v, want the garbage, the wrong version and the long line's head", bad)
	}
}

// A line over the limit is reported with its id, so that the request it answers can be failed,
// and reading goes on.
func TestTooLargeReported(t *testing.T) {
	in := strings.NewReader(`{"jsonrpc":"2.0","id":7,"result":{"text":"` + strings.Repeat("y", 1<<20) + `"}}` + "\n" +
		`{"jsonrpc":"2.0","id":8,"result":{}}` + "\n")
	c := New(in, io.Discard, &Options{MaxMessageSize: 1000})
	var bad []badLine
	msgs := readAll(t, c, &bad)
	if len(bad) != 1 || !errors.Is(bad[0].err, ErrTooLarge) {
		t.Fatalf("bad lines %v, want the long line", bad)
	}
	if id, ok := TooLargeID(bad[0].err); !ok || id.Raw() != int64(7) {
		t.Errorf("the long line's id: %v, %v; want 7", id.Raw(), ok)
	}
	if len(msgs) != 1 || msgs[0].(*jsonrpc.Response).ID.Raw() != int64(8) {
		t.Fatalf("got %v, want the next answer, 8", msgs)
	}
}

// A raised limit takes lines up to it, a lower one changes nothing, and LastSize is each
// message's line as the limit counts it (a shared process's reader of a server: each session
// holds the server's messages to its own limit).
func TestRaiseMaxMessageSize(t *testing.T) {
	line := `{"jsonrpc":"2.0","id":1,"result":{"text":"` + strings.Repeat("y", 2000) + `"}}`
	r, w := io.Pipe()
	c := New(r, io.Discard, &Options{MaxMessageSize: 1000})
	go func() {
		for range 3 {
			io.WriteString(w, line+"\n")
		}
		io.WriteString(w, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}} \n")
		w.Close()
	}()
	if _, err := c.Read(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a line over the limit: %v, want ErrTooLarge", err)
	}
	c.RaiseMaxMessageSize(4000)
	c.RaiseMaxMessageSize(500) // lower: no change
	for range 2 {
		if msg, err := c.Read(); err != nil {
			t.Fatalf("a line within the raised limit: %v", err)
		} else if _, ok := msg.(*jsonrpc.Response); !ok || c.LastSize() != len(line) {
			t.Errorf("got %T of %d bytes, want the response of %d", msg, c.LastSize(), len(line))
		}
	}
	if _, err := c.Read(); err != nil || c.LastSize() != len(`{"jsonrpc":"2.0","id":2,"result":{}} `) {
		t.Errorf("the last line: %v, LastSize %d", err, c.LastSize())
	}
}

// The id of a line too large to keep is found wherever it stands at the top level, never
// inside the result, however the line is split into pieces.
func TestTooLargeID(t *testing.T) {
	filler := `"content":[{"type":"text","text":"{\"id\": 99, \"x\": \"\\\"id\\\":98\"}"},{"id":97,"list":[{"id":96}]}]`
	for line, want := range map[string]any{
		`{"jsonrpc":"2.0","id":12,"result":{` + filler + `}}`:          int64(12),
		`{"result":{` + filler + `},"jsonrpc":"2.0","id":13}`:          int64(13), // the TypeScript SDK's order
		`{"result":{` + filler + `},"id" : "a\"b,}" ,"jsonrpc":"2.0"}`: `a"b,}`,
		`{"jsonrpc":"2.0","id":-3,"result":{` + filler + `}}`:          int64(-3),
		`{"jsonrpc":"2.0","result":{` + filler + `}}`:                  nil,
		`{"jsonrpc":"2.0","idx":5,"result":{` + filler + `}}`:          nil,
		`{"jsonrpc":"2.0","id":{"n":1},"result":{}}`:                   nil,
		`{"jsonrpc":"2.0","id":1,"id":2,"result":{}}`:                  int64(2),
		`[{"jsonrpc":"2.0","id":1,"result":{}}]`:                       nil,
	} {
		if !json.Valid([]byte(line)) {
			t.Fatalf("not JSON: %s", line)
		}
		for _, size := range []int{1, 2, 3, 7, len(line)} {
			var s idScanner
			for i := 0; i < len(line); i += size {
				s.feed([]byte(line[i:min(i+size, len(line))]))
			}
			id, ok := TooLargeID(&TooLargeError{ID: s.id})
			if want == nil {
				if ok {
					t.Errorf("%s in pieces of %d: found the id %v where there is none at the top", line, size, id.Raw())
				}
			} else if !ok || id.Raw() != want {
				t.Errorf("%s in pieces of %d: id %v, %v; want %v", line, size, id.Raw(), ok, want)
			}
		}
	}
}

// With DrainOnEOF, the end of the input waits for the requests read to be answered, except
// those the client cancelled.
func TestDrainOnEOF(t *testing.T) {
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}` + "\n")
	c := New(in, io.Discard, &Options{DrainOnEOF: 10 * time.Second})
	for range 3 {
		if _, err := c.Read(); err != nil {
			t.Fatal(err)
		}
	}
	eof := make(chan error, 1)
	go func() {
		_, err := c.Read()
		eof <- err
	}()
	// That Read does not return has no signal: a while is all a test can give it.
	select {
	case err := <-eof:
		t.Fatalf("Read returned %v before request 1 was answered", err)
	case <-time.After(100 * time.Millisecond):
	}
	id, _ := jsonrpc.MakeID(float64(1))
	c.Write(&jsonrpc.Response{ID: id, Result: json.RawMessage(`{}`)})
	select {
	case err := <-eof:
		if !errors.Is(err, io.EOF) {
			t.Errorf("Read returned %v, want EOF", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not return EOF once every request was answered")
	}
}

// A standing request (Conn.Standing) does not hold the end of the input back.
func TestDrainOnEOFStanding(t *testing.T) {
	in := strings.NewReader(`{"jsonrpc":"2.0","id":"s","method":"subscriptions/listen","params":{}}` + "\n")
	c := New(in, io.Discard, &Options{DrainOnEOF: time.Hour}) // were it awaited, the test would time out
	req, err := c.Read()
	if err != nil {
		t.Fatal(err)
	}
	c.Standing(req.(*jsonrpc.Request).ID)
	if _, err := c.Read(); !errors.Is(err, io.EOF) {
		t.Errorf("Read returned %v, want EOF", err)
	}
}

// For any JSON object, however it is split, the scanner finds the top-level "id" that a full
// parse finds (when it is short enough to be an ID: at most 256 bytes).
func FuzzTooLargeID(f *testing.F) {
	f.Add([]byte(`{"result":{"id":1,"s":"\"id\":2"},"id":"x\\\"y"}`), uint8(3))
	f.Add([]byte(`{"jsonrpc":"2.0","id":12,"result":[{"id":[1]}]}`), uint8(1))
	f.Add([]byte(`{"id":{"id":1}}`), uint8(2))
	f.Add([]byte(`{"id":1,"id":{"n":2}}`), uint8(4))
	f.Fuzz(func(t *testing.T, line []byte, size uint8) {
		start, end, ok := rawjson.Member(line, "id")
		if !json.Valid(line) || ok && end-start > maxIDBytes {
			return
		}
		step := int(size%16) + 1
		var s idScanner
		for i := 0; i < len(line); i += step {
			s.feed(line[i:min(i+step, len(line))])
		}
		got, gotOK := TooLargeID(&TooLargeError{ID: s.id})
		var want jsonrpc.ID
		wantOK := false
		if ok {
			want, wantOK = TooLargeID(&TooLargeError{ID: line[start:end]})
		}
		if gotOK != wantOK || got != want {
			t.Fatalf("%s in pieces of %d: the scanner found %v (%q), a full parse %v", line, step, got.Raw(), s.id, want.Raw())
		}
	})
}
