//go:build unix

package shared

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// clients are the client ends of the testOuts' outputs, to be read by readAllOf.
var clients sync.Map

// readAllOf reads what the client of o holds now.
func readAllOf(t *testing.T, o *clientOut) {
	c, _ := clients.Load(o)
	readAll(t, c.(*os.File))
}

// testOut is a clientOut over a pipe to the client and a journal, its receipts taken back as
// the forwarder takes them.
func testOut(t *testing.T) (o *clientOut, client *os.File, receipts *testReceipts) {
	t.Helper()
	client, cw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	end, endW, err := receiptsPipe()
	if err != nil {
		t.Fatal(err)
	}
	j, jf, err := newJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sj, err := mapJournal(jf) // the shared process's mapping
	jf.Close()
	if err != nil {
		t.Fatal(err)
	}
	o = newClientOut(cw, endW, sj)
	sj.release()
	t.Cleanup(func() { client.Close(); end.Close(); j.release() })
	clients.Store(o, client)
	t.Cleanup(func() { o.Close(); clients.Delete(o) })
	return o, client, &testReceipts{j: j, end: end, o: o}
}

// testReceipts are a test clientOut's receipts, as the forwarder takes them: its journal's
// ring and the receipts' end.
type testReceipts struct {
	j     *journal
	end   *receiptsEnd
	o     *clientOut
	taken uint64
}

// now takes what the ring holds, and tells the clientOut that it did, as the forwarder's
// "drained" does.
func (r *testReceipts) now() string {
	var b []byte
	r.taken = r.j.receipts.take(r.taken, false, func(p []byte) { b = append(b, p...) })
	r.o.roomMade()
	return string(b)
}

// all waits for the receipts' end and takes them to it.
func (r *testReceipts) all(t *testing.T) string {
	t.Helper()
	if err := r.end.wait(); err != nil {
		t.Fatal(err)
	}
	var b []byte
	r.taken = r.j.receipts.take(r.taken, true, func(p []byte) { b = append(b, p...) })
	return string(b)
}

// readAll reads what the pipe f (non-blocking) holds now.
func readAll(t *testing.T, f *os.File) string {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	buf := make([]byte, 64<<10)
	for {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool { n, rerr = unix.Read(int(fd), buf); return true }); err != nil {
			t.Fatal(err)
		}
		if rerr != nil || n <= 0 {
			return string(b)
		}
		b = append(b, buf[:n]...)
	}
}

// limited writes at most n bytes of what it is given to o's client, as a pipe that takes no more
// at once does.
func limited(o *clientOut, n int) func([]byte) (int, error) {
	return func(b []byte) (int, error) { return o.f.Write(b[:min(n, len(b))]) }
}

// The client gets the session's messages as written, but for the answers to the requests the
// forwarder sent again; the receipts name the answers to the client's requests, after them.
func TestClientOutReceipts(t *testing.T) {
	o, client, receipts := testOut(t)
	msgs := []string{
		`{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`,
		`{"jsonrpc":"2.0","id":"a\"b","error":{"code":-32602,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"roots/list"}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`,
		`{"jsonrpc":"2.0","id":"` + againID + `1","result":{}}`,
		`{"jsonrpc":"2.0","id":8,"result":{}}`,
	}
	in := strings.Join(msgs, "\n") + "\n"
	if n, err := o.TryWrite([]byte(in)); err != nil || n != len(in) {
		t.Fatalf("TryWrite: %d of %d, %v", n, len(in), err)
	}
	want := strings.Join(append(msgs[:4:4], msgs[5]), "\n") + "\n"
	if got := readAll(t, client); got != want {
		t.Errorf("the client got:\n%s\nwant:\n%s", got, want)
	}
	if got := receipts.now(); got != "7\n!\"a\\\"b\"\n8\n" { // "!": an error
		t.Errorf("receipts %q", got)
	}
}

