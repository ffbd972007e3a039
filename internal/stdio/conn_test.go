package stdio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

type badLine struct {
	line string
	err  error
}

func readAll(t *testing.T, c *Conn) []jsonrpc.Message {
	t.Helper()
	var msgs []jsonrpc.Message
	for {
		m, err := c.Read(context.Background())
		if errors.Is(err, io.EOF) {
			return msgs
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
	c := New(in, io.Discard, &Options{
		MaxMessageSize: 100,
		BadLine: func(_ *Conn, line []byte, err error) jsonrpc.Message {
			bad = append(bad, badLine{string(line), err})
			return nil
		},
	})
	msgs := readAll(t, c)
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

// A line over the limit can be answered in its place by BadLine.
func TestTooLargeReplaced(t *testing.T) {
	in := strings.NewReader(`{"jsonrpc":"2.0","id":7,"result":{"text":"` + strings.Repeat("y", 1<<20) + `"}}` + "\n")
	c := New(in, io.Discard, &Options{
		MaxMessageSize: 1000,
		BadLine: func(_ *Conn, line []byte, err error) jsonrpc.Message {
			id, ok := PeekID(line)
			if !ok {
				t.Errorf("no id in %q", line)
			}
			return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: -1, Message: "too large"}}
		},
	})
	msgs := readAll(t, c)
	if len(msgs) != 1 || msgs[0].(*jsonrpc.Response).ID.Raw() != int64(7) {
		t.Fatalf("got %v, want the replacement for id 7", msgs)
	}
}

func TestPeekID(t *testing.T) {
	for head, want := range map[string]any{
		`{"jsonrpc":"2.0","id":12,"result":{"x`:    int64(12),
		`{"id" : "a\"b","jsonrpc":"2.0","result":`: `a"b`,
		`{"jsonrpc":"2.0","id":-3,`:                int64(-3),
	} {
		id, ok := PeekID([]byte(head))
		if !ok || id.Raw() != want {
			t.Errorf("PeekID(%s) = %v, %v; want %v", head, id.Raw(), ok, want)
		}
	}
	if _, ok := PeekID([]byte(`{"jsonrpc":"2.0","result":{"text":"`)); ok {
		t.Error("PeekID found an id where there is none")
	}
}

// A response whose result is a placeholder is written with the placeholder's bytes, exactly.
func TestRawResult(t *testing.T) {
	var out bytes.Buffer
	c := New(strings.NewReader(""), &out, nil)
	raw := []byte(`{"content":[{"type":"text", "text":"spaced  out"}],"n":12345678901234567890123}`)
	id, _ := jsonrpc.MakeID(float64(5))
	if err := c.Write(context.Background(), &jsonrpc.Response{ID: id, Result: c.Raw(raw)}); err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":5,"result":` + string(raw) + "}\n"
	if out.String() != want {
		t.Errorf("wrote %s, want %s", out.String(), want)
	}
	if len(c.raws) != 0 {
		t.Errorf("%d placeholders left after writing", len(c.raws))
	}
	// An ordinary response is encoded as usual.
	out.Reset()
	c.Write(context.Background(), &jsonrpc.Response{ID: id, Result: json.RawMessage(`{"a":1}`)})
	if out.String() != `{"jsonrpc":"2.0","id":5,"result":{"a":1}}`+"\n" {
		t.Errorf("wrote %s", out.String())
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
		if _, err := c.Read(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	eof := make(chan error, 1)
	go func() {
		_, err := c.Read(context.Background())
		eof <- err
	}()
	select {
	case err := <-eof:
		t.Fatalf("Read returned %v before request 1 was answered", err)
	case <-time.After(100 * time.Millisecond):
	}
	id, _ := jsonrpc.MakeID(float64(1))
	c.Write(context.Background(), &jsonrpc.Response{ID: id, Result: json.RawMessage(`{}`)})
	select {
	case err := <-eof:
		if !errors.Is(err, io.EOF) {
			t.Errorf("Read returned %v, want EOF", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not return EOF once every request was answered")
	}
}
