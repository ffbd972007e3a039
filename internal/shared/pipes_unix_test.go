//go:build unix

package shared

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// socketPair is a connected pair of Unix sockets, as the forwarder's protocol connection is.
func socketPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "socket")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return conn(fds[0]), conn(fds[1])
}

// testLink is a session's pipes and journal as the forwarder makes them, with a pipe for the
// client's input (client is its write end) and one for its output (out is its read end); the
// forwarder's ends are closed at the end of the test.
type testLink struct {
	before, client, out *os.File
	receipts            *receiptsEnd
	journal             *journal
	theirs              []*os.File
}

func testPipes(t *testing.T) testLink {
	t.Helper()
	out, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	inR, client, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	before, receipts, j, theirs, err := sessionPipes(outW, inR, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	outW.Close() // the shared process has its own
	inR.Close()
	t.Cleanup(func() { before.Close(); client.Close(); receipts.Close(); out.Close(); j.release() })
	return testLink{before: before, client: client, out: out, receipts: receipts, journal: j, theirs: theirs}
}

// nonBlocking says whether f's open file is non-blocking (without Fd, which may change it).
func nonBlocking(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags int
	if err := rc.Control(func(fd uintptr) { flags, err = unix.FcntlInt(fd, unix.F_GETFL, 0) }); err != nil {
		t.Fatal(err)
	}
	return flags&unix.O_NONBLOCK != 0
}

// A session's pipes go with its hello: the shared process gets its five ends, which its
// servers' processes do not inherit, reads what comes before the client's messages in blocking
// mode, then the client's messages through the journal, which the forwarder sees, and writes to
// the client's output without waiting, and the receipts into the journal, whose end the
// forwarder sees; what was sent after the hello's line is kept.
func TestHelloCarriesPipes(t *testing.T) {
	fwd, shared := socketPair(t)
	l := testPipes(t)
	if err := sendHello(fwd, []byte("{\"hello\":1}\nafter"), l.theirs); err != nil {
		t.Fatal(err)
	}
	closeFiles(l.theirs)

	line, rest, fds, err := readHello(shared)
	if err != nil {
		t.Fatal(err)
	}
	if string(line) != "{\"hello\":1}\n" || string(rest) != "after" || len(fds) != 5 {
		t.Fatalf("line %q, rest %q, %d descriptors", line, rest, len(fds))
	}
	for _, fd := range fds {
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("descriptor %d is inherited by the processes the shared process starts (flags %#x, %v)", fd, flags, err)
		}
	}
	sbefore, sin, sout, srec, sj, err := receivePipes(fds)
	if err != nil {
		t.Fatal(err)
	}
	defer sbefore.Close()
	if !nonBlocking(t, sout) {
		t.Error("the client's output is in blocking mode: the session's writes would wait for the client")
	}
	if nonBlocking(t, sbefore) {
		t.Error("the session's read end is non-blocking: it would be read through the poller")
	}
	drains := make(chan bool, 1)
	jr, err := newJournalReader(sin, sj, func(wait bool) { drains <- wait })
	if err != nil {
		t.Fatal(err)
	}
	defer jr.stop()
	out := newClientOut(sout, srec, sj)
	defer out.Close()
	sj.release() // the reader and the output hold it

	// What comes before, the client's messages, both ways, and the receipts.
	if _, err := l.before.Write([]byte("set up again\n")); err != nil {
		t.Fatal(err)
	}
	l.before.Close()
	if _, err := l.client.Write([]byte("to the session\n")); err != nil {
		t.Fatal(err)
	}
	got, err := bufio.NewReader(io.MultiReader(sbefore, jr)).ReadString('\n')
	if err == nil {
		var more string
		more, err = bufio.NewReader(jr).ReadString('\n')
		got += more
	}
	if err != nil || got != "set up again\nto the session\n" {
		t.Fatalf("the session read %q, %v", got, err)
	}
	var taken []byte
	l.journal.input.take(0, false, func(b []byte) { taken = append(taken, b...) })
	if string(taken) != "to the session\n" {
		t.Fatalf("the forwarder took %q from the journal", taken)
	}
	buf := make([]byte, 64)
	answer := `{"jsonrpc":"2.0","id":7,"result":{}}` + "\n"
	if _, err := out.TryWrite([]byte(answer)); err != nil {
		t.Fatal(err)
	}
	if n, err := l.out.Read(buf); err != nil || string(buf[:n]) != answer {
		t.Fatalf("the client read %q, %v", buf[:n], err)
	}
	var recs []byte
	rtaken := l.journal.receipts.take(0, false, func(b []byte) { recs = append(recs, b...) })
	if string(recs) != "7\n" || rtaken != 2 {
		t.Fatalf("the forwarder took the receipts %q", recs)
	}

	// The end of either side is seen by the other.
	l.client.Close()
	if n, err := jr.Read(buf); err != io.EOF {
		t.Errorf("after the client's end, the session read %q, %v", buf[:n], err)
	}
	// The reading ends first: the output still writes its receipts into the journal, which
	// it holds too.
	jr.stop()
	if _, err := out.TryWrite([]byte(`{"jsonrpc":"2.0","id":8,"result":{}}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if n, err := l.out.Read(buf); err != nil || n == 0 {
		t.Fatalf("the client read %q, %v", buf[:n], err)
	}
	recs = recs[:0]
	l.journal.receipts.take(rtaken, false, func(b []byte) { recs = append(recs, b...) })
	if string(recs) != "8\n" {
		t.Fatalf("after the reading's end, the forwarder took the receipts %q", recs)
	}
	out.Close()
	if n, err := l.out.Read(buf); err != io.EOF {
		t.Errorf("after the session's end, the client read %q, %v", buf[:n], err)
	}
	if err := l.receipts.wait(); err != nil {
		t.Errorf("after the session's end, the forwarder waited for the receipts' end: %v", err)
	}
}

// A hello larger than what the socket takes at once (a session's environment can be large;
// macOS's Unix sockets take 8 KiB) is written in parts, its descriptors with the first.
func TestHelloLarge(t *testing.T) {
	fwd, shared := socketPair(t)
	theirs := testPipes(t).theirs
	line := []byte(`{"env":"` + strings.Repeat("v", 3<<20) + `"}` + "\n")
	sent := make(chan error, 1)
	go func() { sent <- sendHello(fwd, line, theirs) }()
	got, rest, fds, err := readHello(shared)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFDs(fds)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, line) || len(rest) != 0 || len(fds) != 5 {
		t.Fatalf("read %d bytes of %d, rest %q, %d descriptors", len(got), len(line), rest, len(fds))
	}
}

// A hello that carries other descriptors than a session's five is refused, and they are closed.
func TestHelloRefusesOtherDescriptors(t *testing.T) {
	if _, _, _, _, _, err := receivePipes(nil); err == nil {
		t.Error("a session without pipes was taken")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	fd, err := unix.Dup(int(r.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, _, err := receivePipes([]int{fd}); err == nil {
		t.Error("a session with one descriptor was taken")
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
		t.Error("the descriptor of a refused hello is still open")
	}
}

// The client's input, which a shared process puts in blocking mode, is given back the mode the
// client gave it once the session ends.
func TestRestoreMode(t *testing.T) {
	r, w, err := os.Pipe() // non-blocking, as os.Pipe makes it
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	restore := restoreMode(r)
	blocking(r)
	if nonBlocking(t, r) {
		t.Fatal("blocking left it non-blocking")
	}
	restore()
	if !nonBlocking(t, r) {
		t.Error("the input's mode was not given back")
	}
}
