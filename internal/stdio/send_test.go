package stdio

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Send never waits for a peer that does not read, and what it sends arrives whole and in
// order, also mixed with blocking writes from other goroutines.
func TestSendDoesNotWaitAndKeepsOrder(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := New(strings.NewReader(""), w, nil)
	defer c.Close()

	const n = 300
	pad := strings.Repeat("p", 10<<10) // 300 x 10 KiB: far more than a pipe holds
	sent := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // blocking writes, as the SDK's session makes them
		defer wg.Done()
		for i := range 20 {
			if err := c.WriteParts([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"other","params":{"i":%d}}`+"\n", i))); err != nil {
				t.Error(err)
			}
		}
	}()
	go func() {
		for i := range n {
			c.Send(OnFailure(func(err error) { t.Errorf("message %d: %v", i, err) }),
				[]byte(`{"jsonrpc":"2.0","method":"m","params":{"i":`), []byte(fmt.Sprint(i)), []byte(`,"pad":"`+pad+`"}}`+"\n"))
		}
		close(sent)
	}()
	select {
	case <-sent:
	case <-time.After(30 * time.Second):
		t.Fatal("Send waited for a peer that does not read")
	}

	in := bufio.NewReaderSize(r, 1<<20)
	next, others := 0, 0
	for next < n || others < 20 {
		line, err := in.ReadBytes('\n')
		if err != nil {
			t.Fatalf("after %d messages: %v", next, err)
		}
		var m struct {
			Method string
			Params struct{ I int }
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("a message arrived broken: %v: %.100s", err, line)
		}
		if m.Method == "other" {
			others++
			continue
		}
		if m.Params.I != next {
			t.Fatalf("message %d arrived when %d was next", m.Params.I, next)
		}
		next++
	}
	wg.Wait()
}

// A message Send cannot write is reported to its failed function.
func TestSendReportsFailure(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	c := New(strings.NewReader(""), w, nil)
	defer c.Close()
	failed := make(chan error, 2)
	c.Send(OnFailure(func(err error) { failed <- err }), []byte("{}\n"))                              // written at once
	c.Send(OnFailure(func(err error) { failed <- err }), []byte(strings.Repeat(" ", 100<<10)+"{}\n")) // by the background writer
	for range 2 {
		select {
		case err := <-failed:
			if err == nil {
				t.Error("failed called without an error")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a write to a closed pipe was not reported")
		}
	}
}

// The builders of the messages a peer writes itself: one line of JSON-RPC each, whatever the
// method and ID hold, params passed as they are.
func TestBuilders(t *testing.T) {
	for _, tc := range []struct {
		parts [][]byte
		want  string
	}{
		{Request("agg-7", "tools/call", []byte(`{"name":"x"}`)), `{"jsonrpc":"2.0","id":"agg-7","method":"tools/call","params":{"name":"x"}}`},
		{Request("agg-8", "ping"), `{"jsonrpc":"2.0","id":"agg-8","method":"ping"}`},
		{Request("agg-9", "ping", nil), `{"jsonrpc":"2.0","id":"agg-9","method":"ping"}`},
		{Request("agg-1", "a\"b\n"), `{"jsonrpc":"2.0","id":"agg-1","method":"a\"b\n"}`},
		{Notification("notifications/initialized", nil), `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{Notification("notifications/progress", []byte(`{"progress":1}`)), `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`},
		{Cancelled("agg-3", ""), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"agg-3"}}`},
		{Cancelled("agg-3", "gone <now>"), `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"agg-3","reason":"gone \u003cnow\u003e"}}`},
	} {
		got := string(bytes.Join(tc.parts, nil))
		if got != tc.want+"\n" {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("not JSON: %s", got)
		}
	}
}

// A decoded message's ID and error, as JSON: the one encoding of both that the aggregator and
// the shared process write.
func TestIDAndErrorJSON(t *testing.T) {
	for _, c := range []struct {
		id   any
		want string
	}{{float64(7), `7`}, {"agg-1", `"agg-1"`}, {"a\"b", `"a\"b"`}} {
		id, _ := jsonrpc.MakeID(c.id)
		if got := string(IDJSON(id)); got != c.want {
			t.Errorf("IDJSON(%v) = %s, want %s", c.id, got, c.want)
		}
	}
	if got := string(IDJSON(jsonrpc.ID{})); got != `null` {
		t.Errorf("IDJSON of no ID = %s", got)
	}
	if ErrorJSON(nil) != nil {
		t.Error("ErrorJSON(nil) is not nil")
	}
	e := &jsonrpc.Error{Code: -32602, Message: "Invalid params: x", Data: json.RawMessage(`{"k":1}`)}
	if got := string(ErrorJSON(e)); got != `{"code":-32602,"message":"Invalid params: x","data":{"k":1}}` {
		t.Errorf("ErrorJSON = %s", got)
	}
}
