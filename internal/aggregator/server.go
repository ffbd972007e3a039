package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/child"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/mcpschema"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// defaultClientCapabilities are the capabilities of defaultInit.
const defaultClientCapabilities = `{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{},"url":{}}}`

// maxBadLineWarnings is how many non-JSON-RPC lines of a server are reported.
const maxBadLineWarnings = 5

// server is one process of a configured server: the process, its connection, and what it said
// in its handshake. Its key's life (starting, serving, restarting...) is the roster's
// (roster.go); a process is started once and retired once.
type server struct {
	key     string
	command string
	cfg     config.Server // the entry it was started from
	filter  config.Filter // which of its tools are served; guarded by roster.mu
	proc    Process
	conn    *stdio.Conn
	log     *slog.Logger

	// sidePtr is the era it is spoken to in (sides.go): legacy until its probe settles it.
	sidePtr atomic.Pointer[sideBox]
	// From its answer to initialize (or server/discover), set before the server is used.
	protocol     string
	name         string                     // serverInfo.name
	caps         map[string]json.RawMessage // its capabilities, raw
	tasks        json.RawMessage            // its tasks capability; nil when none
	instructions string

	// lists are the server's tools, prompts, resources and resource templates as it sent
	// them, in its order. Guarded by roster.mu.
	lists [numKinds][]json.RawMessage
	// hints are the cache hints of its lists (ttlMs, cacheScope): a modern server's, as it
	// gave them; a legacy server's, the zero hint. Guarded by roster.mu.
	hints [numKinds]era.CacheHint
	// reads counts the re-readings of each list begun (refresh), and read is the count of the
	// one whose list it holds: a re-reading that a later one overtook leaves the list alone.
	// Guarded by roster.mu.
	reads, read [numKinds]uint64
	// verdicts are the MCP schema's verdicts on its lists (withheld.go), cleared with every
	// change of the lists. Guarded by roster.mu.
	verdicts map[verdictKey][]mcpschema.Violation
	// trust is what its lists tell the model, scanned and compared with the lock (trust.go),
	// cleared with every change of the lists like the verdicts. Guarded by roster.mu.
	trust trustState
	// pins is the lock in force with --pinned (pinned.go); nil without.
	pins *pins
	// listed is closed once the first lists are read: a list change announced before waits
	// for it.
	listed chan struct{}

	// logLevel is the rank of the log level a modern client's requests had it set to
	// (lowerLevel); 0 when never set.
	logLevel atomic.Int32
	// lastUse is when the client last sent it a request (Unix nanoseconds): --idle-stop stops
	// it after a while without one.
	lastUse atomic.Int64
	// cachedAt is when the catalog cache's entry it stands for was written: a server that is
	// not running, listed from the cache (lazy.go); zero for a process.
	cachedAt time.Time

	badLines atomic.Int64
	readDone chan struct{} // the reading of its stdout ended
	// own is what the session does on a process of its own (Piped) as the one session of its
	// listen (processlisten.go); a shared process's is its Fed's Sessions.
	own *ProcessSessions

	// Guarded by the in-flight table's lock (table.go): what it takes, how many calls it has
	// in flight (to it, and its requests to the client), and the signal of a drain waiting for
	// none.
	gate     gate
	inFlight int
	idle     chan struct{}

	// procMu guards proc, conn, readDone and own while the process is replaced during its
	// handshake (respawn, probe.go) against a stop.
	procMu     sync.Mutex
	retireOnce sync.Once
	retired    chan struct{} // closed when the roster no longer uses it (retire)
	stopped    chan struct{} // closed once it is stopped
}

// Process is a server's running process: a child of this one (internal/child), which is Piped,
// or one that a shared process runs for several sessions (internal/shared, --share), which is
// Fed.
type Process interface {
	PID() int
	// Exited is closed when it has exited; ExitDescription says how ("exited with status 3").
	Exited() <-chan struct{}
	ExitDescription() string
	// Tail is its last stderr lines.
	Tail() []string
	// LoginShellPath is the login shell's PATH when its command was found there, else "".
	LoginShellPath() string
	// Stop ends it (a shared one: this session's use of it), giving it grace at each step.
	Stop(grace time.Duration)
}

// A Piped process is read and written through its standard output and input: a goroutine of
// the aggregator's reads it (readServer).
type Piped interface {
	Pipes() (stdout io.ReadCloser, stdin io.WriteCloser)
}

