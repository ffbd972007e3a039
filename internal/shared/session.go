package shared

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/child"
)

// The session's side: a Starter whose servers are attachments to processes the shared process
// runs, which it starts when none runs.

// Options configure a session.
type Options struct {
	// Executable is the program, which the shared process is started as; Version its version
	// (with the executable, it picks the shared process of this build).
	Executable, Version string
	// Config is the session's configuration file, for check.
	Config string
	// Linger is how long a shared process keeps a server no session uses (DefaultLinger when
	// 0); the session that starts the shared process sets it.
	Linger time.Duration
	// Log, when set, hears (at debug) why a server did not share the process of another
	// session's server of the same entry.
	Log *slog.Logger
	// Dir is the session's working directory, where a server without "cwd" runs; "" is this
	// process's.
	Dir string
	// hosted is a session the shared process hosts (Hosted.Session), which its forwarder's
	// connection counts as a session: the place is the shared process's own socket, and
	// nothing starts another.
	hosted bool
}

// Session is one session's link to the shared process of its build.
type Session struct {
	opts  Options
	place place
	id    string
}

// Join prepares a session to share the servers of the shared process of this build: the place
// is checked; the shared process is found, or started, with the first server.
func Join(opts Options) (*Session, error) {
	if opts.Linger <= 0 {
		opts.Linger = DefaultLinger
	}
	p, err := locate(build(opts.Executable, opts.Version))
	if err != nil {
		return nil, err
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &Session{opts: opts, place: p, id: hex.EncodeToString(id[:])}, nil
}

// Socket is the shared process's socket.
func (s *Session) Socket() string { return s.place.socket }

// Start attaches to the process of spec for a server of this session, which the shared process
// starts when none runs that this session may share: one whose entry is the same (command,
// arguments, the env the entry adds, the directory) and, for a legacy server, which was
// initialized with client. It is an aggregator.Starter.
func (s *Session) Start(sp child.Spec, client json.RawMessage, stderr io.Writer) (*Attachment, error) {
	ownDir := sp.Dir != ""
	if !ownDir {
		sp.Dir = s.opts.Dir // the session's own: the shared process runs elsewhere
	}
	if sp.Dir == "" {
		dir, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("the working directory: %w", err)
		}
		sp.Dir = dir
	}
	h := hello{Protocol: protocol, Kind: kindAttach, Session: s.id, Key: sp.Key,
		Spec:   &spec{Command: sp.Command, Args: sp.Args, Env: sp.Env, Dir: sp.Dir, OwnDir: ownDir},
		Client: client, Linger: s.opts.Linger}
	conn, r, rep, err := s.attach(h)
	if err != nil {
		return nil, err
	}
	if rep.Apart != "" && s.opts.Log != nil {
		s.opts.Log.Debug("the server does not share the process of another session's", "server", sp.Key, "pid", rep.PID, "why", rep.Apart)
	}
	return newAttachment(conn, r, rep, sp.Key, stderr), nil
}

// newAttachment is the session's side of an attachment whose hello was answered with rep.
func newAttachment(conn net.Conn, r *bufio.Reader, rep reply, key string, stderr io.Writer) *Attachment {
	a := &Attachment{conn: conn, pid: rep.PID, login: rep.LoginShellPath, exited: make(chan struct{}), stderr: stderr, prefix: "[" + key + "] "}
	a.out = &controlReader{r: r, conn: conn, on: a.control, eof: a.ended}
	return a
}

// errUnanswered is a shared process that closed a connection without a reply.
var errUnanswered = errors.New("closed the connection unanswered")

// attach sends an attachment's hello, and reads the reply.
func (s *Session) attach(h hello) (net.Conn, *bufio.Reader, reply, error) {
	var rep reply
	conn, r, err := s.dial(h)
	if err != nil {
		return nil, nil, rep, err
	}
	rep, err = readReply(conn, r)
	if err != nil {
		return nil, nil, rep, err
	}
	return conn, r, rep, nil
}

// readReply reads the shared process's reply to an attachment's hello; the connection is
// closed when it is an error.
func readReply(conn net.Conn, r *bufio.Reader) (reply, error) {
	var rep reply
	line, err := r.ReadBytes('\n')
	if err == io.EOF && len(line) == 0 {
		err = errUnanswered
	}
	if err == nil {
		err = json.Unmarshal(line, &rep)
	}
	if err != nil {
		conn.Close()
		return rep, fmt.Errorf("the shared process did not answer: %w", err)
	}
	if rep.Error != "" {
		conn.Close()
		return rep, errors.New(rep.Error)
	}
	return rep, nil
}

// dial connects to the shared process, starting it when none answers, and sends h.
func (s *Session) dial(h hello) (net.Conn, *bufio.Reader, error) {
	conn, err := s.connect()
	if err != nil {
		return nil, nil, err
	}
	line, _ := json.Marshal(h)
	if _, err := conn.Write(append(line, '\n')); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("the shared process %s: %w", s.place.socket, err)
	}
	return conn, bufio.NewReaderSize(conn, 64<<10), nil
}

