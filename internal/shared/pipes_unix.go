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

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// A forwarder's session reads its client's messages itself: the hello of its protocol connection
// carries (SCM_RIGHTS) the client's input (the forwarder's stdin when it is a pipe or a socket
// of its own, else a pipe the forwarder copies it to: clientInput), which the shared process
// reads through the session's journal (journal_unix.go), also carried; and a pipe of what the
// forwarder gives the session before the client's input (what the client set up, sent again to
// a new shared process), which the session reads to its end first. The session's messages go to
// the client without the forwarder too: the hello carries the client's output (clientOutput)
// and the write end of the receipts' end (its receipts are in the journal: clientout.go).

// sessionPipes makes a session's pipes and journal: the forwarder writes what comes before the
// client's input to before, waits for the end of the session's receipts on receipts and takes
// the journal j; theirs are the shared process's (the read end of before, out, the write end
// of receipts, in and the journal's file), to be sent and then closed here. before's read end
// is put in blocking mode (the shared process reads it so; the mode is the open file's, which
// the shared process's descriptor shares). dir is the place's private directory (newJournal).
func sessionPipes(out, in *os.File, dir string) (before *os.File, receipts *receiptsEnd, j *journal, theirs []*os.File, err error) {
	beforeR, before, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	receipts, recW, err := receiptsPipe()
	if err != nil {
		closeFiles([]*os.File{beforeR, before})
		return nil, nil, nil, nil, err
	}
	_ = beforeR.Fd() // Fd puts it in blocking mode
	mine := []*os.File{beforeR, before, recW}
	theirOut, err := dupFile(out)
	if err != nil {
		closeFiles(mine)
		receipts.Close()
		return nil, nil, nil, nil, err
	}
	mine = append(mine, theirOut)
	theirIn, err := dupFile(in)
	if err != nil {
		closeFiles(mine)
		receipts.Close()
		return nil, nil, nil, nil, err
	}
	mine = append(mine, theirIn)
	j, jf, err := newJournal(dir)
	if err != nil {
		closeFiles(mine)
		receipts.Close()
		return nil, nil, nil, nil, err
	}
	return before, receipts, j, []*os.File{beforeR, theirOut, recW, theirIn, jf}, nil
}

// clientInput is what the shared process reads the client's messages from, given the
// forwarder's stdin, stdout and stderr: stdin itself when it is a pipe or a socket open there
// alone (the shared process reads it in blocking mode, which it puts it in: that would change
// how stdout or stderr are written if they shared it), so that nothing lies between the client
// and its session; otherwise (a terminal, a file, a reader that is no file) the read end of a
// pipe that copy copies stdin to, which the forwarder runs, and which ends the pipe at the end
// of stdin. The pipe outlives the shared processes the session runs in: what one did not read,
// the next does.
func clientInput(stdin io.Reader, stdout, stderr io.Writer) (in *os.File, copy func(), err error) {
	if f, ok := stdin.(*os.File); ok && ownPipe(f, stdout, stderr) {
		return f, nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	return r, func() {
		_, _ = io.CopyBuffer(w, stdio.Yielding(stdin), make([]byte, 64<<10))
		w.Close()
	}, nil
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

// receiptsEnd is the forwarder's end of the receipts' end: a pipe that nothing is written to
// (the receipts are in the journal's ring, clientout.go), whose write end the shared process
// closes once it writes no more receipts, after the client's output (clientOut.close), or by its
// own end. It is non-blocking, and no poller watches it.
type receiptsEnd struct{ fd int }

// receiptsPipe makes the receipts' end: the forwarder's end, and the shared process's.
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
	return &receiptsEnd{fd: p[0]}, os.NewFile(uintptr(p[1]), "the end of the session's receipts"), nil
}

// wait waits for the shared process to write no more receipts: for the pipe's end.
func (r *receiptsEnd) wait() error {
	var buf [64]byte
	for {
		n, err := unix.Read(r.fd, buf[:])
		switch {
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			if _, err := unix.Poll([]unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}}, -1); err != nil && err != unix.EINTR {
				return err
			}
		case err != nil:
			return err
		case n == 0:
			return nil
		}
	}
}

func (r *receiptsEnd) Close() error { return unix.Close(r.fd) }

// restoreMode returns a function that gives f's open file back the blocking mode it has now.
func restoreMode(f *os.File) func() {
	rc, err := f.SyscallConn()
	if err != nil {
		return func() {}
	}
	flags := -1
	_ = rc.Control(func(fd uintptr) { flags, _ = unix.FcntlInt(fd, unix.F_GETFL, 0) })
	return func() {
		if flags >= 0 {
			_ = rc.Control(func(fd uintptr) { _ = unix.SetNonblock(int(fd), flags&unix.O_NONBLOCK != 0) })
		}
	}
}

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
const maxHelloFiles = 5

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

// receivePipes are a hosted session's ends of its forwarder's pipes: it reads what comes before
// the client's input from before (blocking, to its end), then the client's messages from in
// through the journal j (journalReader), writes its own to out, the client's output
// (non-blocking: stdio.Conn writes what the pipe takes at once, and never waits for the
// client), and its receipts into j, closing receipts once it writes no more of them.
func receivePipes(fds []int) (before, in, out, receipts *os.File, j *journal, err error) {
	if len(fds) != 5 {
		closeFDs(fds)
		return nil, nil, nil, nil, nil, fmt.Errorf("%d descriptors with the hello, not the session's five", len(fds))
	}
	for _, fd := range fds[1:3] {
		if err := unix.SetNonblock(fd, true); err != nil {
			closeFDs(fds)
			return nil, nil, nil, nil, nil, err
		}
	}
	// in is read blocking (journalReader), whatever a shared process before made of its open file.
	if err := unix.SetNonblock(fds[3], false); err != nil {
		closeFDs(fds)
		return nil, nil, nil, nil, nil, err
	}
	jf := os.NewFile(uintptr(fds[4]), "the session's journal")
	j, err = mapJournal(jf)
	jf.Close() // the mapping stays
	if err != nil {
		closeFDs(fds[:4])
		return nil, nil, nil, nil, nil, err
	}
	// os.NewFile polls a descriptor that is non-blocking when it is made.
	return os.NewFile(uintptr(fds[0]), "what comes before the client's messages"), os.NewFile(uintptr(fds[3]), "the client's messages"),
		os.NewFile(uintptr(fds[1]), "the client's output"), os.NewFile(uintptr(fds[2]), "the end of the session's receipts"), j, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}