// A Fed process hands the aggregator its messages itself, and takes each message the
// aggregator writes as it is written: a server of a shared process, whose one reader reads it
// for every session that uses it and hands each its own (serverFeed). Input is where the
// session's messages for the server but its requests (Request) are written (a
// stdio.InlineWriter); Feed begins the handing over.
type Fed interface {
	Process
	Input() io.WriteCloser
	// Request takes a request for the server as the session makes it (sendToServer), which
	// is not written to Input and read there again: its ID, its method and the message in
	// parts, written to the server at once or, with held, held while that burst lasts
	// (stdio.Conn.SendHeldBy); a write that fails is told to failed.
	Request(held *stdio.Burst, failed stdio.WriteFailure, id, method string, msg [][]byte)
	Feed(f Feed)
	// Era is the era a session's handshake found the process to speak (Settled); ok is false
	// before one did.
	Era() (e era.Era, ok bool)
	// Settled tells the process the era the session's handshake found it to speak: the
	// sessions after it are told it (Era), and the shared process answers a later probe by it.
	Settled(e era.Era)
	// Refuse answers the server's request id with the error errObj, for a session that cannot
	// take it any more: written to the process itself, since the session's connection to it
	// may be closed already.
	Refuse(id jsonrpc.ID, errObj json.RawMessage)
	// Sessions is what the sessions of the process do on it together: a legacy server's
	// initialization, done once, and its log level and subscriptions, merged by the session
	// that writes them (processsetup.go); a modern server's one listen (processlisten.go);
	// the turns of a legacy server's questions (turns.go); and where the process's messages
	// go (processroute.go).
	Sessions() *ProcessSessions
}

// SessionGone is the reason a shared server is given for the cancellation of a request whose
// session stopped using it.
const SessionGone = "the session that asked stopped using the server"

// AskedGone is the answer to a shared server's request whose session stopped using the server
// (or never could take it).
func AskedGone() json.RawMessage {
	return rpcError(jsonrpc.CodeInternalError, nil, "Internal error: the session that was asked stopped using the server; the request came through mcp-simple-aggregator's shared process")
}

// A Feed is the session's side of a Fed process: it takes the server's messages for the
// session, and says what of the server's the session's in-flight table holds that the
// process's reader routes by, so that the reader keeps no second record of it.
type Feed interface {
	stdio.Receiver
	// OwnsTask reports whether the task id of the server's is the session's: a request of the
	// session's created it (table.madeBy).
	OwnsTask(id string) bool
	// BadLine takes a line of the server's that is not a message the reader could read (one
	// too large, or not JSON-RPC), as readServer takes it (serverBadLine).
	BadLine(bad *stdio.BadLineError)
}

// Starter starts the process of a server: spec says what to run, client is the initialize the
// servers are told (nil before the client is known), and its stderr lines go to stderr.
type Starter func(spec child.Spec, client json.RawMessage, stderr io.Writer) (Process, error)

// killer is a Process that can be ended for every user of it (a shared process whose health
// probes failed: it is hung for all its sessions).
type killer interface{ Kill() }

// startChild starts a child of this process.
func startChild(spec child.Spec, _ json.RawMessage, stderr io.Writer) (Process, error) {
	p, err := child.Start(spec, stderr)
	if err != nil {
		return nil, err
	}
	return childProcess{p}, nil
}

// childProcess is a child of this process as a Process.
type childProcess struct{ *child.Process }

func (p childProcess) Pipes() (io.ReadCloser, io.WriteCloser) { return p.Stdout, p.Stdin }

// sideBox holds a serverSide for an atomic pointer: the reader of a server's output looks at it
// while its handshake sets it.
type sideBox struct{ serverSide }

// side is the era s is spoken to in: legacy until its probe settles it.
func (s *server) side() serverSide {
	if b := s.sidePtr.Load(); b != nil {
		return b.serverSide
	}
	return legacyServer{}
}

// setSide makes s be spoken to as side says.
func (s *server) setSide(side serverSide) { s.sidePtr.Store(&sideBox{side}) }

// offers reports whether the server declared the capability name.
func (s *server) offers(name string) bool {
	_, ok := s.caps[name]
	return ok
}

// offersList reports whether the server declared the capability behind list k. Tools are
// read from every server: some serve them without declaring it.
func (s *server) offersList(k kind) bool {
	switch k {
	case kindPrompts:
		return s.offers("prompts")
	case kindResources, kindTemplates:
		return s.offers("resources")
	}
	return true
}

