//go:build unix

package shared

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
)

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
	if len(f.inflight) != 4 {
		t.Errorf("in flight: %v", f.inflight)
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
	if _, ok := f.inflight["3"]; !ok || len(f.inflight) != 1 {
		t.Errorf("in flight: %v; want request 3 alone", f.inflight)
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

// journalForwarder is a test forwarder with the receipts' end and a journal, as a link gives
// them: the write end of the receipts' end, and the journal, as the shared process has them.
// They close with the test.
func journalForwarder(t *testing.T) (*forwarder, *os.File, *journal) {
	t.Helper()
	r, w, err := receiptsPipe()
	if err != nil {
		t.Fatal(err)
	}
	j, jf, err := newJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close(); j.release(); jf.Close() })
	f := newTestForwarder(nil)
	f.receipts, f.journal = r, j
	return f, w, j
}

// publish writes b to the journal as the shared process reads it, and publishes it unless not.
func publish(j *journal, b string, published bool) {
	head := *j.input.head
	n := copy(j.input.data[head%journalSize:], b)
	if published {
		*j.input.head = head + uint64(n)
	}
}

// receipt writes recs to the journal's receipts as the session writes them, and publishes them
// unless not.
func receipt(j *journal, recs string, published bool) {
	r := j.receipts
	head := *r.head
	n := copy(r.data[head%receiptsSize:], recs)
	if published {
		*r.head = head + uint64(n)
	}
}

// The forwarder takes in what the journal holds before the receipts it took with it, and each
// line once whole; at the shared process's end (once the receipts' end says so), also what was
// read or written and not published.
func TestForwarderDrains(t *testing.T) {
	f, w, j := journalForwarder(t)
	call := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{}}`+"\n", id)
	}
	publish(j, call(1)+call(2)[:10], true)
	receipt(j, "1\n", true)
	f.drain(false)
	if len(f.inflight) != 0 || string(f.partial) != call(2)[:10] || f.taken != *j.input.tail || *j.input.tail != *j.input.head {
		t.Fatalf("in flight %v, partial %q, taken %d, tail %d, head %d", f.inflight, f.partial, f.taken, *j.input.tail, *j.input.head)
	}
	if bytes.IndexFunc(j.input.data[:*j.input.head], func(r rune) bool { return r != 0 }) >= 0 {
		t.Fatal("what was taken is not zero again")
	}
	publish(j, call(2)[10:], true)
	publish(j, call(3)+call(4)[:5], false) // read, not published: the shared process was killed
	receipt(j, "2\n+\n3", false)           // written, not published; the last in part, which is no receipt
	w.Close()
	f.drain(true)
	if _, ok := f.inflight["3"]; !ok || len(f.inflight) != 1 || !f.open || string(f.partial) != call(4)[:5] {
		t.Errorf("after the end: in flight %v, open %v, partial %q", f.inflight, f.open, f.partial)
	}
	if *j.input.tail != uint64(len(call(1)+call(2)+call(3)))+5 {
		t.Errorf("taken to %d", *j.input.tail)
	}
}

// The ring wraps: what the shared process reads past its end starts it again.
func TestJournalWraps(t *testing.T) {
	f, _, j := journalForwarder(t)
	line := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}` + "\n"
	var sent, read int
	for sent < 3*journalSize {
		off := *j.input.head % journalSize
		n := copy(j.input.data[off:], line[read:])
		*j.input.head += uint64(n)
		sent += n
		read = (read + n) % len(line)
		if *j.input.head-*j.input.tail > journalSize/2 {
			f.drain(false)
		}
	}
	f.drain(false)
	if string(f.partial) != line[:read] {
		t.Errorf("partial %q, want %q", f.partial, line[:read])
	}
}

// Asked on the log connection, the forwarder takes the journal (the input and the receipts), and
// says so when the session waits for it.
func TestForwarderDrainsWhenAsked(t *testing.T) {
	f, _, j := journalForwarder(t)
	publish(j, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`+"\n"+`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}`+"\n", true)
	receipt(j, "1\n", true)
	lc, theirs := net.Pipe()
	said := make(chan string, 1)
	go func() {
		_, _ = theirs.Write([]byte(`{"stderr":"said\n"}` + "\n" + `{"drain":true,"wait":true}` + "\n"))
		line, _ := bufio.NewReader(theirs).ReadString('\n')
		said <- line
		theirs.Close()
	}()
	var stderr bytes.Buffer
	f.o.Stderr = &stderr
	f.readLog(lc)
	if _, ok := f.inflight["2"]; !ok || len(f.inflight) != 1 || stderr.String() != "said\n" {
		t.Errorf("after the call to read: in flight %v, stderr %q", f.inflight, stderr.String())
	}
	if line := <-said; line != `{"drained":true}`+"\n" {
		t.Errorf("the forwarder said %q", line)
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

	f.partial = []byte(`{"jsonrpc":"2.0","id":4,`) // the rest is in the client's input
	sent := string(f.replay())
	if !strings.HasSuffix(sent, "\n"+string(f.partial)) {
		t.Errorf("the line taken in part is not last: %q", sent)
	}
	lines := strings.Split(strings.TrimSpace(sent), "\n")
	if len(lines) != 5 || !strings.Contains(lines[0], `"method":"initialize"`) || !strings.Contains(lines[1], "notifications/initialized") ||
		!strings.Contains(lines[2], "logging/setLevel") || !strings.Contains(lines[3], `"id":3,"method":"subscriptions/listen"`) {
		t.Fatalf("sent again:\n%s", sent)
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
		if len(f.inflight) != 0 {
			t.Errorf("request %s is in flight after its receipt %s: %v", id, answered, f.inflight)
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
