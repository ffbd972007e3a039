package shared

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// The shared process hosts the sessions of the forwarders (forward.go): each client's session
// runs here, over the shared process's servers, with the client's own environment, directory
// and command line, reading the client's input and writing its output itself. A forwarder makes
// two connections under one session ID: its log ("log": what the session says for its client's
// stderr, then its exit status), then its protocol ("host": the session's context in the hello,
// with the pipe of what comes before the client's input, the client's input and output, the
// pipe whose end says that the session's receipts end, and its journal: pipes_unix.go,
// journal_unix.go, clientout.go). The protocol connection stays open while the session lasts:
// the shared process counts it, and the forwarder sees the shared process's end by its end.

// A Host runs one hosted session until its client's input ends or ctx does, and returns the
// exit status the forwarder exits with. It is the serving command's, given to RunDaemon.
type Host func(ctx context.Context, s *Hosted) int

// Hosted is a session the shared process hosts for a forwarder.
type Hosted struct {
	// Args are the serving flags the client's command line gave; Env its environment; Dir its
	// working directory; PID the forwarder's process.
	Args []string
	Env  []string
	Dir  string
	PID  int
	// Config is the configuration file's absolute path, and Named the file as the client's
	// command line names it: the session's messages name it so, as unshared.
	Config, Named string
	// In and Out are the client's messages, as stdin and stdout are to an unshared session
	// (Out is the client's output itself, with the receipts beside it: clientOut); Stderr goes
	// to the forwarder's stderr.
	In     io.Reader
	Out    io.Writer
	Stderr io.Writer
	// Reloads receives a signal each time the forwarder is asked to reload (SIGHUP), as an
	// unshared session's signal channel does.
	Reloads <-chan os.Signal

	d     *daemon
	id    string
	space string // the session's ID space (space)
}

// Session is the hosted session's link to the shared process's servers, whose Start is the
// session's aggregator.Starter: it attaches each server to a process that it may share or
// that is started for it (attachment.go). A server without a "cwd" runs in the session's
// directory; log hears (at debug) why a server did not share the process of another
// session's; maxMessage is the session's limit on one message (--max-message-size), which it
// holds its servers' messages to (the processes' readers read with the largest of their
// sessions').
func (s *Hosted) Session(log *slog.Logger, maxMessage int) *Session {
	return &Session{opts: Options{Dir: s.Dir, Linger: s.d.linger, Log: log, MaxMessageSize: maxMessage}, place: place{socket: s.d.socket}, id: s.id, d: s.d, space: s.space}
}

// space gives a hosted session the ID space of its requests to the servers
// (aggregator.Options.IDSpace): "agg-N-", N counting the sessions of the shared process. The
// sessions' requests then reach a server process they share as they wrote them, and what the
// server says of a request (its answer, its progress) goes back to the session of its space
// (mux.go).
func (d *daemon) space() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.spaces++
	return "agg-" + strconv.FormatUint(d.spaces, 10) + "-"
}

// hostedConns are what the shared process ends of a hosted session when it stops: its reading of
// the client's input, and its output to the client (with the receipts, whose end the forwarder
// waits for).
type hostedConns struct {
	in      *journalReader
	out     *clientOut
	stopped bool // by closeHosted: the session sends no exit status
}

// logLine is a line of a hosted session's log connection: from the shared process, a write of
// the session's stderr, a call to take the journal (Drain: its input passed journalDrainAt, or
// its receipts receiptsDrainAt; with Wait, a ring is full and the session waits for the
// forwarder to say it took it) or, last, its exit
// status; from the forwarder, a reload (it had SIGHUP), or that it took the journal (Drained).
type logLine struct {
	Stderr  string `json:"stderr,omitempty"`
	Drain   bool   `json:"drain,omitempty"`
	Wait    bool   `json:"wait,omitempty"`
	Exit    *int   `json:"exit,omitempty"`
	Reload  bool   `json:"reload,omitempty"`
	Drained bool   `json:"drained,omitempty"`
}

// logWriter writes what a hosted session says to its log connection, a line each.
type logWriter struct {
	mu   sync.Mutex
	conn net.Conn
}

func (w *logWriter) Write(p []byte) (int, error) {
	line, _ := json.Marshal(logLine{Stderr: string(p)})
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.conn.Write(append(line, '\n')); err != nil {
		return 0, err
	}
	return len(p), nil
}

// drain asks the forwarder to take the journal (the input and the receipts); with wait, to say
// when it did.
func (w *logWriter) drain(wait bool) {
	line, _ := json.Marshal(logLine{Drain: true, Wait: wait})
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.conn.Write(append(line, '\n'))
}

func (w *logWriter) exit(code int) {
	line, _ := json.Marshal(logLine{Exit: &code})
	w.mu.Lock()
	defer w.mu.Unlock()
	_, _ = w.conn.Write(append(line, '\n'))
}

// logConnWait bounds the wait of a session's protocol connection for its log connection,
// which the forwarder makes first.
const logConnWait = 10 * time.Second

