package shared

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/child"
)

// The shared process: it listens on the socket of its build, counts the sessions connected to
// it, runs the server processes they attach to (mux.go), and exits once it has no session and
// no process (a process no session uses is kept for the linger first).

// daemon is the shared process.
type daemon struct {
	socket string
	linger time.Duration
	log    *slog.Logger
	ln     net.Listener

	mu       sync.Mutex
	sessions map[net.Conn]SessionStatus
	procs    []*proc
	closed   bool
	done     chan struct{}
	stop     chan struct{} // closed by the first stop request
	stopOnce sync.Once
	stoppers []net.Conn // the stop requests' connections, closed once every server has ended

	hostFunc Host                     // runs a forwarder's session (host.go)
	ctx      context.Context          // the hosted sessions'
	logs     map[string]net.Conn      // forwarders' log connections, by session, until taken
	hosted   map[net.Conn]hostedConns // the hosted sessions, by protocol connection
	spaces   uint64                   // the ID spaces given to hosted sessions so far (space)
}

// startGrace is how long a shared process waits for its first session.
const startGrace = 30 * time.Second

// RunDaemon runs the shared process on socket until it has no session and no server process,
// or until ctx ends (SIGTERM: every server is stopped); linger is how long a server no session
// uses is kept, and host runs the sessions of forwarders. When another shared process answers
// on socket already, it returns at once.
func RunDaemon(ctx context.Context, socket string, linger time.Duration, log *slog.Logger, host Host) error {
	leaveTerminal() // before any server starts: they inherit it
	if conn, err := net.DialTimeout("unix", socket, time.Second); err == nil {
		conn.Close()
		return nil // one runs: sessions use it
	}
	_ = os.Remove(socket) // a socket left by a shared process that was killed
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", socket, err)
	}
	if err := os.Chmod(socket, 0o600); err != nil {
		ln.Close()
		return err
	}
	hostCtx, endHosted := context.WithCancel(context.WithoutCancel(ctx))
	defer endHosted()
	d := &daemon{socket: socket, linger: linger, log: log, ln: ln, sessions: map[net.Conn]SessionStatus{}, done: make(chan struct{}), stop: make(chan struct{}),
		hostFunc: host, ctx: hostCtx, logs: map[string]net.Conn{}, hosted: map[net.Conn]hostedConns{}}
	time.AfterFunc(startGrace, d.maybeExit)
	go d.accept()
	select {
	case <-d.done:
		log.Info("no session and no server left: exiting")
	case <-ctx.Done():
		log.Info("stopping every server and exiting", "reason", context.Cause(ctx))
		d.shutdown()
	case <-d.stop:
		log.Info("stopping every server and exiting", "reason", "the stop command")
		d.shutdown()
		d.mu.Lock()
		for _, c := range d.stoppers {
			c.Close()
		}
		d.mu.Unlock()
	}
	return nil
}

// shutdown stops every server process (as a session's shutdown stops its servers: stdin
// closed, then SIGTERM, then SIGKILL to its process group), and the shared process with them:
// sessions see their servers end, as after a crash of the shared process, and start another.
// It closes first, under one lock, so that no session is hosted after the hosted ones are
// ended: a forwarder that reconnects at once finds no socket, and starts another.
func (d *daemon) shutdown() {
	d.mu.Lock()
	d.closed = true
	d.ln.Close()
	_ = os.Remove(d.socket)
	procs := slices.Clone(d.procs)
	d.mu.Unlock()
	d.closeHosted()
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { p.child.Stop(2 * time.Second) })
	}
	wg.Wait()
}

func (d *daemon) accept() {
	for {
		conn, err := d.ln.Accept()
		if err != nil {
			return
		}
		go d.serve(conn)
	}
}

