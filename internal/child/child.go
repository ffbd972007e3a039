// Package child runs one configured server as a child process: it starts the program directly
// (never through a shell) with its own pipes, process group and parent-death signal, forwards
// its stderr line by line, notices its exit at once, and stops it and everything it started.
// A command that is not in the aggregator's PATH is looked up in the login shell's PATH, which
// the shell is asked for once (loginshell.go): a desktop app's PATH is short.
package child

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Spec says what to run.
type Spec struct {
	// Key names the server in messages and as the prefix of its stderr lines.
	Key     string
	Command string
	Args    []string
	// Env is the whole environment of the child, as NAME=value.
	Env []string
	// Dir is the child's working directory; "" means the caller's. A relative Command is
	// taken from it.
	Dir string
}

// Process is a running (or exited) child.
type Process struct {
	// Stdin is the child's standard input; closing it is the polite way to ask the child to
	// stop.
	Stdin io.WriteCloser
	// Stdout is the child's standard output. Once the child has exited it is given a short
	// time to drain, then reads fail: a grandchild that holds the pipe open cannot hide the
	// exit.
	Stdout *os.File

	cmd        *exec.Cmd
	tail       *tail
	stderrDone chan struct{} // closed at the end of the child's stderr
	exited     chan struct{}
	err        error // the exit status, once exited is closed
	plat       platform
	// loginPath is the login shell's PATH when the command was found there (and the child
	// runs with it), else "".
	loginPath string

	stopOnce sync.Once
}

// TailLines is how many of its last stderr lines a Process keeps for error messages.
const TailLines = 20

// drainTime is how long the stdout of an exited child is still read, for what the child wrote
// just before it exited.
const drainTime = 200 * time.Millisecond

// Start starts the child. Its stderr lines are written to stderr as "[key] line", one Write
// each; stderr must not block (see forwardStderr).
func Start(spec Spec, stderr io.Writer) (*Process, error) {
	cmd, loginPath, err := command(spec)
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	if cmd.Env == nil {
		cmd.Env = spec.Env // unless the command was found in the login shell's PATH
	}
	cmd.Dir = spec.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	p := &Process{Stdin: inW, Stdout: outR, cmd: cmd, loginPath: loginPath, exited: make(chan struct{}), tail: newTail(TailLines), stderrDone: make(chan struct{})}
	p.plat.prepare(cmd)
	err = cmd.Start()
	// The child has its own copies of its ends of the pipes (or failed to start).
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	p.plat.started(cmd)
	go func() {
		forwardStderr(spec.Key, errR, stderr, p.tail)
		close(p.stderrDone)
	}()
	go func() {
		p.err = cmd.Wait()
		p.plat.exited()
		// Let the reader take what is left, then make reads fail even if a grandchild still
		// holds the write end.
		_ = outR.SetReadDeadline(time.Now().Add(drainTime))
		close(p.exited)
	}()
	return p, nil
}

// Exited is closed when the child has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// ExitDescription says how the child ended, in words for an error message.
func (p *Process) ExitDescription() string {
	select {
	case <-p.exited:
	default:
		return "still running"
	}
	if p.err == nil {
		return "exited with status 0"
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		if s := ee.String(); strings.HasPrefix(s, "signal: ") {
			return "was killed by a signal (" + strings.TrimPrefix(s, "signal: ") + ")"
		}
		return fmt.Sprintf("exited with status %d", ee.ExitCode())
	}
	return p.err.Error()
}

// Tail returns the child's last stderr lines. For a child that has exited, it first waits
// (briefly: a grandchild may hold the pipe) for the last of them to be read.
func (p *Process) Tail() []string {
	select {
	case <-p.exited:
		select {
		case <-p.stderrDone:
		case <-time.After(drainTime):
		}
	default:
	}
	return p.tail.lines()
}

// LoginShellPath is the PATH of the user's login shell when the command was not in the
// aggregator's PATH but in that one, which the child then got as its PATH; "" otherwise.
func (p *Process) LoginShellPath() string { return p.loginPath }

// PID is the child's process ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Stop ends the child and everything it started: it closes the child's stdin, waits up to
// grace for it to exit, asks its process group to terminate, waits up to grace again, and
// kills the group. The group is signalled even when the child exited on its own, for the
// grandchildren it may leave (the server behind npx, say). Stop returns when the child has
// exited; it is safe to call more than once.
func (p *Process) Stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		p.Stdin.Close()
		select {
		case <-p.exited:
		case <-time.After(grace):
		}
		if p.plat.terminate() {
			// Wait for the child and then for the rest of its group, up to grace.
			deadline := time.Now().Add(grace)
			select {
			case <-p.exited:
			case <-time.After(grace):
			}
			for p.plat.groupAlive() && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
		}
		p.plat.kill()
		<-p.exited
		p.plat.release()
	})
}

// forwardStderr copies the child's stderr to w line by line, and keeps its tail. w must not
// block (the program gives a logging.Writer): a child whose stderr is not read stalls.
func forwardStderr(key string, r io.ReadCloser, w io.Writer, t *tail) {
	defer r.Close()
	prefix := []byte("[" + key + "] ")
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(frag) > 0 {
			text := bytes.TrimRight(frag, "\r\n")
			t.add(string(text))
			line = append(append(append(line[:0], prefix...), text...), '\n')
			w.Write(line)
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// tail keeps the last n lines.
type tail struct {
	mu   sync.Mutex
	n    int
	buf  []string
	next int
}

func newTail(n int) *tail { return &tail{n: n} }

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(line) > 1000 {
		line = line[:1000] + "..."
	}
	if len(t.buf) < t.n {
		t.buf = append(t.buf, line)
		return
	}
	t.buf[t.next] = line
	t.next = (t.next + 1) % t.n
}

func (t *tail) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.buf))
	out = append(out, t.buf[t.next:]...)
	return append(out, t.buf[:t.next]...)
}