// spawn starts the process of cfg and reads what it writes; its handshake comes later, once
// there is a client to tell it of. client is the initialize the servers are told (nil before
// the client is known).
func (a *Aggregator) spawn(cfg config.Server, client json.RawMessage) (*server, error) {
	s := &server{key: cfg.Key, command: cfg.Command, cfg: cfg, filter: cfg.Tools, pins: a.pins, listed: make(chan struct{}),
		readDone: make(chan struct{}), retired: make(chan struct{}), stopped: make(chan struct{}), log: a.log.With("server", cfg.Key)}
	if err := a.startProcess(s, client); err != nil {
		return nil, err
	}
	return s, nil
}

// startProcess starts the process of s and reads what it writes: at spawn, and once more for
// a process that exited on the server/discover probe (probe.go).
func (a *Aggregator) startProcess(s *server, client json.RawMessage) error {
	cfg := s.cfg
	start := a.opts.Start
	if start == nil {
		start = startChild
	}
	proc, err := start(child.Spec{
		Key:     cfg.Key,
		Command: cfg.Command,
		Args:    cfg.Args,
		Env:     a.childEnv(cfg.Env),
		Dir:     cfg.Dir,
	}, client, a.stderr)
	if err != nil {
		return fmt.Errorf("start %q: %w%s", cfg.Command, err, startHint(err))
	}
	s.proc = proc
	opts := &stdio.Options{MaxMessageSize: a.opts.MaxMessageSize, Burst: &a.sess.toClientBurst, HeldBy: &a.sess.toServers}
	s.log.Debug("started", "pid", proc.PID(), "command", cfg.Command)
	switch p := proc.(type) {
	case Fed:
		// Writes to it never wait (they are taken as they are written), and its Close writes
		// what was sent first (stop).
		fed := *opts
		fed.NeverWait = true
		// What else the session writes to it (answers, notifications) is never held: its
		// requests are held in the process's own connection (Fed.Request), and a write that
		// is not held writes what that holds first, so that the server gets them in order.
		fed.HeldBy = nil
		s.conn = stdio.New(nil, p.Input(), &fed)
		p.Feed(&serverFeed{a: a, s: s})
	case Piped:
		stdout, stdin := p.Pipes()
		conn := stdio.New(stdout, stdin, opts)
		s.conn = conn
		// Its listen is its setup's, as a shared process's is (processlisten.go).
		s.own = NewProcessSessions(func(parts ...[]byte) { conn.Send(nil, parts...) }, s.log)
		s.own.Join(s)
		go a.readServer(s)
	default:
		return fmt.Errorf("start %q: a process that is neither piped nor fed", cfg.Command)
	}
	return nil
}

// routedCapabilities are the client's capabilities that the servers are told of, as the
// client declared them: those whose requests the aggregator routes to the client (sampling,
// elicitation, roots), experimental ones, and extensions (MCP Apps' io.modelcontextprotocol/ui:
// the servers' tool _meta and ui:// resources pass unchanged). Not tasks: task-augmented
// requests to the client are not routed.
var routedCapabilities = []string{"roots", "sampling", "elicitation", "experimental", "extensions"}

// serverInit is the initialize the servers get: the protocol version of the session with the
// client, the client's clientInfo as it sent it, and the capabilities it declared that the
// aggregator routes. A nil info (no client: check) stands for the aggregator itself.
func (a *Aggregator) serverInit(version string, caps map[string]json.RawMessage, info json.RawMessage) json.RawMessage {
	capsJSON := []byte("{")
	for _, name := range routedCapabilities {
		v, ok := caps[name]
		if !ok || string(v) == "null" {
			continue
		}
		if len(capsJSON) > 1 {
			capsJSON = append(capsJSON, ',')
		}
		capsJSON = append(append(append(capsJSON, '"'), name...), `":`...)
		capsJSON = append(capsJSON, v...)
	}
	capsJSON = append(capsJSON, '}')
	if len(info) == 0 || info[0] != '{' {
		info = a.selfInfo()
	}
	params, _ := json.Marshal(struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ClientInfo      json.RawMessage `json:"clientInfo"`
	}{version, capsJSON, info})
	return params
}

