//go:build unix

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
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/child"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The shared process end to end, in this test process: RunDaemon on a socket of the test's,
// sessions that attach to it (Session.Start, as the aggregator does), and the fixture server
// as the server they share.

// fixtureBin is the fixture server (internal/fixture/server), built by TestMain.
var fixtureBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shared-fixture")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		fixtureBin = filepath.Join(dir, "fixture-server")
		build := exec.Command("go", "build", "-o", fixtureBin, "../fixture/server")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building the fixture server:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// waitTime bounds every wait of these tests for what must come.
const waitTime = 10 * time.Second

// syncBuffer is a buffer written by one goroutine and read by another.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testDaemon is a shared process run by RunDaemon in this test process.
type testDaemon struct {
	dir, socket string
	linger      time.Duration
	log         *syncBuffer
	done        chan struct{} // closed when RunDaemon has returned, with err
	err         error
}

var sessionSeq atomic.Int64

// startDaemon runs a shared process on a socket of the test's, and waits until it listens. At
// the end of the test it is stopped (as by SIGTERM), if it has not exited.
func startDaemon(t *testing.T, linger time.Duration) *testDaemon {
	t.Helper()
	dir, err := os.MkdirTemp("", "sh") // short: a socket's path is at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d := &testDaemon{dir: dir, socket: filepath.Join(dir, "s.sock"), linger: linger, log: &syncBuffer{}, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(d.done)
		d.err = RunDaemon(ctx, d.socket, linger, slog.New(slog.NewTextHandler(d.log, &slog.HandlerOptions{Level: slog.LevelDebug})), holdSession)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-d.done:
		case <-time.After(waitTime):
			t.Errorf("RunDaemon did not return within %v of its context's end", waitTime)
		}
		if t.Failed() {
			t.Logf("the shared process's log:\n%s", d.log)
		}
	})
	deadline := time.Now().Add(waitTime)
	for {
		conn, err := net.Dial("unix", d.socket)
		if err == nil {
			conn.Close()
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("the shared process does not listen on %s: %v", d.socket, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// hostedSessions are the sessions the tests' shared processes host, by ID.
var hostedSessions sync.Map

// holdSession is the Host of the tests' shared process: a session whose forwarder's
// connection it counts, until the connection ends, and whose Session the test attaches its
// servers with.
func holdSession(_ context.Context, h *Hosted) int {
	hostedSessions.Store(h.id, h)
	defer hostedSessions.Delete(h.id)
	_, _ = io.Copy(io.Discard, h.In)
	return 0
}

// testSession is a session of the shared process: its forwarder's two connections, which
// count it as a session (and Close ends), and the Session its servers attach with.
type testSession struct {
	*Session
	conns []net.Conn
	pipes []*os.File
}

// Close ends the session: its forwarder's connections and pipes (its attachments end with
// their servers' processes).
func (s *testSession) Close() {
	for _, c := range s.conns {
		c.Close()
	}
	closeFiles(s.pipes)
}

// session is a session of the shared process, as a forwarder begins one and the shared
// process hosts it, once the shared process counts it.
func (d *testDaemon) session(t *testing.T, config string) *testSession {
	t.Helper()
	id := fmt.Sprintf("session-%d", sessionSeq.Add(1))
	pl := place{dir: d.dir, socket: d.socket, lock: filepath.Join(d.dir, "s.lock"), log: filepath.Join(d.dir, "s.log")}
	dialer := &Session{opts: Options{Linger: d.linger}, place: pl}
	s := &testSession{}
	t.Cleanup(s.Close)
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	before, receipts, j, theirs, err := sessionPipes(outW, inR, d.dir)
	if err != nil {
		t.Fatal(err)
	}
	before.Close() // nothing comes before the client's messages
	s.pipes = []*os.File{inW, inR, outR, outW}
	t.Cleanup(func() { receipts.Close(); j.release() })
	for _, h := range []hello{{Protocol: protocol, Kind: kindLog, Session: id}, {Protocol: protocol, Kind: kindHost, Session: id, PID: os.Getpid(), Config: config}} {
		var files []*os.File
		if h.Kind == kindHost {
			files = theirs
		}
		conn, _, err := dialer.dial(h, files)
		if err != nil {
			t.Fatalf("a session's %s connection: %v", h.Kind, err)
		}
		s.conns = append(s.conns, conn)
	}
	closeFiles(theirs)
	waitFor(t, "the session hosted", func() bool {
		h, ok := hostedSessions.Load(id)
		if ok {
			s.Session = h.(*Hosted).Session(nil, 0)
		}
		return ok
	})
	waitFor(t, "the session counted", func() bool {
		st, _, _ := s.Status()
		return slices.ContainsFunc(st.Sessions, func(ss SessionStatus) bool { return ss.Config == config })
	})
	return s
}

// exited waits for RunDaemon to return.
func (d *testDaemon) exited(t *testing.T) {
	t.Helper()
	select {
	case <-d.done:
		if d.err != nil {
			t.Errorf("RunDaemon: %v", d.err)
		}
	case <-time.After(waitTime):
		t.Fatalf("the shared process did not exit within %v", waitTime)
	}
}

// fixture is the fixture server's entry, with args.
func fixture(args ...string) child.Spec {
	return child.Spec{Key: "fx", Command: fixtureBin, Args: args, Env: os.Environ()}
}

// testClient is the initialize the sessions' clients send, as the aggregator gives it to Start.
var testClient = json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{"roots":{}},"clientInfo":{"name":"test","version":"1"}}`)

// message is a JSON-RPC message a peer received.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
	line   string
}

// peer is a session's server: an attachment, fed as the aggregator is.
type peer struct {
	t      *testing.T
	name   string
	a      *Attachment
	w      io.Writer
	stderr *syncBuffer
	once   sync.Once

	mu       sync.Mutex
	pending  map[string]pending // by ID on the wire
	tasks    map[string]bool    // the tasks its calls' answers created, as a session's table keeps them
	requests chan message       // the server's requests
	notes    chan message       // notifications, and answers nobody waited for
	done     chan struct{}      // closed at the end of what it reads
}

// attach starts a server of the session s.
func attach(t *testing.T, s *testSession, name string, spec child.Spec) *peer {
	t.Helper()
	stderr := &syncBuffer{}
	a, err := s.Start(spec, testClient, stderr)
	if err != nil {
		t.Fatalf("%s: Start: %v", name, err)
	}
	p := &peer{t: t, name: name, a: a, w: a.Input(), stderr: stderr, pending: map[string]pending{}, tasks: map[string]bool{},
		requests: make(chan message, 100), notes: make(chan message, 100), done: make(chan struct{})}
	a.Feed(p)
	t.Cleanup(func() { a.Stop(0) })
	return p
}

// Message takes a message of the server's, as the aggregator's serverFeed does.
func (p *peer) Message(msg jsonrpc.Message, _ bool) {
	line, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		p.t.Errorf("%s: a message that does not encode: %v", p.name, err)
		return
	}
	var m message
	_ = json.Unmarshal(line, &m)
	m.line = string(line)
	switch {
	case m.Method != "" && m.ID != nil:
		p.requests <- m
	case m.Method != "":
		p.notes <- m
	default:
		p.mu.Lock()
		w, ok := p.pending[string(m.ID)]
		delete(p.pending, string(m.ID))
		p.mu.Unlock()
		if !ok {
			p.notes <- m
			return
		}
		if id := era.TaskID(m.Result); id != "" {
			p.mu.Lock()
			p.tasks[id] = true
			p.mu.Unlock()
		}
		m.ID = json.RawMessage(w.id)
		w.ch <- m
	}
}

func (p *peer) Flush() {}

// OwnsTask says whether an answer to one of its calls created the task, as the aggregator's
// serverFeed asks its table.
func (p *peer) OwnsTask(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tasks[id]
}

func (p *peer) End() { p.once.Do(func() { close(p.done) }) }

// BadLine drops a line of the server's that the multiplexer could not read, as the aggregator
// does once it warned of it.
func (p *peer) BadLine(*stdio.BadLineError) {}

// write writes a line to the server.
func (p *peer) write(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.w, line+"\n"); err != nil {
		p.t.Fatalf("%s: write: %v", p.name, err)
	}
}

// pending is a request a peer sent: its ID as the test gave it, and where its answer goes.
type pending struct {
	id string
	ch chan message
}

// wire is id (JSON) in the session's ID space, as its aggregator would write it.
func (p *peer) wire(id string) string { return strconv.Quote(p.a.space + id) }

// send sends a request under id (JSON), in the session's ID space as its aggregator would
// (the space, then id: "agg-1-7"); its answer comes on the channel, under id.
func (p *peer) send(id, method, params string) <-chan message {
	p.t.Helper()
	ch := make(chan message, 1)
	wire := p.wire(id)
	p.mu.Lock()
	p.pending[wire] = pending{id, ch}
	p.mu.Unlock()
	p.write(`{"jsonrpc":"2.0","id":` + wire + `,"method":"` + method + `","params":` + params + `}`)
	return ch
}

// await waits for what comes on ch.
func (p *peer) await(ch <-chan message, what string) message {
	p.t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(waitTime):
		p.t.Fatalf("%s: no %s within %v", p.name, what, waitTime)
		return message{}
	}
}

// call sends a request and waits for its answer.
func (p *peer) call(id, method, params string) message {
	p.t.Helper()
	return p.await(p.send(id, method, params), "answer to "+method)
}

// tool calls a tool of the fixture, and returns its structuredContent.
func (p *peer) tool(id, name, args string) json.RawMessage {
	p.t.Helper()
	m := p.call(id, "tools/call", `{"name":"`+name+`","arguments":`+args+`}`)
	var res struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil {
		p.t.Fatalf("%s: %s: %s", p.name, name, m.line)
	}
	return res.StructuredContent
}

// initialize initializes the server with protocol version v, as client name.
func (p *peer) initialize(v, name string) message {
	p.t.Helper()
	m := p.call(`"init"`, "initialize", `{"protocolVersion":"`+v+`","capabilities":{"roots":{}},"clientInfo":{"name":"`+name+`","version":"1"}}`)
	if m.Error != nil {
		p.t.Fatalf("%s: initialize: %s", p.name, m.line)
	}
	p.a.Settled(era.Legacy) // as the session's aggregator does once initialize succeeded (tellEra)
	p.write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return m
}

// drain takes what came on ch so far.
func drain(ch chan message) []message {
	var out []message
	for {
		select {
		case m := <-ch:
			out = append(out, m)
		default:
			return out
		}
	}
}

// exited waits for the attachment's end.
func (p *peer) exited() string {
	p.t.Helper()
	select {
	case <-p.a.Exited():
		return p.a.ExitDescription()
	case <-time.After(waitTime):
		p.t.Fatalf("%s: the attachment did not end within %v", p.name, waitTime)
		return ""
	}
}

// alive reports whether the process pid runs.
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// waitFor polls cond until it holds, for waitTime at most.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTime)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, waitTime)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The shared process says what it runs: its sessions (their PIDs and configurations) and its
// servers (keys, command, PID, era, how many sessions use each).
func TestDaemonStatus(t *testing.T) {
	d := startDaemon(t, time.Minute)
	s1, s2 := d.session(t, "/one.json"), d.session(t, "/two.json")
	if st, ok, err := s1.Status(); !ok || err != nil || len(st.Sessions) != 2 || len(st.Servers) != 0 {
		t.Errorf("Status before any server: %+v, %v, %v; want the two sessions and no server", st, ok, err)
	}
	p1 := attach(t, s1, "s1", fixture("-full"))
	spec := fixture("-full")
	spec.Key = "other-key" // the same entry under another name: the same process
	p2 := attach(t, s2, "s2", spec)
	p1.initialize("2025-06-18", "one")
	p2.initialize("2025-06-18", "two")
	if p1.a.PID() != p2.a.PID() || p1.a.PID() <= 0 {
		t.Fatalf("the sessions' processes: %d and %d, want one", p1.a.PID(), p2.a.PID())
	}

	st, ok, err := s2.Status()
	if !ok || err != nil {
		t.Fatalf("Status: %v, %v", ok, err)
	}
	wantSessions := []SessionStatus{{PID: os.Getpid(), Config: "/one.json"}, {PID: os.Getpid(), Config: "/two.json"}}
	slices.SortFunc(st.Sessions, func(a, b SessionStatus) int { return strings.Compare(a.Config, b.Config) })
	if st.PID != os.Getpid() || st.Socket != d.socket || !slices.Equal(st.Sessions, wantSessions) {
		t.Errorf("Status: pid %d socket %s sessions %+v; want %d, %s, %+v", st.PID, st.Socket, st.Sessions, os.Getpid(), d.socket, wantSessions)
	}
	if len(st.Servers) != 1 {
		t.Fatalf("Status: servers %+v, want one", st.Servers)
	}
	srv := st.Servers[0]
	slices.Sort(srv.Keys) // in the order the attachments were added, which the replies may not follow
	if !slices.Equal(srv.Keys, []string{"fx", "other-key"}) || srv.Command != fixtureBin || srv.PID != p1.a.PID() || srv.Era != "legacy" || srv.Sessions != 2 || srv.Lingering {
		t.Errorf("Status: server %+v; want keys fx and other-key, command %s, PID %d, era legacy, 2 sessions, not lingering", srv, fixtureBin, p1.a.PID())
	}

	// A session that ends is no longer counted; its server is used by one session less.
	p1.a.Stop(0)
	s1.Close()
	waitFor(t, "the first session's end in Status", func() bool {
		st, _, _ := s2.Status()
		return len(st.Sessions) == 1 && len(st.Servers) == 1 && st.Servers[0].Sessions == 1
	})
	if st, _, _ := s2.Status(); st.Sessions[0].Config != "/two.json" {
		t.Errorf("the session left is %+v, want the second", st.Sessions[0])
	}
}

// A server no session uses lingers, and a session that comes within the linger uses the same
// process; after the linger it is stopped, and the shared process, with no session and no
// process left, exits.
func TestDaemonLinger(t *testing.T) {
	const linger = time.Second
	d := startDaemon(t, linger)
	s1 := d.session(t, "/one.json")
	p1 := attach(t, s1, "s1", fixture("-full"))
	p1.initialize("2025-06-18", "one")
	pid := p1.a.PID()
	p1.a.Stop(0)
	if desc := p1.exited(); desc != "ended with the shared process that ran it" {
		t.Errorf("the stopped attachment ended as %q", desc)
	}
	waitFor(t, "the server lingering", func() bool {
		st, _, _ := s1.Status()
		return len(st.Servers) == 1 && st.Servers[0].Sessions == 0 && st.Servers[0].Lingering
	})

	// Within the linger, a session gets the same process, which no longer lingers.
	s2 := d.session(t, "/two.json")
	p2 := attach(t, s2, "s2", fixture("-full"))
	if p2.a.PID() != pid {
		t.Errorf("the second session's process is %d, want the lingering %d", p2.a.PID(), pid)
	}
	p2.initialize("2025-06-18", "two") // a raw session's own (a session's core takes the setup's)
	if st, _, _ := s2.Status(); len(st.Servers) != 1 || st.Servers[0].Lingering || st.Servers[0].Sessions != 1 {
		t.Errorf("Status after the session came back: %+v", st.Servers)
	}

	// Every session ends: the process lingers, is stopped, and the shared process exits.
	p2.a.Stop(0)
	stopped := time.Now()
	s1.Close()
	s2.Close()
	d.exited(t)
	if since := time.Since(stopped); since < linger {
		t.Errorf("the shared process exited %v after its last server was left, before the linger (%v)", since, linger)
	}
	waitFor(t, "the server's end", func() bool { return !alive(pid) })
	if _, err := os.Lstat(d.socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket is left: %v", err)
	}
}

// A server that exits is started again for the session that used it; the shared process,
// with no session and no process left, exits at once (without the linger of a server that
// ended).
func TestDaemonServerRestart(t *testing.T) {
	d := startDaemon(t, time.Minute)
	s := d.session(t, "/one.json")
	p := attach(t, s, "s1", fixture("-full"))
	p.initialize("2025-06-18", "one")
	pid := p.a.PID()
	p.send("1", "tools/call", `{"name":"crash","arguments":{}}`)
	p.exited()
	waitFor(t, "the server that exited out of Status", func() bool {
		st, _, _ := s.Status()
		return len(st.Servers) == 0
	})
	p = attach(t, s, "s1 again", fixture("-full"))
	if p.a.PID() == pid {
		t.Errorf("the server was started again as %d, the process that exited", pid)
	}
	p.initialize("2025-06-18", "one")
	if got := p.tool("1", "echo", `{"again":true}`); string(got) != `{"again":true}` {
		t.Errorf("echo: %s", got)
	}
	p.send("2", "tools/call", `{"name":"crash","arguments":{}}`)
	p.exited()
	s.Close()
	d.exited(t)
}

// A server that exits: every session sees its exit, with how it ended and its last stderr
// lines, each under its own key.
func TestDaemonServerExit(t *testing.T) {
	d := startDaemon(t, time.Minute)
	s1, s2 := d.session(t, "/one.json"), d.session(t, "/two.json")
	p1 := attach(t, s1, "s1", fixture("-full"))
	spec := fixture("-full")
	spec.Key = "mine"
	p2 := attach(t, s2, "s2", spec)
	p1.initialize("2025-06-18", "one")
	p2.initialize("2025-06-18", "two")
	p2.send("1", "tools/call", `{"name":"crash","arguments":{}}`)
	for _, p := range []*peer{p1, p2} {
		if desc := p.exited(); desc != "exited with status 3" {
			t.Errorf("%s: the server ended as %q, want exited with status 3", p.name, desc)
		}
		if tail := p.a.Tail(); !slices.Contains(tail, "fixture: crashing in the middle of a call") {
			t.Errorf("%s: the server's last stderr lines %q do not say why it ended", p.name, tail)
		}
	}
	if got := p1.stderr.String(); !strings.Contains(got, "[fx] fixture: crashing in the middle of a call\n") {
		t.Errorf("s1's stderr: %q", got)
	}
	if got := p2.stderr.String(); !strings.Contains(got, "[mine] fixture: crashing in the middle of a call\n") {
		t.Errorf("s2's stderr: %q", got)
	}
	waitFor(t, "the server that exited out of Status", func() bool {
		st, _, _ := s1.Status()
		return len(st.Servers) == 0
	})
}

// A session that finds the server hung (Kill) stops it for every session.
func TestDaemonKill(t *testing.T) {
	d := startDaemon(t, time.Minute)
	s1, s2 := d.session(t, "/one.json"), d.session(t, "/two.json")
	p1 := attach(t, s1, "s1", fixture("-full"))
	p2 := attach(t, s2, "s2", fixture("-full"))
	p1.initialize("2025-06-18", "one")
	p2.initialize("2025-06-18", "two")
	pid := p1.a.PID()
	p1.a.Kill()
	if desc := p1.exited(); desc != "ended with the shared process that ran it" {
		t.Errorf("s1 ended as %q", desc)
	}
	if desc := p2.exited(); desc == "" || desc == "ended with the shared process that ran it" {
		t.Errorf("s2 saw the server end as %q, want how it exited", desc)
	}
	waitFor(t, "the server's end", func() bool { return !alive(pid) })
}
