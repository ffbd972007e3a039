//go:build unix

package shared

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
)

// receiptsForwarder is a test forwarder with the read end of a receipts' pipe, and the pipe's
// ends; they close with the test.
func receiptsForwarder(t *testing.T) (*forwarder, *receiptsEnd, *os.File) {
	t.Helper()
	r, w, err := receiptsPipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	f := newTestForwarder(nil)
	f.receipts = r
	return f, r, w
}

func newTestForwarder(out *os.File) *forwarder {
	f := newForwarder(ForwardOptions{}, nil)
	f.out = out
	return f
}

// The forwarder keeps what the client set up and which of its requests are unanswered, from
// the messages as the client writes them (any order of members, any spacing).
func TestForwarderNotes(t *testing.T) {
	f := newTestForwarder(nil)
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`,
		`{"method":"notifications/initialized","jsonrpc":"2.0"}`,
		`{ "params": {"level":"error"}, "method" : "logging/setLevel", "id" : "lvl", "jsonrpc":"2.0" }`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"a://x"}}`,
		`{"jsonrpc":"2.0","id":4,"method":"resources/subscribe","params":{"uri":"a://y"}}`,
		`{"jsonrpc":"2.0","id":5,"method":"resources/unsubscribe","params":{"uri":"a://y"}}`,
		`{"jsonrpc":"2.0","id":6,"method":"subscriptions/listen","params":{}}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a:b"}}`,
		`{"jsonrpc":"2.0","id":"s-1","result":{}}`, // an answer to the server's request
		`[{"jsonrpc":"2.0","id":8,"method":"ping"}, {"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}, {"jsonrpc":"2.0","id":10,"method":"logging/setLevel","params":{"level":"info"}}]`, // a batch: each kept
		`{"jsonrpc":"2.0","id":9,"method":`, // malformed: not kept
	} {
		f.note([]byte(line + "\n"))
	}
	// A log level or a subscription is kept once its answer says it succeeded (below).
	if f.initialize == nil || !f.initialized || f.level != nil || len(f.subs) != 0 {
		t.Errorf("initialize %q, initialized %v, level %q, subscriptions %q", f.initialize, f.initialized, f.level, f.subs)
	}
	if _, ok := f.setting["4"]; ok || len(f.setting) != 3 {
		t.Errorf("setting up: %v; want the levels and the subscription not unsubscribed", f.setting)
	}
	if len(f.listens) != 1 || f.listens["6"] == nil {
		t.Errorf("listens: %q", f.listens)
	}
	for _, id := range []string{"1", `"lvl"`, "3", "4", "5", "6", "8", "10"} {
		if _, ok := f.inflight[id]; !ok {
			t.Errorf("request %s is not in flight: %v", id, f.inflight)
		}
	}
	if len(f.inflight) != 8 {
		t.Errorf("in flight: %v", f.inflight)
	}
	owed := f.owed

	// The receipts retire them, read in any parts; the session's ID for an answer to a line it
	// could not read retires nothing.
	f.receipted([]byte("8\n10\n\"l"))
	f.receipted([]byte("vl\"\nnull\n6"))
	if _, ok := f.inflight["8"]; ok {
		t.Error("request 8 (of a batch) is in flight after its receipt")
	}
	if _, ok := f.inflight[`"lvl"`]; ok {
		t.Error(`request "lvl" is in flight after its receipt`)
	}
	if _, ok := f.inflight["6"]; !ok {
		t.Error("request 6 was retired by a receipt read in part")
	}
	f.receipted([]byte("\n"))
	if _, ok := f.listens["6"]; ok {
		t.Error("the listen 6 is open after its answer")
	}
	if len(f.inflight) != 4 || f.owed != owed-receiptSize("8")-receiptSize("10")-receiptSize(`"lvl"`)-receiptSize("6") {
		t.Errorf("in flight: %v, owed %d of %d", f.inflight, f.owed, owed)
	}
	// The level kept is the last sent of those that succeeded, whatever order their answers
	// came in; a refused one, or a subscription refused, sets up nothing.
	level10 := `{"jsonrpc":"2.0","id":10,"method":"logging/setLevel","params":{"level":"info"}}` + "\n"
	if string(f.level) != level10 {
		t.Errorf("level %q, want request 10's", f.level)
	}
	f.note([]byte(`{"jsonrpc":"2.0","id":11,"method":"logging/setLevel","params":{"level":"bogus"}}` + "\n"))
	f.note([]byte(`{"jsonrpc":"2.0","id":12,"method":"resources/subscribe","params":{"uri":"a://z"}}` + "\n"))
	f.receipted([]byte("3\n!11\n!12\n"))
	if string(f.level) != level10 || len(f.subs) != 1 || f.subs["a://x"] == nil || len(f.setting) != 0 {
		t.Errorf("level %q, subscriptions %q, setting up %v; want request 10's level and a://x", f.level, f.subs, f.setting)
	}
	// One the client cancels is kept, as the session keeps it; an empty receipt line says
	// nothing.
	f.note([]byte(`{"jsonrpc":"2.0","id":13,"method":"logging/setLevel","params":{"level":"debug"}}` + "\n"))
	f.note([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":13}}` + "\n"))
	f.receipted([]byte("\n"))
	if !strings.Contains(string(f.level), `"id":13`) || len(f.setting) != 0 {
		t.Errorf("level %q, setting up %v; want the cancelled request 13's level", f.level, f.setting)
	}
}

// A batch the session does not take apart (its client's version removed batches, or it is
// not JSON) is answered with one error, with no ID: none of its messages is kept.
func TestForwarderBatchesRefused(t *testing.T) {
	for _, c := range []struct{ version, batch string }{
		{"2025-06-18", `[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}]`},
		{"2024-10-07", `[{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"info"}}]`}, // not spoken: answered as the latest
		{"2025-03-26", `[{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}, {"jsonrpc":"2.0","id":3,"method":`},
	} {
		f := newTestForwarder(nil)
		f.note([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + c.version + `"}}` + "\n"))
		f.note([]byte(c.batch + "\n"))
		if _, ok := f.inflight["1"]; !ok || len(f.inflight) != 1 || f.level != nil {
			t.Errorf("%s, %s: in flight %v, level %q; want the initialize alone", c.version, c.batch, f.inflight, f.level)
		}
	}
}

// A request or a listen the client cancelled is no longer in flight: the session answers
// neither, so the end of the shared process answers neither with an error, and a listen
// cancelled is not sent again.
func TestForwarderCancelled(t *testing.T) {
	f := newTestForwarder(nil)
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}`,
		`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{}}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"done"}}`,
		`{"method":"notifications/cancelled","jsonrpc":"2.0","params":{"reason":"x", "requestId" : "c"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`, // unknown: nothing
	} {
		f.note([]byte(line + "\n"))
	}
	if len(f.listens) != 0 {
		t.Errorf("listens after their cancellation: %q", f.listens)
	}
	if _, ok := f.inflight["3"]; !ok || len(f.inflight) != 1 || f.owed != receiptSize("3") {
		t.Errorf("in flight: %v, owed %d; want request 3 alone", f.inflight, f.owed)
	}
}

// What the receipts say of a line left unfinished: "+" opens it, anything after closes it.
func TestForwarderOpenLine(t *testing.T) {
	f := newTestForwarder(nil)
	for _, step := range []struct {
		recs string
		open bool
	}{{"+\n", true}, {"-\n", false}, {"+\n", true}, {"1\n", false}, {"2\n+\n", true}, {"+", true}, {"\n3\n", false}} {
		f.receipted([]byte(step.recs))
		if f.open != step.open {
			t.Errorf("after %q: open %v, want %v", step.recs, f.open, step.open)
		}
	}
}

// The forwarder reads the receipts when what they may hold grows (never per message), without
// waiting; at the shared process's end, to their end.
func TestForwarderDrains(t *testing.T) {
	f, r, w := receiptsForwarder(t)
	f.conn = &writeConn{w: &bytes.Buffer{}}
	id := 0
	sent := func() {
		id++
		if !f.send([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{}}`+"\n", id))) {
			t.Fatal("the session ended")
		}
	}
	sent()
	if _, err := fmt.Fprintf(w, "%d\n", id); err != nil {
		t.Fatal(err)
	}
	sent()
	if len(f.inflight) != 2 {
		t.Fatalf("the receipts were read with %d requests in flight: %v", len(f.inflight), f.inflight)
	}
	messages := 0 // sent until the receipts are read
	for len(f.inflight) > 1 {
		if messages > 1e5 {
			t.Fatal("the receipts are never read")
		}
		if _, err := fmt.Fprintf(w, "%d\n", id); err != nil {
			t.Fatal(err)
		}
		sent()
		messages++
	}
	if messages < 200 || f.loose > 0 {
		t.Fatalf("the receipts were read after %d messages, loose %d", messages, f.loose)
	}

	fmt.Fprintf(w, "%d\n+\n", id)
	w.Close()
	f.mu.Lock()
	f.drain(r, true)
	f.mu.Unlock()
	if len(f.inflight) != 0 || !f.open {
		t.Errorf("after the end: in flight %v, open %v", f.inflight, f.open)
	}
}

