package shared

import (
	"bytes"
	"net"
	"strings"
	"sync"
	"testing"
)

func newTestForwarder(out *bytes.Buffer) *forwarder {
	f := &forwarder{o: ForwardOptions{Stdout: out}, inflight: map[string]string{}, subs: map[string][]byte{}, listens: map[string][]byte{}, replays: map[string]bool{}}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// The forwarder keeps what the client set up and which of its requests are unanswered, from
// the messages as the client writes them (any order of members, any spacing).
func TestForwarderNotes(t *testing.T) {
	f := newTestForwarder(nil)
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`,
		`{"method":"notifications/initialized","jsonrpc":"2.0"}`,
		`{ "params": {"level":"error"}, "method" : "logging/setLevel", "id" : "lvl", "jsonrpc":"2.0" }`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"a://x"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"resources/subscribe","params":{"uri":"a://y"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"resources/unsubscribe","params":{"uri":"a://y"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"subscriptions/listen","params":{}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a:b"}}`,
		`{"jsonrpc":"2.0","id":"s-1","result":{}}`,   // an answer to the server's request
		`[{"jsonrpc":"2.0","id":8,"method":"ping"}]`, // a batch: not kept
		`{"jsonrpc":"2.0","id":9,"method":`,          // malformed: not kept
	} {
		f.note([]byte(line + "\n"))
	}
	if f.initialize == nil || !f.initialized || !bytes.Contains(f.level, []byte(`"lvl"`)) {
		t.Errorf("initialize %q, initialized %v, level %q", f.initialize, f.initialized, f.level)
	}
	if len(f.subs) != 1 || f.subs["a://x"] == nil {
		t.Errorf("subscriptions: %q", f.subs)
	}
	if len(f.listens) != 1 || f.listens["6"] == nil {
		t.Errorf("listens: %q", f.listens)
	}
	for _, id := range []string{"1", `"lvl"`, "3", "4", "5", "6", "7"} {
		if _, ok := f.inflight[id]; !ok {
			t.Errorf("request %s is not in flight: %v", id, f.inflight)
		}
	}
	if len(f.inflight) != 7 {
		t.Errorf("in flight: %v", f.inflight)
	}

	// Answers retire them, by the first bytes of what the session writes; a request of the
	// server's (an ID, then a method) retires nothing.
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":"lvl","error":{"code":-32602,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`,
	} {
		if f.answered([]byte(line)) {
			t.Errorf("%s: taken for the answer to a request sent again", line)
		}
	}
	if _, ok := f.inflight["7"]; ok {
		t.Error("request 7 is in flight after its answer")
	}
	if _, ok := f.inflight[`"lvl"`]; ok {
		t.Error(`request "lvl" is in flight after its error`)
	}
	if _, ok := f.inflight["1"]; !ok {
		t.Error("request 1 was retired by a request of the server's with the same ID")
	}
}

// When the shared process ends, the requests in flight are answered with an error and the
// listens are kept; what the client set up is sent again, and the answers to what was sent
// again are not the client's.
func TestForwarderReplay(t *testing.T) {
	var out bytes.Buffer
	f := newTestForwarder(&out)
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"error"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{}}`,
		`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{}}`,
	} {
		f.note([]byte(line + "\n"))
	}
	f.answered([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
	f.answered([]byte(`{"jsonrpc":"2.0","id":2,"result":{}}`))
	f.failInflight()
	got := out.String()
	if !strings.Contains(got, `{"jsonrpc":"2.0","id":"c","error":{"code":-32603,"message":"tools/call: the request ended with the shared process that ran it`) ||
		strings.Count(got, "\n") != 1 {
		t.Errorf("the requests in flight were answered with:\n%s", got)
	}

	var sent bytes.Buffer
	f.conn = &writeConn{w: &sent}
	f.replay()
	lines := strings.Split(strings.TrimSpace(sent.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[0], `"method":"initialize"`) || !strings.Contains(lines[1], "notifications/initialized") ||
		!strings.Contains(lines[2], "logging/setLevel") || !strings.Contains(lines[3], `"id":3,"method":"subscriptions/listen"`) {
		t.Fatalf("sent again:\n%s", sent.String())
	}
	if strings.Contains(lines[0], `"id":1`) || strings.Contains(lines[2], `"id":2`) {
		t.Errorf("sent again under the client's own IDs:\n%s", sent.String())
	}
	for _, l := range []string{lines[0], lines[2]} {
		id := l[strings.Index(l, `"id":`)+5:]
		id = id[:idEnd([]byte(id))]
		if !f.answered([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`)) {
			t.Errorf("the answer to %s is taken for the client's", l)
		}
	}
}

func TestIDEnd(t *testing.T) {
	for in, want := range map[string]int{`1,"result"`: 1, `-12.5e3,`: 7, `"a\"b",`: 6, `"abc`: -1, `12`: -1, ``: -1, `null,`: -1, `"",`: 2} {
		if got := idEnd([]byte(in)); got != want {
			t.Errorf("idEnd(%q) = %d, want %d", in, got, want)
		}
	}
}

// writeConn is a net.Conn that only writes, to w.
type writeConn struct {
	net.Conn
	w *bytes.Buffer
}

func (c *writeConn) Write(p []byte) (int, error) { return c.w.Write(p) }
