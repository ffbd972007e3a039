//go:build unix

package shared

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// A forwarder's session carries its client's messages over two pipes, made by the forwarder
// and handed to the shared process with the hello of its protocol connection (SCM_RIGHTS),
// rather than over the socket: a stream socket costs both processes more per message than a
// pipe. The shared process reads the client's messages as an unshared session reads its stdin,
// with a blocking read on a thread of its own, which wakes nothing else; the forwarder reads
// the session's through the runtime's poller, as a relay reads its child. Measured each way
// (BENCHMARKS.md, "Shared servers"), these were the cheapest: a blocking read in the forwarder
// cost it half as much again, and a polled one in the shared process a sixth more.

// sessionPipes makes the two pipes of a session: the forwarder writes the client's messages to
// in and reads the session's from out; theirs are the shared process's ends (the read end of
// in, the write end of out), to be sent and then closed here. They are in blocking mode, which
// the shared process's ends share (it is the pipe's, not the descriptor's): its read end stays
// so, its write end is made non-blocking (receivePipes).
func sessionPipes() (in, out *os.File, theirs []*os.File, err error) {
	inR, in, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	out, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		in.Close()
		return nil, nil, nil, err
	}
	_, _ = inR.Fd(), outW.Fd() // Fd puts them in blocking mode
	return in, out, []*os.File{inR, outW}, nil
}

// sendHello writes the hello line on conn with files attached (to its first bytes: a socket
// may take a long hello in parts).
func sendHello(conn net.Conn, line []byte, files []*os.File) error {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("not a Unix socket")
	}
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	n, _, err := uc.WriteMsgUnix(line, unix.UnixRights(fds...), nil)
	if err == nil && n < len(line) {
		_, err = conn.Write(line[n:])
	}
	return err
}

// maxHelloFiles is the most files a hello carries.
const maxHelloFiles = 2

// readHello reads the first line of conn, and the descriptors sent with it; rest is what was
// read past the line. Each read is made under syscall.ForkLock and what it receives marked
// close-on-exec before the lock is let go, so that no process the shared process starts
// meanwhile (a server) inherits a session's pipe, which would keep it open after the session.
func readHello(conn net.Conn) (line, rest []byte, fds []int, err error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil, nil, nil, fmt.Errorf("not a Unix socket")
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil, nil, nil, err
	}
	oob := make([]byte, unix.CmsgSpace(maxHelloFiles*4))
	buf := make([]byte, 0, 16<<10)
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= maxHello {
				closeFDs(fds)
				return nil, nil, nil, fmt.Errorf("a hello longer than %d bytes", maxHello)
			}
			buf = append(buf, make([]byte, len(buf))...)[:len(buf)]
		}
		var n int
		var got []int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			syscall.ForkLock.RLock()
			defer syscall.ForkLock.RUnlock()
			var oobn int
			n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf[len(buf):cap(buf)], oob, 0)
			if rerr == nil && oobn > 0 {
				got, rerr = parseRights(oob[:oobn])
			}
			return rerr != unix.EAGAIN
		})
		fds = append(fds, got...)
		if err == nil {
			err = rerr
		}
		if err == nil && n == 0 {
			err = io.EOF
		}
		if err != nil {
			closeFDs(fds)
			return nil, nil, nil, err
		}
		buf = buf[:len(buf)+n]
		if i := bytes.IndexByte(buf[len(buf)-n:], '\n'); i >= 0 {
			end := len(buf) - n + i + 1
			return buf[:end], buf[end:], fds, nil
		}
	}
}

// maxHello bounds a hello: a session's environment and flags.
const maxHello = 4 << 20

// parseRights takes the descriptors out of a control message.
func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range got {
			unix.CloseOnExec(fd) // under ForkLock (readHello)
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

// receivePipes are a hosted session's ends of its forwarder's pipes: it reads the client's
// messages from in (blocking, on a thread, as an unshared session reads its stdin) and
// writes its own to out (non-blocking: stdio.Conn writes what the pipe takes at once, and
// never waits for the forwarder).
func receivePipes(fds []int) (in, out *os.File, err error) {
	if len(fds) != 2 {
		closeFDs(fds)
		return nil, nil, fmt.Errorf("%d descriptors with the hello, not the session's two pipes", len(fds))
	}
	if err := unix.SetNonblock(fds[1], true); err != nil {
		closeFDs(fds)
		return nil, nil, err
	}
	// os.NewFile polls a descriptor that is non-blocking when it is made.
	return os.NewFile(uintptr(fds[0]), "the client's messages"), os.NewFile(uintptr(fds[1]), "the session's messages"), nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}