// connect connects to the shared process of this build, and starts it when none runs: one
// session at a time (the place's lock), so that two sessions starting together start one.
func (s *Session) connect() (net.Conn, error) {
	if s.opts.hosted {
		return s.connectTo() // the shared process's own socket: it runs
	}
	if err := private(s.place.dir); err != nil { // again: it is checked on every use
		return nil, err
	}
	if conn, err := s.connectTo(); err == nil {
		return conn, nil
	}
	lock, err := os.OpenFile(s.place.lock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("the shared process's lock %s: %w", s.place.lock, err)
	}
	defer lock.Close() // and its lock with it
	if err := lockFile(lock); err != nil {
		return nil, fmt.Errorf("the shared process's lock %s: %w", s.place.lock, err)
	}
	if conn, err := s.connectTo(); err == nil {
		return conn, nil // another session started it meanwhile
	}
	if err := s.startShared(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := s.connectTo()
		if err == nil {
			return conn, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the shared process did not open its socket %s within 10s (its log: %s): %v", s.place.socket, s.place.log, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// connectTo connects to the socket, and checks that the shared process is this user's.
func (s *Session) connectTo() (net.Conn, error) {
	conn, err := net.DialTimeout("unix", s.place.socket, 5*time.Second)
	if err != nil {
		return nil, err
	}
	if err := sameUser(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("the shared process at %s: %w", s.place.socket, err)
	}
	return conn, nil
}

// maxLog is the size past which the shared process's log is begun anew when one starts.
const maxLog = 1 << 20

// DaemonArg, as the first argument, makes the program run as the shared process (RunDaemon).
const DaemonArg = "__shared"

// startShared starts the shared process: the program run with DaemonArg, detached from the
// session (a session and process group of its own), its output in the place's log.
func (s *Session) startShared() error {
	// Appended to, each line with its time: a shared process that is still ending (stopped,
	// or its last session gone) may write its last lines after the next one has started. It
	// is begun anew once it passes maxLog.
	log, err := os.OpenFile(s.place.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("the shared process's log %s: %w", s.place.log, err)
	}
	defer log.Close()
	if info, err := log.Stat(); err == nil && info.Size() > maxLog {
		_ = log.Truncate(0)
	}
	cmd := exec.Command(s.opts.Executable, DaemonArg, s.place.socket, s.opts.Linger.String())
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = "/"
	cmd.SysProcAttr = detached()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the shared process: %w", err)
	}
	go func() { _ = cmd.Wait() }() // reaped when it ends before this session
	return nil
}

// Status asks the shared process of this build what it runs; ok is false when none runs.
func (s *Session) Status() (st Status, ok bool, err error) {
	conn, err := s.connectTo()
	if err != nil {
		return st, false, nil
	}
	defer conn.Close()
	line, _ := json.Marshal(hello{Protocol: protocol, Kind: kindStatus})
	if _, err := conn.Write(append(line, '\n')); err != nil {
		return st, false, err
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	data, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		return st, false, err
	}
	return st, true, json.Unmarshal(data, &st)
}

// StopWait bounds the wait of StopAll for the shared process to exit, once it has said
// what it stops: its servers are given the grace of a shutdown each, together.
const StopWait = 30 * time.Second

// StopAll stops every shared process of the user's place, this build's and those of the
// other builds beside it (a session of an older copy of the program, after an update): each
// stops every server it runs and exits. It returns what each ran, and waits until every server
// has ended (at most StopWait each). Sessions still attached go on as after a crash of the
// shared process: their calls in flight fail, and their servers start again.
func (s *Session) StopAll() ([]Status, error) {
	if err := private(s.place.dir); err != nil {
		return nil, err
	}
	sockets, err := filepath.Glob(filepath.Join(s.place.dir, "shared-*.sock"))
	if err != nil {
		return nil, err
	}
	var stopped []Status
	var errs []error
	for _, socket := range sockets {
		st, ok, err := stopAt(socket)
		if ok {
			stopped = append(stopped, st)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return stopped, errors.Join(errs...)
}

// stopAt stops the shared process on socket; ok is false when none answers there (a socket
// left by a process that was killed).
func stopAt(socket string) (st Status, ok bool, err error) {
	conn, err := net.DialTimeout("unix", socket, 5*time.Second)
	if err != nil {
		return st, false, nil
	}
	defer conn.Close()
	if err := sameUser(conn); err != nil {
		return st, false, fmt.Errorf("the shared process at %s: %w", socket, err)
	}
	line, _ := json.Marshal(hello{Protocol: protocol, Kind: kindStop})
	if _, err := conn.Write(append(line, '\n')); err != nil {
		return st, false, fmt.Errorf("the shared process %s: %w", socket, err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	data, err := r.ReadBytes('\n')
	if err == io.EOF && len(data) == 0 {
		return st, false, fmt.Errorf("the shared process at %s is of an older build, which cannot be stopped by a command: it ends after its last session and the linger", socket)
	}
	if err == nil {
		err = json.Unmarshal(data, &st)
	}
	if err != nil {
		return st, false, fmt.Errorf("the shared process %s did not answer the stop: %w", socket, err)
	}
	// It closes the connection once its servers have ended.
	_ = conn.SetReadDeadline(time.Now().Add(StopWait))
	if _, err := io.Copy(io.Discard, r); err != nil {
		return st, true, fmt.Errorf("the shared process %d did not stop its servers within %v: %w", st.PID, StopWait, err)
	}
	return st, true, nil
}

// Attachment is a server of the session: its process is the shared process's. It is an
// aggregator.Process.
type Attachment struct {
	conn   net.Conn
	out    *controlReader
	pid    int
	login  string
	stderr io.Writer
	prefix string

	mu     sync.Mutex
	desc   string
	tail   []string
	exited chan struct{}
	once   sync.Once
}

// PID is the process's ID (in the shared process's namespace, as /proc shows it).
func (a *Attachment) PID() int { return a.pid }

// Pipes are the server's messages, both ways.
func (a *Attachment) Pipes() (io.ReadCloser, io.WriteCloser) { return a.out, a.conn }

// Exited is closed once the process has exited, or the shared process ended.
func (a *Attachment) Exited() <-chan struct{} { return a.exited }

// ExitDescription says how it ended.
func (a *Attachment) ExitDescription() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.desc
}

// Tail is its last stderr lines.
func (a *Attachment) Tail() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.tail)
}

// LoginShellPath is the login shell's PATH when its command was found there.
func (a *Attachment) LoginShellPath() string { return a.login }

// Stop ends the session's use of the process: the shared process keeps it for its other
// sessions, or for the linger.
func (a *Attachment) Stop(time.Duration) {
	a.conn.Close()
	a.ended()
}

// Kill asks the shared process to stop the process for every session (its health probes
// failed: it is hung for all), and ends the session's use of it.
func (a *Attachment) Kill() {
	// Ended first: the process's exit, which the shared process may say before the
	// connection is closed, is this session's doing.
	a.ended()
	line, _ := json.Marshal(control{Control: "kill"})
	_, _ = a.conn.Write(append(line, '\n'))
	a.Stop(0)
}

// control takes a control line of the shared process's.
func (a *Attachment) control(c control) {
	switch c.Control {
	case "stderr":
		a.mu.Lock()
		a.tail = append(a.tail, c.Line)
		if len(a.tail) > child.TailLines {
			a.tail = a.tail[1:]
		}
		a.mu.Unlock()
		_, _ = io.WriteString(a.stderr, a.prefix+c.Line+"\n")
	case "exit":
		a.exit(c.Description)
	}
}

// ended notes the end of the attachment without an exit of the process's: the shared process
// ended, or the session stopped using it.
func (a *Attachment) ended() { a.exit("ended with the shared process that ran it") }

func (a *Attachment) exit(desc string) {
	a.once.Do(func() {
		a.mu.Lock()
		a.desc = desc
		a.mu.Unlock()
		close(a.exited)
	})
}

// controlReader is an attachment's reader of the server's messages: it takes the control lines
// out (on), in place, without a copy or a goroutine of its own.
type controlReader struct {
	r       *bufio.Reader
	conn    net.Conn
	on      func(control)
	eof     func()
	midLine bool // the last byte given was not a newline
}

func (c *controlReader) Read(p []byte) (int, error) {
	for {
		if !c.midLine {
			// At the start of a line: a control line is taken out whole. Every line is longer
			// than the prefix (the shortest JSON-RPC message is), so waiting for as many bytes
			// waits for nothing that is not coming.
			head, err := c.r.Peek(len(controlPrefix))
			if err == nil && bytes.Equal(head, []byte(controlPrefix)) {
				line, err := c.r.ReadBytes('\n')
				var ctl control
				if json.Unmarshal(line, &ctl) == nil {
					c.on(ctl)
				}
				if err != nil {
					c.eof()
					return 0, err
				}
				continue
			}
		}
		if _, err := c.r.Peek(1); err != nil {
			c.eof()
			return 0, err
		}
		// Up to the next newline only, so that the next line's start is looked at.
		buf, _ := c.r.Peek(c.r.Buffered())
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[:i+1]
		}
		n := copy(p, buf)
		_, _ = c.r.Discard(n)
		if n > 0 { // a read of nothing leaves it where it was
			c.midLine = p[n-1] != '\n'
		}
		return n, nil
	}
}

func (c *controlReader) Close() error {
	c.eof()
	return c.conn.Close()
}