// defaultInit is what the servers are told when there is no client (check): the latest
// protocol, and a client that does sampling, elicitation (form and URL) and roots, so that
// servers that offer more to such clients do.
func (a *Aggregator) defaultInit() json.RawMessage {
	var caps map[string]json.RawMessage
	_ = json.Unmarshal([]byte(defaultClientCapabilities), &caps)
	return a.serverInit(era.Latest(era.Legacy), caps, nil)
}

// handshake settles the era of s (probe.go) and completes its start in it, and reads its
// lists; on failure it names the request that failed.
func (a *Aggregator) handshake(ctx context.Context, s *server, params json.RawMessage) (stage string, err error) {
	if stage, err := a.settleEra(ctx, s, params); err != nil {
		return stage, err
	}
	lists, hints, stage, err := a.readLists(ctx, s, allKinds)
	if err != nil {
		return stage, err
	}
	a.roster.mu.Lock()
	s.lists, s.hints, s.verdicts, s.trust = lists, hints, nil, trustState{}
	a.roster.mu.Unlock()
	return "", nil
}

// selfInfo is the aggregator's clientInfo and serverInfo.
func (a *Aggregator) selfInfo() json.RawMessage {
	b, _ := json.Marshal(map[string]string{"name": "mcp-simple-aggregator", "version": a.opts.Version})
	return b
}

// allKinds asks readLists for every list.
var allKinds = []kind{kindTools, kindPrompts, kindResources, kindTemplates}

// readLists reads the lists ks of s (those it offers), each in full. A list the server does
// not implement (Method not found) is empty. On failure it names the request that failed.
func (a *Aggregator) readLists(ctx context.Context, s *server, ks []kind) (lists [numKinds][]json.RawMessage, hints [numKinds]era.CacheHint, stage string, err error) {
	for _, k := range ks {
		if !s.offersList(k) {
			continue
		}
		items, err := a.listAll(ctx, s, kinds[k].method, kinds[k].field, &hints[k])
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) && rpcErr.Code == jsonrpc.CodeMethodNotFound {
			continue
		}
		if err != nil {
			return lists, hints, kinds[k].method, err
		}
		lists[k] = items
	}
	return lists, hints, "", nil
}

// listAll reads every page of a list of s (tools, prompts, resources, templates or tasks), as
// raw items, following its cursors. A cursor given twice is an error: the list would never
// end. The cache hints of the pages, merged, go to hint (nil: not wanted); a legacy server's
// pages have none, which is the zero hint.
func (a *Aggregator) listAll(ctx context.Context, s *server, method, field string, hint *era.CacheHint) ([]json.RawMessage, error) {
	var items []json.RawMessage
	seen := map[string]bool{}
	cursor := ""
	for {
		params := json.RawMessage(`{}`)
		if cursor != "" {
			params = json.RawMessage(`{"cursor":` + strconv.Quote(cursor) + `}`)
		}
		result, err := a.call(ctx, s, method, "reading "+method, params)
		if err != nil {
			return nil, err
		}
		var page []json.RawMessage
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(result, &raw); err != nil {
			return nil, fmt.Errorf("%s result: %w", method, err)
		}
		if v, ok := raw[field]; ok && string(v) != "null" {
			if err := json.Unmarshal(v, &page); err != nil {
				return nil, fmt.Errorf("%s result: %q: %w", method, field, err)
			}
		}
		items = append(items, page...)
		if hint != nil {
			if h := era.PageHint(raw); cursor == "" {
				*hint = h
			} else {
				*hint = hint.Merge(h)
			}
		}
		var next string
		if v, ok := raw["nextCursor"]; ok {
			_ = json.Unmarshal(v, &next) // null or not a string: no next page
		}
		if next == "" {
			return items, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("%s returned the cursor %q twice", method, next)
		}
		seen[next] = true
		cursor = next
	}
}

// describe turns an error from talking to a starting server into one that says what happened
// to it: it exited, timed out or broke the protocol; with its last stderr lines.
func (s *server) describe(stage string, err error) error {
	wait := 50 * time.Millisecond
	if errors.Is(err, errClosed) || errors.Is(err, context.DeadlineExceeded) {
		wait = 500 * time.Millisecond // a closed connection usually means it is exiting
	}
	var what string
	select {
	case <-s.proc.Exited():
		what = s.proc.ExitDescription() + " during " + stage
	case <-time.After(wait):
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			what = "did not finish " + stage + " within the start-up timeout (--startup-timeout)"
		case errors.Is(err, errClosed):
			what = "closed its standard output during " + stage
		default:
			what = stage + " failed: " + err.Error()
		}
	}
	return fmt.Errorf("command %q %s%s", s.command, what, tailText(s.proc.Tail()))
}

