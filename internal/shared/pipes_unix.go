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

// A forwarder's session carries its client's messages to the shared process over a pipe, made
// by the forwarder and handed to the shared process with the hello of its protocol connection
// (SCM_RIGHTS), rather than over the socket: a stream socket costs both processes more per
// message than a pipe. The shared process reads the client's messages as an unshared session
// reads its stdin, with a blocking read on a thread of its own, which wakes nothing else
// (measured each way, BENCHMARKS.md, "Shared servers": a polled read in the shared process cost
// a sixth more). The session's messages go the other way without the forwarder: the hello
// carries the client's output (clientOutput) and the write end of the receipts' pipe
// (clientout.go).

// sessionPipes makes a session's pipes: the forwarder writes the client's messages to in and
// reads the session's receipts from receipts; theirs are the shared process's ends (the read
// end of in, out, the write end of receipts), to be sent and then closed here. in's read end is
// put in blocking mode (the shared process reads it so; the mode is the open file's, which the
// shared process's descriptor shares).
func sessionPipes(out *os.File) (in *os.File, receipts *receiptsEnd, theirs []*os.File, err error) {
	inR, in, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	receipts, recW, err := receiptsPipe()
	if err != nil {
		inR.Close()
		in.Close()
		return nil, nil, nil, err
	}
	_ = inR.Fd() // Fd puts it in blocking mode
	theirOut, err := dupFile(out)
	if err != nil {
		closeFiles([]*os.File{inR, in, recW})
		receipts.Close()
		return nil, nil, nil, err
	}
	return in, receipts, []*os.File{inR, theirOut, recW}, nil
}

// dupFile is a descriptor of f's open file of its own, which closing does not close f.
func dupFile(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var fd int
	var derr error
	if err := rc.Control(func(ofd uintptr) { fd, derr = unix.FcntlInt(ofd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// clientOutput is what the shared process writes the session's messages to, given the
// forwarder's stdin, stdout and stderr: stdout itself when it is a pipe or a socket open there
// alone (the shared process makes it non-blocking, which would change how stdin or stderr are
// written or read if they shared it: a client that passes one socket for both, a script that
// sends stderr where stdout goes), so that nothing lies between the session and its client in
// that direction; otherwise (a terminal, a file, a writer that is no file) a pipe that copy
// copies to stdout, which the forwarder runs and which ends when every write end of the pipe is
// closed.
func clientOutput(stdin io.Reader, stdout io.Writer, stderr io.Writer) (out *os.File, copy func(), err error) {
	if f, ok := stdout.(*os.File); ok && ownPipe(f, stdin, stderr) {
		return f, nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	return w, func() {
		_, _ = io.Copy(stdout, r)
		r.Close()
	}, nil
}

// ownPipe says whether f is a pipe or a socket that neither of others (when files) shares.
func ownPipe(f *os.File, others ...any) bool {
	st, err := f.Stat()
	if err != nil || st.Mode()&(os.ModeNamedPipe|os.ModeSocket) == 0 {
		return false
	}
	for _, o := range others {
		if of, ok := o.(*os.File); ok {
			if ost, err := of.Stat(); err == nil && os.SameFile(st, ost) {
				return false
			}
		}
	}
	return true
}

// writeSome is a function that writes what f (non-blocking) takes of b, waiting until it takes
// some: Write of a clientOut, which tells the receipts of each part written.
func writeSome(f *os.File) func(b []byte) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return f.Write
	}
	return func(b []byte) (int, error) {
		var n int
		var werr error
		if err := rc.Write(func(fd uintptr) bool {
			for {
				n, werr = unix.Write(int(fd), b)
				if werr != unix.EINTR {
					return werr != unix.EAGAIN // wait for it to take some
				}
			}
		}); err != nil {
			return 0, err
		}
		return max(n, 0), werr
	}
}

// receiptsEnd is the forwarder's end of the receipts' pipe: a non-blocking descriptor that no
// poller watches, since one would wake the forwarder for every receipt written, which it reads
// seldom (forwarder.drain).
type receiptsEnd struct{ fd int }

// receiptsPipe makes the receipts' pipe: the forwarder's end, and the shared process's. It keeps
// the system's size (64 KiB on Linux and macOS), which holds what the forwarder may leave unread
// (drainAt): a larger one would count against what the user's pipes may hold together
// (/proc/sys/fs/pipe-user-pages-soft), past which every new pipe of the user's gets 8 KiB.
func receiptsPipe() (*receiptsEnd, *os.File, error) {
	var p [2]int
	syscall.ForkLock.RLock() // no process started meanwhile inherits them
	err := unix.Pipe(p[:])
	if err == nil {
		unix.CloseOnExec(p[0])
		unix.CloseOnExec(p[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, err
	}
	if err := unix.SetNonblock(p[0], true); err != nil {
		closeFDs(p[:])
		return nil, nil, err
	}
	return &receiptsEnd{fd: p[0]}, os.NewFile(uintptr(p[1]), "the session's receipts"), nil
}

// read reads what the pipe holds into buf; when it holds nothing, 0 at once, or with wait, once
// it holds some or has ended (io.EOF).
func (r *receiptsEnd) read(buf []byte, wait bool) (int, error) {
	for {
		n, err := unix.Read(r.fd, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			if !wait {
				return 0, nil
			}
			if _, err := unix.Poll([]unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}}, -1); err != nil && err != unix.EINTR {
				return 0, err
			}
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(buf) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

func (r *receiptsEnd) Close() error { return unix.Close(r.fd) }

// blocking puts f's open file in blocking mode, for the forwarder's own writes to the client's
// output once no shared process writes to it (one made it non-blocking).
func blocking(f *os.File) {
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _ = unix.SetNonblock(int(fd), false) })
	}
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
const maxHelloFiles = 3

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
// messages from in (blocking, on a thread, as an unshared session reads its stdin), writes its
// own to out, the client's output, and its receipts to receipts (both non-blocking: stdio.Conn
// writes what the pipe takes at once, and never waits for the client or the forwarder).
func receivePipes(fds []int) (in, out, receipts *os.File, err error) {
	if len(fds) != 3 {
		closeFDs(fds)
		return nil, nil, nil, fmt.Errorf("%d descriptors with the hello, not the session's three", len(fds))
	}
	for _, fd := range fds[1:] {
		if err := unix.SetNonblock(fd, true); err != nil {
			closeFDs(fds)
			return nil, nil, nil, err
		}
	}
	// os.NewFile polls a descriptor that is non-blocking when it is made.
	return os.NewFile(uintptr(fds[0]), "the client's messages"), os.NewFile(uintptr(fds[1]), "the client's output"),
		os.NewFile(uintptr(fds[2]), "the session's receipts"), nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}
