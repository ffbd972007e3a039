package stdio

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// burstPair is a Conn that reads three messages buffered together (in) and a Conn whose writes
// its bursts hold (out), with the reading end of out's pipe.
func burstPair(t *testing.T) (in, out *Conn, peer *os.File) {
	t.Helper()
	var b Burst
	ir, iw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	or, ow, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { iw.Close(); ir.Close(); or.Close(); ow.Close() })
	var lines strings.Builder
	for i := range 3 {
		fmt.Fprintf(&lines, `{"jsonrpc":"2.0","id":%d,"method":"m"}`+"\n", i)
	}
	if _, err := iw.WriteString(lines.String()); err != nil {
		t.Fatal(err)
	}
	return New(ir, io.Discard, &Options{Burst: &b}), New(strings.NewReader(""), ow, &Options{HeldBy: &b}), or
}

// nothingArrives checks that the peer has nothing to read for a moment.
func nothingArrives(t *testing.T, peer *os.File) {
	t.Helper()
	if err := peer.SetReadDeadline(time.Now().Add(50 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if n, err := peer.Read(buf); n > 0 || err == nil {
		t.Fatalf("%q arrived while the burst held it", buf[:n])
	}
	_ = peer.SetReadDeadline(time.Time{})
}

// What a reader relays while it has more messages buffered is held, and written in one go
// when its buffer is empty; a message read on its own is never held.
func TestBurstHoldsAndWritesTogether(t *testing.T) {
	in, out, peer := burstPair(t)
	for i := range 3 {
		if _, err := in.Read(); err != nil {
			t.Fatal(err)
		}
		out.SendHeld(OnFailure(func(err error) { t.Errorf("message %d: %v", i, err) }), []byte(fmt.Sprintf(`{"i":%d}`+"\n", i)))
		if i < 2 {
			nothingArrives(t, peer)
		}
	}
	// The third was the last buffered: the next Read would wait, so it ends the burst first.
	in.EndBurst()
	buf := make([]byte, 100)
	n, err := peer.Read(buf)
	if want := `{"i":0}` + "\n" + `{"i":1}` + "\n" + `{"i":2}` + "\n"; err != nil || string(buf[:n]) != want {
		t.Fatalf("the peer read %q (%v), want the three messages in one write, in order: %q", buf[:n], err, want)
	}

	// Alone, a message goes at once.
	var b Burst
	r, w, _ := os.Pipe()
	defer r.Close()
	defer w.Close()
	alone := New(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"m"}`+"\n"), io.Discard, &Options{Burst: &b})
	dst := New(strings.NewReader(""), w, &Options{HeldBy: &b})
	if _, err := alone.Read(); err != nil {
		t.Fatal(err)
	}
	dst.SendHeld(nil, []byte("{}\n"))
	_ = r.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := r.Read(buf); err != nil || string(buf[:n]) != "{}\n" {
		t.Fatalf("a message read alone was held: %q %v", buf[:n], err)
	}
}

// Hold makes a burst of a function: what it sends held is written once it returns, together.
func TestBurstHold(t *testing.T) {
	_, out, peer := burstPair(t)
	out.opts.HeldBy.Hold(func() {
		for i := range 3 {
			out.SendHeld(nil, []byte(fmt.Sprintf(`{"i":%d}`+"\n", i)))
		}
		nothingArrives(t, peer)
	})
	buf := make([]byte, 100)
	n, err := peer.Read(buf)
	if want := `{"i":0}` + "\n" + `{"i":1}` + "\n" + `{"i":2}` + "\n"; err != nil || string(buf[:n]) != want {
		t.Fatalf("the peer read %q (%v), want the three messages in one write, in order: %q", buf[:n], err, want)
	}
}

// Two bursts holding writes to one Conn (SendHeldBy: the sessions of a shared server): the end
// of either writes what both held, in order; the later does not wait for the earlier's end.
func TestBurstsOfOneConn(t *testing.T) {
	_, out, peer := burstPair(t)
	var first, second Burst
	buf := make([]byte, 100)
	first.Hold(func() {
		out.SendHeldBy(&first, nil, []byte("one\n"))
		second.Hold(func() {
			out.SendHeldBy(&second, nil, []byte("two\n"))
			nothingArrives(t, peer)
		})
		_ = peer.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := peer.Read(buf)
		if err != nil || string(buf[:n]) != "one\ntwo\n" {
			t.Fatalf("at the end of the second burst the peer read %q (%v), want both held messages, in order", buf[:n], err)
		}
	})
	nothingArrives(t, peer) // the first burst's end: nothing is left to write
}

// A write that is not held (Send, Write) writes what is held first: order is kept.
func TestBurstKeepsOrder(t *testing.T) {
	in, out, peer := burstPair(t)
	if _, err := in.Read(); err != nil {
		t.Fatal(err)
	}
	out.SendHeld(nil, []byte("held\n"))
	out.Send(nil, []byte("now\n"))
	buf := make([]byte, 100)
	n, err := peer.Read(buf)
	if err != nil || string(buf[:n]) != "held\nnow\n" {
		t.Fatalf("the peer read %q (%v), want the held message before the one sent at once", buf[:n], err)
	}
	in.EndBurst()
}

// A response held in a burst counts as answered (for the drain at the end of the input) only
// once it is written.
func TestBurstAnswersOnceWritten(t *testing.T) {
	id7, _ := jsonrpc.MakeID(float64(7))
	var b Burst
	ir, iw, _ := os.Pipe()
	defer ir.Close()
	defer iw.Close()
	src := New(ir, io.Discard, &Options{Burst: &b})
	or, ow, _ := os.Pipe()
	defer or.Close()
	defer ow.Close()
	// The Conn that answers reads one request and writes to ow; its responses are held by b.
	answering := New(strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"m"}`+"\n"), ow, &Options{HeldBy: &b, DrainOnEOF: time.Hour})
	if _, err := answering.Read(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(iw, `{"jsonrpc":"2.0","method":"a"}`+"\n"+`{"jsonrpc":"2.0","method":"b"}`+"\n")
	if _, err := src.Read(); err != nil { // a burst begins
		t.Fatal(err)
	}
	if err := answering.WriteResponse(id7, []byte(`{}`), nil); err != nil {
		t.Fatal(err)
	}
	answering.pendingMu.Lock()
	waiting := answering.pending[id7]
	answering.pendingMu.Unlock()
	if !waiting {
		t.Fatal("a held response counted as answered before it was written")
	}
	src.EndBurst()
	line, err := bufio.NewReader(or).ReadString('\n')
	if err != nil || line != `{"jsonrpc":"2.0","id":7,"result":{}}`+"\n" {
		t.Fatalf("the peer read %q (%v)", line, err)
	}
	answering.pendingMu.Lock()
	waiting = answering.pending[id7]
	answering.pendingMu.Unlock()
	if waiting {
		t.Fatal("a response written at the end of a burst still counts as unanswered")
	}
}

// Held lines are written in writes that a pipe carries whole (atomicWrite), cut between lines:
// a peer of an aggregator killed in the middle of a burst reads only whole lines.
func TestLinesWithin(t *testing.T) {
	for _, tc := range []struct {
		data string
		max  int
		want int
	}{
		{"a\nb\n", 10, 4},
		{"aaa\nbbb\nccc\n", 9, 8},
		{"aaaaaaaa\nb\n", 4, 9}, // a line longer than max goes alone
		{"aaaa", 2, 4},          // no newline: all of it
	} {
		if got := linesWithin([]byte(tc.data), tc.max); got != tc.want {
			t.Errorf("linesWithin(%q, %d) = %d, want %d", tc.data, tc.max, got, tc.want)
		}
	}
}

// stagedWriter takes part of the first write it is tried with, and runs during before it
// returns what a concurrent burst would do in that moment; it takes the rest as asked.
type stagedWriter struct {
	lockedWriter // Write and String, under its lock
	tried        bool
	during       func()
}

func (w *stagedWriter) TryWrite(b []byte) (int, error) {
	w.mu.Lock()
	first := !w.tried
	w.tried = true
	if !first {
		defer w.mu.Unlock()
		return w.b.Write(b)
	}
	n := len(b) / 2
	w.b.Write(b[:n])
	w.mu.Unlock()
	w.during()
	return n, nil
}

// A message a burst holds while another is being written, which the peer takes only in part,
// goes after that one's rest, never inside it.
func TestBurstHeldDuringPartialWrite(t *testing.T) {
	var b Burst
	w := &stagedWriter{}
	c := New(strings.NewReader(""), w, &Options{HeldBy: &b})
	// Another reader's burst, begun while the long message is being written and still under
	// way when the writer is found to have taken part of it.
	w.during = func() {
		b.begin()
		c.SendHeld(nil, []byte(`{"held":1}`+"\n"))
	}
	long := `{"long":"` + strings.Repeat("x", 100) + `"}` + "\n"
	c.Send(nil, []byte(long))
	// The rest goes to the background writer; the burst ends only once it has written it.
	deadline := time.Now().Add(5 * time.Second)
	for len(w.String()) < len(long) {
		if time.Now().After(deadline) {
			t.Fatalf("the rest of the message was not written: the peer got %q", w.String())
		}
		time.Sleep(time.Millisecond)
	}
	b.end()
	want := long + `{"held":1}` + "\n"
	for w.String() != want {
		if time.Now().After(deadline) {
			t.Fatalf("the peer got %q, want the message whole, then the held one: %q", w.String(), want)
		}
		time.Sleep(time.Millisecond)
	}
}