func tailText(lines []string) string {
	if len(lines) == 0 {
		return " (it wrote nothing on stderr)"
	}
	return "; its last stderr lines:\n    " + strings.Join(lines, "\n    ")
}

// watch waits until the server exits or closes its stdout, then reports it crashed.
func (a *Aggregator) watch(s *server) {
	select {
	case <-s.proc.Exited():
		a.crashed(s, s.proc.ExitDescription())
	case <-s.readDone:
		select {
		case <-s.proc.Exited():
			a.crashed(s, s.proc.ExitDescription())
		case <-time.After(100 * time.Millisecond):
			a.crashed(s, "closed its standard output")
		}
	case <-s.retired:
	}
}

// pingLoop is the health probe: it pings s (a modern s: server/discover, serverSide.health)
// every PingInterval; when PingFailures pings in a row go unanswered (each is given the
// interval), s counts as crashed: it is stopped, and restarted (crashed).
func (a *Aggregator) pingLoop(s *server) {
	interval := a.opts.PingInterval
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	failures := 0
	for {
		select {
		case <-s.retired:
			return
		case <-ticker.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), interval)
		method, doing := s.side().health()
		_, err := a.call(ctx, s, method, doing, nil)
		cancel()
		if err == nil {
			failures = 0
			continue
		}
		failures++
		s.log.Debug("ping failed", "failures", failures, "error", err)
		if failures >= a.opts.PingFailures {
			if k, ok := s.proc.(killer); ok {
				k.Kill() // hung for every session that shares it
			}
			a.crashed(s, fmt.Sprintf("did not answer %d pings in a row (--ping-interval %v, --ping-failures %d)",
				failures, interval, a.opts.PingFailures))
			return
		}
	}
}

// failureLog is where a failure of a request of the aggregator's own to s is logged: a warning
// while s is in use, a debug line once the roster let go of it (a reload, the end), when
// every such request fails.
func (s *server) failureLog() func(string, ...any) {
	select {
	case <-s.retired:
		return s.log.Debug
	default:
		return s.log.Warn
	}
}

// stop ends the process (see child.Process.Stop), then its connection; a shared process's
// connection first, so that what the session sent it (endCalls' cancellations) is written
// before the session stops using it.
func (s *server) stop(grace time.Duration) {
	s.procMu.Lock() // a process started again after the probe is the one stopped (respawn)
	proc, conn, readDone := s.proc, s.conn, s.readDone
	s.procMu.Unlock()
	if _, fed := proc.(Fed); fed {
		conn.Close()
		proc.Stop(grace)
	} else {
		proc.Stop(grace)
		conn.Close()
	}
	<-readDone
	close(s.stopped) // stop is called once, by retire
}

// fed is the process of s when it is a shared process's (Fed); nil for a child of this
// process.
func (s *server) fed() Fed {
	s.procMu.Lock()
	defer s.procMu.Unlock()
	f, _ := s.proc.(Fed)
	return f
}

// goesOn reports whether the process of s goes on for other sessions once this one stops
// using it: a shared process's that has not ended.
func (s *server) goesOn() bool {
	f := s.fed()
	if f == nil {
		return false
	}
	select {
	case <-f.Exited():
		return false
	default:
		return true
	}
}

// refuse answers a request of s with the error errObj: a shared process's through the process
// itself (Fed.Refuse), as the session's connection to it may be closed already (it stops using
// it); a child's on the connection.
func (s *server) refuse(id jsonrpc.ID, errObj json.RawMessage) {
	if f := s.fed(); f != nil {
		f.Refuse(id, errObj)
		return
	}
	s.conn.Send(nil, stdio.Response(stdio.IDJSON(id), nil, errObj)...)
}

// startHint adds what to do to an error from starting a program.
func startHint(err error) string {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
		hint := "; check the command name, or give its full path"
		if runtime.GOOS == "darwin" {
			hint += " (desktop apps start servers with a short PATH such as /usr/bin:/bin)"
		}
		return hint
	}
	return ""
}

// excerpt shortens a line for a log message.
func excerpt(line []byte) string {
	if len(line) > 200 {
		return string(line[:200]) + "..."
	}
	return string(line)
}