// The answer to a batch (2025-03-26 and before) names each request it answers in the
// receipts, also when the client's output takes it in parts; the array's other elements, and
// an array that is not an answer, name none.
func TestClientOutBatchReceipts(t *testing.T) {
	o, client, receipts := testOut(t)
	batch := `[{"jsonrpc":"2.0","id":1,"result":{"content":[]}},{"jsonrpc":"2.0","id":"b","error":{"code":-32601,"message":"x"}},` +
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}},{"jsonrpc":"2.0","id":3,"result":{}}]` + "\n"
	other := `{"jsonrpc":"2.0","id":4,"result":{}}` + "\n"
	if n, err := o.write([]byte(batch+`[1,2]`+"\n"+other), limited(o, 1000)); err != nil || n != len(batch)+6+len(other) {
		t.Fatalf("write: %d, %v", n, err)
	}
	if got := receipts.now(); got != "1\n!\"b\"\n3\n4\n" {
		t.Errorf("receipts %q", got)
	}
	for i, step := range []struct {
		in       string
		accept   int
		receipts string
	}{{batch, 40, "+\n"}, {batch[40:], 1000, "1\n!\"b\"\n3\n"}} {
		if n, err := o.write([]byte(step.in), limited(o, step.accept)); err != nil || n != min(step.accept, len(step.in)) {
			t.Fatalf("step %d: %d, %v", i, n, err)
		}
		if got := receipts.now(); got != step.receipts {
			t.Errorf("step %d: receipts %q, want %q", i, got, step.receipts)
		}
	}
	// An array not whole in a write (the session writes a batch's answer in one) names none
	// of its requests, rather than some.
	cut := strings.Index(batch, `{"jsonrpc":"2.0","id":"b"`)
	for i, step := range []struct{ in, receipts string }{{batch[:cut], "+\n"}, {batch[cut:], "-\n"}} {
		if n, err := o.write([]byte(step.in), limited(o, 1000)); err != nil || n != len(step.in) {
			t.Fatalf("cut step %d: %d, %v", i, n, err)
		}
		if got := receipts.now(); got != step.receipts {
			t.Errorf("cut step %d: receipts %q, want %q", i, got, step.receipts)
		}
	}
	if got := readAll(t, client); got != batch+"[1,2]\n"+other+batch+batch {
		t.Errorf("the client got:\n%s", got)
	}
}

// A write the client's output does not take whole leaves a line unfinished, which the receipts
// say ("+") until the write that ends it (its ID, or "-"); what is left out may be cut too.
func TestClientOutUnfinishedLines(t *testing.T) {
	o, client, receipts := testOut(t)
	answer := `{"jsonrpc":"2.0","id":5,"result":{"text":"` + strings.Repeat("x", 100) + `"}}` + "\n"
	note := `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"` + strings.Repeat("y", 100) + `"}}` + "\n"
	again := `{"jsonrpc":"2.0","id":"` + againID + `2","result":{"text":"` + strings.Repeat("z", 100) + `"}}` + "\n"

	steps := []struct {
		in       string
		accept   int // what the output takes of the write
		done     int // what write says it is done with
		receipts string
	}{
		{answer, 30, 30, "+\n"},   // the answer's start
		{answer[30:], 10, 10, ""}, // more of it
		{answer[40:] + note, len(answer) - 40 + 20, len(answer) - 40 + 20, "5\n+\n"}, // its end, and the note's start
		{note[20:], 1000, len(note) - 20, "-\n"},                                     // the note's end
		{again[:70], 1000, 70, ""},                                                   // left out, in parts
		{again[70:] + answer, 1000, len(again) - 70 + len(answer), "5\n"},
		{answer, 0, 0, ""}, // nothing taken: nothing started
		{answer, 1000, len(answer), "5\n"},
	}
	var want strings.Builder
	for i, s := range steps {
		n, err := o.write([]byte(s.in), limited(o, s.accept))
		if err != nil || n != s.done {
			t.Fatalf("step %d: done with %d of %d, %v; want %d", i, n, len(s.in), err, s.done)
		}
		if got := receipts.now(); got != s.receipts {
			t.Errorf("step %d: receipts %q, want %q", i, got, s.receipts)
		}
	}
	want.WriteString(answer + note + answer + answer)
	if got := readAll(t, client); got != want.String() {
		t.Errorf("the client got:\n%s\nwant:\n%s", got, want.String())
	}
}

// A write that may wait for the client says before it that a line may be left unfinished, and
// after it that none is, unless one is.
func TestClientOutWaitingWrite(t *testing.T) {
	o, client, receipts := testOut(t)
	answer := `{"jsonrpc":"2.0","id":5,"result":{}}` + "\n"
	for _, step := range []struct{ in, receipts string }{
		{answer, "+\n5\n-\n"},
		{answer[:33], "+\n+\n"}, // its start, to the member after the ID (a write always has it)
		{answer[33:], "+\n5\n-\n"},
		{`{"jsonrpc":"2.0","method":"m"}` + "\n", "+\n-\n"},
	} {
		if n, err := o.Write([]byte(step.in)); err != nil || n != len(step.in) {
			t.Fatalf("Write: %d of %d, %v", n, len(step.in), err)
		}
		if got := receipts.now(); got != step.receipts {
			t.Errorf("after writing %q: receipts %q, want %q", step.in, got, step.receipts)
		}
	}
	if got := readAll(t, client); got != answer+answer+`{"jsonrpc":"2.0","method":"m"}`+"\n" {
		t.Errorf("the client got %q", got)
	}
}

// Receipts the forwarder has not taken yet, beyond what their ring holds, wait in the shared
// process without keeping the session waiting, and reach the forwarder in order.
func TestClientOutReceiptsWait(t *testing.T) {
	o, client, receipts := testOut(t)
	var want strings.Builder
	go func() { _, _ = io.Copy(io.Discard, client) }()
	for i := range 5000 { // more receipts than the ring holds
		line := fmt.Sprintf(`{"jsonrpc":"2.0","id":"request-%d","result":{}}`+"\n", i)
		if n, err := o.TryWrite([]byte(line)); err != nil || n != len(line) {
			// The client reads: a write may find the pipe full for a moment.
			if _, err := o.Write([]byte(line[n:])); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Fprintf(&want, "\"request-%d\"\n", i)
	}
	receiptsInOrder(t, receipts, "request-", 5000, want.String())
}

// Receipts that fill the ring ask the forwarder to take them (it takes them as its client
// writes, which a client may not): they do not wait in the shared process, which may be killed.
func TestClientOutAsksToBeRead(t *testing.T) {
	o, client, receipts := testOut(t)
	asked := make(chan struct{}, 1000)
	o.drainBy(func(bool) {
		select {
		case asked <- struct{}{}:
		default:
		}
	})
	go func() { _, _ = io.Copy(io.Discard, client) }()
	id := strings.Repeat("x", 200)
	var want strings.Builder
	for i := range 1000 { // 200 KiB of receipts: more than the ring holds
		line := fmt.Sprintf(`{"jsonrpc":"2.0","id":"%s-%d","result":{}}`+"\n", id, i)
		if _, err := o.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&want, "\"%s-%d\"\n", id, i)
	}
	select {
	case <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("receipts wait for a ring that is full, and the forwarder was not asked to take them")
	}
	receiptsInOrder(t, receipts, id, 1000, want.String())
}

// A write that a pipe may not take whole (over PIPE_BUF) says "+" before it and "-" after;
// a shorter one says nothing but its answer's ID.
func TestClientOutLongWrite(t *testing.T) {
	o, client, receipts := testOut(t)
	long := `{"jsonrpc":"2.0","id":5,"result":{"text":"` + strings.Repeat("x", 10000) + `"}}` + "\n"
	short := `{"jsonrpc":"2.0","id":6,"result":{}}` + "\n"
	for _, step := range []struct{ in, receipts string }{{long, "+\n5\n-\n"}, {short, "6\n"}} {
		if n, err := o.TryWrite([]byte(step.in)); err != nil || n != len(step.in) {
			t.Fatalf("TryWrite: %d of %d, %v", n, len(step.in), err)
		}
		if got := receipts.now(); got != step.receipts {
			t.Errorf("receipts %q, want %q", got, step.receipts)
		}
	}
	if got := readAll(t, client); got != long+short {
		t.Errorf("the client got %d bytes", len(got))
	}
}

// What the receipts waiting for room say of unfinished lines is kept to what matters, the
// last of it, as they are added; IDs are kept.
func TestCoalesce(t *testing.T) {
	for in, want := range map[string]string{
		"5\n+\n-\n":       "5\n-\n",
		"+\n-\n+\n-\n":    "-\n",
		"+\n+\n":          "+\n",
		"7\n+\n-\n8\n+\n": "7\n-\n8\n+\n",
		"+\n":             "+\n",
	} {
		var got []byte
		for _, rec := range strings.SplitAfter(in, "\n") {
			got = coalesce(append(got, rec...))
		}
		if string(got) != want {
			t.Errorf("coalesce of %q = %q, want %q", in, got, want)
		}
	}
}

// When the shared process stops under a session that goes on, the receipts the ring had no room
// for reach the forwarder before their end, which it takes them to.
func TestClientOutCloseReading(t *testing.T) {
	o, _, receipts := testOut(t)
	var want strings.Builder
	for i := range 5000 { // more receipts (80 KB) than the ring holds
		line := fmt.Sprintf(`{"jsonrpc":"2.0","id":"request-%05d","result":{}}`+"\n", i)
		if i%100 == 0 {
			readAllOf(t, o) // keeps the client's pipe from filling
		}
		if n, err := o.TryWrite([]byte(line)); err != nil || n != len(line) {
			t.Fatalf("TryWrite: %d of %d, %v", n, len(line), err)
		}
		fmt.Fprintf(&want, "\"request-%05d\"\n", i)
	}
	closed := make(chan struct{})
	go func() { // the forwarder, asked to take the ring as it fills
		defer close(closed)
		if err := o.closeReading(); err != nil {
			t.Error(err)
		}
	}()
	var got strings.Builder
	for open := true; open; {
		select {
		case <-closed:
			open = false
		case <-time.After(time.Millisecond):
		}
		got.WriteString(receipts.now())
	}
	got.WriteString(receipts.all(t))
	if got.String() != want.String() {
		t.Errorf("the forwarder took %d bytes of receipts, want %d", got.Len(), want.Len())
	}
}

// receiptsInOrder reads the receipts until n of them hold mark, and checks that, but for the
// "+" and "-" among them, they are want.
func receiptsInOrder(t *testing.T, receipts *testReceipts, mark string, n int, want string) {
	t.Helper()
	var got bytes.Buffer
	waitFor(t, "the receipts", func() bool {
		got.WriteString(receipts.now())
		return strings.Count(got.String(), mark) >= n && bytes.HasSuffix(got.Bytes(), []byte("\n"))
	})
	if strings.NewReplacer("+\n", "", "-\n", "").Replace(got.String()) != want {
		t.Errorf("the receipts are not the answers' in order (%d bytes of %d)", got.Len(), len(want))
	}
}

// Asking the forwarder to take the receipts (a write to the log connection, which a forwarder
// that does not read keeps waiting) never keeps a write to the client waiting: the write may be
// on a shared server's reader, which serves other sessions too.
func TestClientOutAskDoesNotWait(t *testing.T) {
	o, client, _ := testOut(t)
	stuck := make(chan struct{})
	asked := make(chan struct{}, 1)
	o.drainBy(func(bool) {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-stuck // a forwarder that does not read its log connection
	})
	t.Cleanup(func() { close(stuck) })
	go func() { _, _ = io.Copy(io.Discard, client) }()
	written := make(chan error, 1)
	go func() {
		for i := range 2000 { // 40 KB of receipts: past receiptsDrainAt, within the ring
			line := fmt.Sprintf(`{"jsonrpc":"2.0","id":"request-%05d","result":{}}`+"\n", i)
			if _, err := o.Write([]byte(line)); err != nil {
				written <- err
				return
			}
		}
		written <- nil
	}()
	select {
	case err := <-written:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(waitTime):
		t.Fatal("the session's writes wait for a forwarder that does not read its log connection")
	}
	select {
	case <-asked:
	case <-time.After(waitTime):
		t.Fatal("the forwarder was not asked to take the receipts")
	}
}