// serve takes one connection: a session's, an attachment, or a status query.
func (d *daemon) serve(conn net.Conn) {
	if err := sameUser(conn); err != nil {
		d.log.Warn("refused a connection", "error", err)
		line, _ := json.Marshal(reply{Error: "refused: " + err.Error()})
		_, _ = conn.Write(append(line, '\n'))
		conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, rest, fds, err := readHello(conn)
	_ = conn.SetReadDeadline(time.Time{})
	var h hello
	if err == nil {
		err = json.Unmarshal(line, &h)
	}
	if err == nil && h.Kind != kindHost && len(fds) > 0 {
		closeFDs(fds)
		fds = nil
		err = errors.New("descriptors with a hello that takes none")
	}
	if len(rest) > 0 {
		conn = &prefixed{Conn: conn, r: io.MultiReader(bytes.NewReader(rest), conn)}
	}
	if err != nil || h.Protocol != protocol {
		closeFDs(fds)
		line, _ := json.Marshal(reply{Error: fmt.Sprintf("not a session of this build (%s)", protocol)})
		_, _ = conn.Write(append(line, '\n'))
		conn.Close()
		return
	}
	switch h.Kind {
	case kindLog:
		d.putLog(conn, h.Session)
	case kindHost:
		d.host(conn, fds, h)
	case kindStatus:
		line, _ := json.Marshal(d.status())
		_, _ = conn.Write(append(line, '\n'))
		conn.Close()
	case kindStop:
		// What it stops, then the stop itself; the connection stays open until every server
		// has ended, which is how the stop command knows.
		line, _ := json.Marshal(d.status())
		_, _ = conn.Write(append(line, '\n'))
		d.mu.Lock()
		d.stoppers = append(d.stoppers, conn)
		d.mu.Unlock()
		d.stopOnce.Do(func() { close(d.stop) })
	default:
		conn.Close()
	}
}

// prefixed is a connection whose first bytes were read with its hello.
type prefixed struct {
	net.Conn
	r io.Reader
}

func (c *prefixed) Read(p []byte) (int, error) { return c.r.Read(p) }

// find is a running process the attachment w may share: one of the same identity that speaks
// the modern era (each request carries its own client), or that was started for the same
// client (a legacy server is initialized once), that a session still uses or that lingers,
// and that w's session does not use already (two keys of one configuration with the same entry
// are two servers, as they are unshared). Callers hold d.mu.
func (d *daemon) find(w want) *proc {
	for _, p := range d.procs {
		if p.identity != w.identity || p.ending() || p.usedBy(w.session) {
			continue
		}
		if p.modern() || bytes.Equal(p.client, w.client) {
			return p
		}
	}
	return nil
}

// apartFrom says what kept the new process p of w from the others of the same entry (the same
// command and arguments) that run: what their servers see differently, or for a legacy
// server, which is initialized once, its client. Callers hold d.mu.
func (d *daemon) apartFrom(w want, p *proc) string {
	for _, q := range d.procs {
		if q == p || q.ending() || q.seen.Command != w.seen.Command || !slices.Equal(q.seen.Args, w.seen.Args) {
			continue
		}
		if why := apart(q.seen, w.seen); why != "" {
			return why
		}
		if q.identity == w.identity && q.usedBy(w.session) {
			return "" // two keys of one configuration with the same entry are two servers
		}
		if q.identity == w.identity && !bytes.Equal(q.client, w.client) {
			return "its client differs, and a server of the legacy era is initialized for one client"
		}
	}
	return ""
}

// undecided is a running process of w's identity, started for another client, whose era is
// not known yet. Callers hold d.mu.
func (d *daemon) undecided(w want) *proc {
	for _, p := range d.procs {
		if p.identity != w.identity || p.ending() || p.usedBy(w.session) {
			continue
		}
		select {
		case <-p.decided:
		default:
			return p
		}
	}
	return nil
}

// decideWait bounds the wait for a process's era (undecided): the default start-up timeout.
const decideWait = 30 * time.Second

// spawn starts the process of w. Callers hold d.mu.
func (d *daemon) spawn(w want) (*proc, error) {
	p := newProc(d, w)
	c, err := child.Start(child.Spec{Key: w.key, Command: w.spec.Command, Args: w.spec.Args, Env: w.spec.Env, Dir: w.spec.Dir}, stderrOf(p, w.key))
	if err != nil {
		return nil, err
	}
	p.start(c, w.maxMessage)
	d.procs = append(d.procs, p)
	return p, nil
}

// gone takes an ended process out of the pool.
func (d *daemon) gone(p *proc) {
	d.mu.Lock()
	d.procs = slices.DeleteFunc(d.procs, func(q *proc) bool { return q == p })
	d.mu.Unlock()
	d.maybeExit()
}

// maybeExit ends the shared process when it has no session and no process.
func (d *daemon) maybeExit() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || len(d.sessions) > 0 || len(d.procs) > 0 {
		return
	}
	d.closed = true
	d.ln.Close()
	_ = os.Remove(d.socket)
	close(d.done)
}

// status is what the shared process runs.
func (d *daemon) status() Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	st := Status{PID: os.Getpid(), Socket: d.socket}
	for _, s := range d.sessions {
		st.Sessions = append(st.Sessions, s)
	}
	slices.SortFunc(st.Sessions, func(a, b SessionStatus) int { return a.PID - b.PID })
	for _, p := range d.procs {
		st.Servers = append(st.Servers, p.status())
	}
	return st
}