// takeLog is the log connection a forwarder made for session id, waiting for it a while.
func (d *daemon) takeLog(id string) (net.Conn, error) {
	deadline := time.Now().Add(logConnWait)
	for {
		d.mu.Lock()
		c, ok := d.logs[id]
		delete(d.logs, id)
		d.mu.Unlock()
		if ok {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, errors.New("no log connection for the session")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// putLog keeps a forwarder's log connection for its protocol connection to take. A log
// connection no protocol connection takes is closed after logConnWait.
func (d *daemon) putLog(conn net.Conn, id string) {
	d.mu.Lock()
	d.logs[id] = conn
	d.mu.Unlock()
	time.AfterFunc(2*logConnWait, func() {
		d.mu.Lock()
		c, ok := d.logs[id]
		if ok && c == conn {
			delete(d.logs, id)
		}
		d.mu.Unlock()
		if ok && c == conn {
			conn.Close()
		}
	})
}

// host runs the session of a forwarder's protocol connection: it counts as a session while
// it runs, and its exit status ends its log.
func (d *daemon) host(conn net.Conn, fds []int, h hello) {
	before, cin, cout, receipts, j, err := receivePipes(fds)
	if err != nil {
		d.log.Warn("refused a session", "pid", h.PID, "error", err)
		conn.Close()
		return
	}
	logConn, err := d.takeLog(h.Session)
	if err == nil && d.hostFunc == nil {
		err = errors.New("no sessions are hosted here")
	}
	if err != nil {
		d.log.Warn("refused a session", "pid", h.PID, "error", err)
		conn.Close()
		closeFiles([]*os.File{before, cin, cout, receipts})
		j.release()
		return
	}
	lw := &logWriter{conn: logConn}
	in, err := newJournalReader(cin, j, lw.drain)
	if err != nil {
		d.log.Warn("refused a session", "pid", h.PID, "error", err)
		conn.Close()
		logConn.Close()
		closeFiles([]*os.File{before, cin, cout, receipts})
		j.release()
		return
	}
	out := newClientOut(cout, receipts, j)
	j.release() // the reader and the output hold it
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		conn.Close()
		logConn.Close()
		before.Close()
		in.stop()
		out.Close()
		return
	}
	d.sessions[conn] = SessionStatus{PID: h.PID, Config: h.Config}
	d.hosted[conn] = hostedConns{out: out, in: in}
	d.mu.Unlock()
	d.log.Info("a session began", "pid", h.PID, "config", h.Config)
	// The session is taken: the forwarder waits for this line before it sends anything, so that
	// a shared process that is ending (killed, its socket not yet closed) is not taken for one
	// that serves.
	ack, _ := json.Marshal(reply{})
	_, _ = conn.Write(append(ack, '\n'))

	out.drainBy(lw.drain)
	reloads := make(chan os.Signal, 1)
	// The session ends with its forwarder: the end of the log connection (the forwarder's, or
	// one it gave up on: connect) ends its context and its reading of the client.
	ctx, cancel := context.WithCancel(d.ctx)
	defer cancel()
	go func() {
		readReloads(logConn, reloads, in, out)
		cancel()
		in.stop()
	}()
	s := &Hosted{Reloads: reloads, Args: h.Args, Env: h.Env, Dir: h.Dir, PID: h.PID, Config: h.Config, Named: h.Named,
		In: io.MultiReader(before, in), Out: out, Stderr: lw, d: d, id: h.Session, space: d.space()}
	code := d.runHost(ctx, s)
	in.stop() // nothing more is read from the client here
	before.Close()
	out.Close() // after all the session wrote: then its status

	d.mu.Lock()
	stopping := d.hosted[conn].stopped // the shared process stopped it: its exit ends the connections (closeHosted)
	delete(d.sessions, conn)
	delete(d.hosted, conn)
	d.mu.Unlock()
	if !stopping {
		lw.exit(code)
		conn.Close()
		logConn.Close()
	}
	d.log.Info("a session ended", "pid", h.PID, "status", code)
	d.maybeExit()
}

// readReloads passes the forwarder's reloads on, and its word that it took the journal, until
// its log connection ends.
func readReloads(logConn net.Conn, reloads chan<- os.Signal, in *journalReader, out *clientOut) {
	r := bufio.NewReaderSize(logConn, 4<<10)
	for {
		line, err := r.ReadBytes('\n')
		var l logLine
		if json.Unmarshal(line, &l) == nil && l.Drained {
			in.roomMade()
			out.roomMade()
		}
		if l.Reload {
			select {
			case reloads <- syscall.SIGHUP:
			default: // one is pending: it reads the file as it is then
			}
		}
		if err != nil {
			return
		}
	}
}

// runHost runs a hosted session; a panic in it ends that session alone (status 1), never the
// shared process or another session.
func (d *daemon) runHost(ctx context.Context, s *Hosted) (code int) {
	defer func() {
		if v := recover(); v != nil {
			d.log.Error("a session failed", "pid", s.PID, "panic", fmt.Sprint(v))
			fmt.Fprintf(s.Stderr, "mcp-simple-aggregator: error: the session failed in the shared process: %v\n", v)
			code = 1
		}
	}()
	return d.hostFunc(ctx, s)
}

// closeHosted stops every hosted session (the shared process is ending): each stops reading its
// client, and its output to the client and its receipts end. Their forwarders see the shared
// process end by the end of their connections, which its exit closes, as a crash's does; not
// before: a read of a client's input under way here ends only when the client writes
// (journalReader), and a new shared process must not read the client meanwhile. What such a
// read takes is in the session's journal, which the forwarder takes to its end then.
// The sessions are ended together, without d.mu: closeReading may wait a while for a forwarder
// to take the receipts (receiptsWait), and no session is hosted once d is closed.
func (d *daemon) closeHosted() {
	d.mu.Lock()
	var ending []hostedConns
	for conn, h := range d.hosted {
		h.stopped = true
		d.hosted[conn] = h
		ending = append(ending, h)
	}
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, h := range ending {
		wg.Go(func() {
			h.in.stop()
			h.out.closeReading() // then the receipts end, which the forwarder takes to their end
		})
	}
	wg.Wait()
}
