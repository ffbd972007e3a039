//go:build unix

package shared

import (
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

// testPipes are a session's pipes, as the forwarder makes them, with a pipe for the client's
// output (out is its read end); the forwarder's ends are closed at the end of the test.
func testPipes(t *testing.T) (in *os.File, receipts *receiptsEnd, out *os.File, theirs []*os.File) {
	t.Helper()
	out, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	in, receipts, theirs, err = sessionPipes(outW)
	if err != nil {
		t.Fatal(err)
	}
	outW.Close() // the shared process has its own
	t.Cleanup(func() { in.Close(); receipts.Close(); out.Close() })
	return in, receipts, out, theirs
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

// A session's pipes go with its hello: the shared process gets its three ends, which its
// servers' processes do not inherit, reads the client's messages in blocking mode and writes
// to the client's output and the receipts without waiting; what was sent after the hello's
// line is kept.
func TestHelloCarriesPipes(t *testing.T) {
	fwd, shared := socketPair(t)
	in, receipts, out, theirs := testPipes(t)
	if err := sendHello(fwd, []byte("{\"hello\":1}\nafter"), theirs); err != nil {
		t.Fatal(err)
	}
	closeFiles(theirs)

	line, rest, fds, err := readHello(shared)
	if err != nil {
		t.Fatal(err)
	}
	if string(line) != "{\"hello\":1}\n" || string(rest) != "after" || len(fds) != 3 {
		t.Fatalf("line %q, rest %q, %d descriptors", line, rest, len(fds))
	}
	for _, fd := range fds {
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("descriptor %d is inherited by the processes the shared process starts (flags %#x, %v)", fd, flags, err)
		}
	}
	sin, sout, srec, err := receivePipes(fds)
	if err != nil {
		t.Fatal(err)
	}
	defer sin.Close()
	defer sout.Close()
	defer srec.Close()
	if !nonBlocking(t, sout) || !nonBlocking(t, srec) {
		t.Error("the session's write ends are in blocking mode: its writes would wait for the client or the forwarder")
	}
	if nonBlocking(t, sin) {
		t.Error("the session's read end is non-blocking: it would be read through the poller")
	}

	// The client's messages, both ways, and the receipts.
	if _, err := in.Write([]byte("to the session\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := sin.Read(buf); err != nil || string(buf[:n]) != "to the session\n" {
		t.Fatalf("the session read %q, %v", buf[:n], err)
	}
	if _, err := sout.Write([]byte("to the client\n")); err != nil {
		t.Fatal(err)
	}
	if n, err := out.Read(buf); err != nil || string(buf[:n]) != "to the client\n" {
		t.Fatalf("the client read %q, %v", buf[:n], err)
	}
	if _, err := srec.Write([]byte("7\n")); err != nil {
		t.Fatal(err)
	}
	if n, err := receipts.read(buf, false); err != nil || string(buf[:n]) != "7\n" {
		t.Fatalf("the forwarder read the receipts %q, %v", buf[:n], err)
	}
	if n, err := receipts.read(buf, false); err != nil || n != 0 {
		t.Fatalf("the forwarder read the empty receipts %q, %v: it must not wait", buf[:n], err)
	}

	// The end of either side is seen by the other.
	in.Close()
	if n, err := sin.Read(buf); err != io.EOF {
		t.Errorf("after the forwarder's end, the session read %q, %v", buf[:n], err)
	}
	sout.Close()
	if n, err := out.Read(buf); err != io.EOF {
		t.Errorf("after the session's end, the client read %q, %v", buf[:n], err)
	}
	srec.Close()
	if n, err := receipts.read(buf, true); err != io.EOF {
		t.Errorf("after the session's end, the forwarder read the receipts %q, %v", buf[:n], err)
	}
}

// A hello larger than what the socket takes at once (a session's environment can be large;
// macOS's Unix sockets take 8 KiB) is written in parts, its descriptors with the first.
func TestHelloLarge(t *testing.T) {
	fwd, shared := socketPair(t)
	_, _, _, theirs := testPipes(t)
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
	if !bytes.Equal(got, line) || len(rest) != 0 || len(fds) != 3 {
		t.Fatalf("read %d bytes of %d, rest %q, %d descriptors", len(got), len(line), rest, len(fds))
	}
}

// A hello that carries other descriptors than a session's three is refused, and they are closed.
func TestHelloRefusesOtherDescriptors(t *testing.T) {
	if _, _, _, err := receivePipes(nil); err == nil {
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
	if _, _, _, err := receivePipes([]int{fd}); err == nil {
		t.Error("a session with one descriptor was taken")
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
		t.Error("the descriptor of a refused hello is still open")
	}
}
