package shared

import (
	"bufio"
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
	"time"
)

// A session's link to the shared process: found where the place says, or started.

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
	// MaxMessageSize limits one message of a server's (--max-message-size; 0 means
	// stdio.DefaultMaxMessageSize): the session holds a server's messages to it, and the
	// process's reader reads with the largest of the sessions that have used the process.
	MaxMessageSize int
}

// Session is one session's link to the shared process of its build: a forwarder's, or that of
// a session the shared process hosts (Hosted.Session), whose servers it attaches (Start).
type Session struct {
	opts  Options
	place place
	id    string
	d     *daemon // the shared process, for a hosted session
	space string  // a hosted session's ID space (daemon.space)
}

// IDSpace is the ID space of a hosted session's requests to its servers: what its
// aggregator's Options.IDSpace is to be. The multiplexer refuses a request outside it.
func (s *Session) IDSpace() string { return s.space }

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

// dial connects to the shared process, starting it when none answers, and sends h, with
// files when there are any.
func (s *Session) dial(h hello, files []*os.File) (net.Conn, *bufio.Reader, error) {
	conn, err := s.connect()
	if err != nil {
		return nil, nil, err
	}
	line, _ := json.Marshal(h)
	line = append(line, '\n')
	if len(files) > 0 {
		err = sendHello(conn, line, files)
	} else {
		_, err = conn.Write(line)
	}
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("the shared process %s: %w", s.place.socket, err)
	}
	return conn, bufio.NewReaderSize(conn, 64<<10), nil
}

// connect connects to the shared process of this build, and starts it when none runs: one
// session at a time (the place's lock), so that two sessions starting together start one.
func (s *Session) connect() (net.Conn, error) {
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
// client (a process group of its own: detached), its output in the place's log.
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
