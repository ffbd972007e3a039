package stdio

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// A peer in this process: its writer takes Send's writes inline, a Conn it hands messages to
// holds what they relay while more follow, and a Conn that never waits writes everything to a
// peer that reads late.

// goroutineID is the ID of the calling goroutine, from its stack's header.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	return strings.Fields(string(buf))[1]
}

// inlineWriter is an InlineWriter that notes the goroutine of each write.
type inlineWriter struct {
	mu     sync.Mutex
	data   bytes.Buffer
	writer []string
}

func (w *inlineWriter) WritesInline() {}

func (w *inlineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writer = append(w.writer, goroutineID())
	return w.data.Write(p)
}

// Send writes to an InlineWriter on the sender's goroutine, whole, in order, held lines with
// it: no background writer, which a writer that is not a non-blocking file gets.
func TestSendInline(t *testing.T) {
	var b Burst
	w := &inlineWriter{}
	c := New(nil, w, &Options{HeldBy: &b})
	me := goroutineID()
	c.Send(nil, []byte(`{"a":1}`+"\n"))
	b.begin()
	c.SendHeld(nil, []byte(`{"b":2}`+"\n"))
	c.SendHeld(nil, []byte(`{"c":3}`+"\n"))
	if got := w.data.String(); got != `{"a":1}`+"\n" {
		t.Fatalf("written during a burst: %q", got)
	}
	b.end()
	c.Send(nil, []byte(`{"d":4}`+"\n"))
	if got, want := w.data.String(), "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n{\"d\":4}\n"; got != want {
		t.Fatalf("written %q, want %q", got, want)
	}
	for i, g := range w.writer {
		if g != me {
			t.Errorf("write %d was made on goroutine %s, not the sender's (%s)", i, g, me)
		}
	}
}

// A Conn whose messages are handed to it begins a burst with a message that more follow, and
// what is relayed meanwhile is held until EndBurst.
func TestGivenBurst(t *testing.T) {
	var b Burst
	fed := New(nil, io.Discard, &Options{Burst: &b})
	w := &inlineWriter{}
	out := New(nil, w, &Options{HeldBy: &b})
	fed.Given(true)
	out.SendHeld(nil, []byte("1\n"))
	fed.Given(false) // the last of the burst: still held until the peer flushes
	out.SendHeld(nil, []byte("2\n"))
	if got := w.data.String(); got != "" {
		t.Fatalf("written during the burst: %q", got)
	}
	fed.EndBurst()
	if got := w.data.String(); got != "1\n2\n" {
		t.Fatalf("written after the burst: %q", got)
	}
	fed.Given(false) // alone: nothing held
	out.SendHeld(nil, []byte("3\n"))
	if got := w.data.String(); got != "1\n2\n3\n" {
		t.Fatalf("a message alone was held: %q", got)
	}
}

// With NeverWait, nothing written waits for a peer that does not read (a pipe's buffer holds
// 64 KiB here; a megabyte is written), and Close writes everything before it closes.
func TestNeverWait(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := New(nil, w, &Options{NeverWait: true})
	var want bytes.Buffer
	payload := strings.Repeat("x", 1000)
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := range 1000 {
			result := fmt.Appendf(nil, `{"n":%d,"p":%q}`, i, payload)
			id, _ := jsonrpc.MakeID(float64(i))
			if err := c.WriteResponse(id, result, nil); err != nil {
				t.Errorf("WriteResponse: %v", err)
			}
			if err := c.WriteParts([]byte(`{"jsonrpc":"2.0","method":"m"}` + "\n")); err != nil {
				t.Errorf("WriteParts: %v", err)
			}
			fmt.Fprintf(&want, `{"jsonrpc":"2.0","id":%d,"result":%s}`+"\n", i, result)
			want.WriteString(`{"jsonrpc":"2.0","method":"m"}` + "\n")
		}
	}()
	select {
	case <-wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("the writes waited for the peer to read")
	}
	read := make(chan []byte)
	go func() {
		data, _ := io.ReadAll(r)
		read <- data
	}()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := <-read; !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("the peer read %d bytes, want %d", len(got), want.Len())
	}
}

// Decode decodes a line as Read does, and what it returns does not point into the line.
func TestDecode(t *testing.T) {
	line := []byte(`{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"x"}}`)
	msg, err := Decode(line)
	if err != nil {
		t.Fatal(err)
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.ID.Raw() != "a-1" || req.Method != "tools/call" || string(req.Params) != `{"name":"x"}` {
		t.Fatalf("decoded %#v", msg)
	}
	copy(line, bytes.Repeat([]byte("z"), len(line)))
	if string(req.Params) != `{"name":"x"}` {
		t.Fatalf("the params changed with the line: %q", req.Params)
	}
	if _, err := Decode([]byte(`{"jsonrpc":"2.0","id":1`)); err == nil {
		t.Fatal("a line that is not a message decoded")
	}
}

// With NeverWait, Close does not wait long for a peer that never reads: after neverWaitClose
// it closes the writer, which ends the background write: the message is reported as failed.
func TestNeverWaitCloseUnread(t *testing.T) {
	defer func(d time.Duration) { neverWaitClose = d }(neverWaitClose)
	neverWaitClose = 100 * time.Millisecond
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := New(nil, w, &Options{NeverWait: true})
	failed := make(chan error, 1)
	c.Send(OnFailure(func(err error) { failed <- err }), []byte(strings.Repeat("x", 1<<20)+"\n"))
	closed := make(chan error)
	go func() { closed <- c.Close() }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close waits for a peer that does not read")
	}
	select {
	case err := <-failed:
		if err == nil {
			t.Error("the unwritten message's failure has no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the message the peer never read was not reported as failed")
	}
}

// Close, with NeverWait, waits for a message being written inline whose write the pipe took
// only in part: the rest, written by the background writer, reaches the peer whole before the
// writer is closed.
func TestNeverWaitCloseDuringInlineWrite(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := New(nil, w, &Options{NeverWait: true})
	if c.tryWrite == nil {
		t.Skip("pipes are not written inline here")
	}
	first := strings.Repeat("a", 40<<10) + "\n"  // the peer does not read: the pipe keeps it
	second := strings.Repeat("b", 40<<10) + "\n" // of which the pipe takes only a part
	c.Send(nil, []byte(first))
	inner := c.tryWrite
	entered, release := make(chan struct{}), make(chan struct{})
	c.tryWrite = func(b []byte) (int, error) {
		n, err := inner(b)
		close(entered)
		<-release // the write is under way when Close comes
		return n, err
	}
	waiting := make(chan struct{}, 1)
	defer func(f func()) { closeWaits = f }(closeWaits)
	closeWaits = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	go c.Send(nil, []byte(second))
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case <-waiting:
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a message was being written", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not come")
	}
	close(release)
	read := make(chan []byte)
	go func() {
		data, _ := io.ReadAll(r)
		read <- data
	}()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if got := <-read; string(got) != first+second {
		t.Fatalf("the peer read %d bytes, want %d: both messages whole", len(got), len(first)+len(second))
	}
}