// Asked on the log connection (the receipts' pipe is full), the forwarder reads the receipts.
func TestForwarderDrainsWhenAsked(t *testing.T) {
	f, _, w := receiptsForwarder(t)
	f.note([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}` + "\n"))
	if _, err := w.Write([]byte("1\n")); err != nil {
		t.Fatal(err)
	}
	lc, theirs := net.Pipe()
	go func() {
		_, _ = theirs.Write([]byte(`{"stderr":"said\n"}` + "\n" + `{"drain":true}` + "\n"))
		theirs.Close()
	}()
	var stderr bytes.Buffer
	f.o.Stderr = &stderr
	f.readLog(lc)
	if len(f.inflight) != 0 || stderr.String() != "said\n" {
		t.Errorf("after the call to read: in flight %v, stderr %q", f.inflight, stderr.String())
	}
}

// When the shared process ends, the requests in flight are answered with an error (after a
// newline, when the client's output stops in the middle of a line) and the listens are kept;
// what the client set up is sent again, under IDs whose answers the session leaves out.
func TestForwarderReplay(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f := newTestForwarder(w)
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"error"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{}}`,
		`{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{}}`,
	} {
		f.note([]byte(line + "\n"))
	}
	f.receipted([]byte("1\n2\n+\n"))
	f.failInflight()
	w.Close()
	got, _ := io.ReadAll(r)
	if !strings.HasPrefix(string(got), "\n"+`{"jsonrpc":"2.0","id":"c","error":{"code":-32603,"message":"tools/call: the request ended with the shared process that ran it`) ||
		strings.Count(string(got), "\n") != 2 {
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
	for _, l := range []string{lines[0], lines[2]} {
		id := l[strings.Index(l, `"id":`)+5:]
		id = id[:idEnd([]byte(id))]
		if _, again, _ := answerID([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}` + "\n")); !again {
			t.Errorf("the answer to %s would reach the client", l)
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

// writesConn records each write.
type writesConn struct {
	net.Conn
	writes []string
}

func (c *writesConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, string(p))
	return len(p), nil
}
func (c *writesConn) Close() error { return nil }

// The whole lines one read brings reach the shared process in one write, each noted; a line
// read in part waits for its end.
func TestForwarderBatches(t *testing.T) {
	f := newTestForwarder(nil)
	conn := &writesConn{}
	f.conn = conn
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}` + "\n",
		`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"error"}}` + "\n",
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}` + "\n",
	}
	pr, pw := io.Pipe()
	f.o.Stdin = pr
	done := make(chan struct{})
	go func() { defer close(done); f.copyIn() }()
	fmt.Fprint(pw, lines[0]+lines[1]+lines[2][:10]) // two whole lines and a part, in one read
	fmt.Fprint(pw, lines[2][10:])
	pw.Close()
	<-done
	if len(conn.writes) != 2 || conn.writes[0] != lines[0]+lines[1] || conn.writes[1] != lines[2] {
		t.Errorf("written: %q", conn.writes)
	}
	if _, ok := f.setting["2"]; len(f.inflight) != 3 || !ok {
		t.Errorf("in flight %v, setting up %v", f.inflight, f.setting)
	}
}

// A request's ID is kept as the session writes it in its answer, whatever the client's spelling:
// its receipt retires it, and its error after a crash is valid JSON for the same ID.
func TestForwarderIDKeys(t *testing.T) {
	f := newTestForwarder(nil)
	for id, answered := range map[string]string{`1.0`: `1`, `1e2`: `100`, `"a<b"`: `"a\u003cb"`, `"\u0061"`: `"a"`, `7`: `7`, `"x"`: `"x"`} {
		f.note([]byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{}}` + "\n"))
		if _, ok := f.inflight[answered]; !ok {
			t.Errorf("request %s is kept as %v, not as its answer's ID %s", id, f.inflight, answered)
		}
		f.receipted([]byte(answered + "\n"))
		if len(f.inflight) != 0 || f.owed != 0 {
			t.Errorf("request %s is in flight after its receipt %s: %v (owed %d)", id, answered, f.inflight, f.owed)
		}
	}
}

// The client's stdout, which a shared process made non-blocking, is blocking again once the
// session ends: what shares it next expects it so.
func TestForwarderOutputBlockingAgain(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if !nonBlocking(t, w) {
		t.Fatal("os.Pipe's end is blocking")
	}
	f := newTestForwarder(w)
	f.closeOutput()
	if nonBlocking(t, w) {
		t.Error("the client's output is non-blocking after the session")
	}
}
