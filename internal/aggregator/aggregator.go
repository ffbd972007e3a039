// Package aggregator is the routing core: it starts the configured servers, keeps the catalog
// of what they offer under prefixed names, and serves it to one MCP client, routing each
// request to the server that owns it and carrying arguments and results through unchanged.
//
// The design, with the way of one call through it in both directions, is in docs/design.md.
// Files by role:
//
//	aggregator.go  Start, Serve, Close; the start-up
//	capabilities.go  the capabilities offered: the union of the servers'
//	env.go         the session's environment, the servers' (with their env), the loop check
//	roster.go      the servers by key, each in one state, and its transitions; the catalog
//	               rule and publish, the one way a catalog is made current
//	restart.go     crashed servers restarted with backoff; calls held for a key that comes
//	               back; what the client set up, set up again on a new process
//	reload.go      a reload: the plan per key, then applied, nothing in flight lost
//	fromclient.go  the client's session (type session): its connection, what the client said
//	               and set up; what arrives from it, the dispatcher
//	sdk.go         the go-sdk's part: the client's handshake
//	toclient.go    what goes to the client: answers, notifications, the servers' requests
//	fromserver.go  what arrives from a server: the dispatcher, read from a child's stdout
//	               (readServer) or handed over by a shared process's reader (serverFeed)
//	handlers.go    the client's requests: routed by name, URI or task, fanned out, listed
//	toserver.go    what goes to a server: the one path of every request to one, the client's
//	               and the aggregator's own, into the table; what waits before it is written;
//	               fan-outs
//	unknown.go     why a name or URI reaches no server, and why a key does not serve: the one
//	               answer of every path
//	server.go      one process: spawn, handshake, the pager, health, stop
//	table.go       the in-flight table: every request that crosses the aggregator
//	stages.go      what a call in it waits for (its stage), and the moves between stages
//	queue.go       what waits for the client before it is ready
//	changes.go     list changes of a server, and list_changed notifications
//	instructions.go  the servers' instructions combined for the client, and as resources
//	catalog.go     the catalog: names, URIs, collisions
//	withheld.go    definitions clients would reject: checked (internal/mcpschema), withheld, named
//	pinned.go      --pinned: the lock in force, what differs from it withheld as withheld.go does
//	trust.go       what the definitions tell the model (internal/trust): hidden characters warned of
//	audit.go       --audit-log: calls, definitions and server events recorded (internal/audit)
//	toolsearch.go  --tool-search: the search and call tools, the index of each catalog
//	envelope.go    every JSON-RPC message and error the aggregator writes itself (the lines
//	               are framed by internal/stdio: Response, ParseCancel)
//	check.go       the check command
//	checktrust.go  check's hidden characters and differences from the lock
//	limits.go      the clients' limits: how many tools, which names (Cursor)
//
// The two protocol eras (legacy: initialize, up to 2025-11-25; modern: 2026-07-28). What is
// pure (versions, the envelope, translations, the requestState codec) is internal/era; the
// routing files ask a peer's side, never its era:
//
//	sides.go         the two interfaces: clientSide (a session), serverSide (a process);
//	                 and clientSink, the roster's one way to the session
//	clientlegacy.go  a legacy client
//	clientmodern.go  a modern client: server/discover, its requests, the removed methods
//	streams.go       a modern client's subscriptions/listen streams
//	suspend.go       a legacy server's requests as a modern client's input_required rounds
//	serverlegacy.go  a legacy server: initialize, logging/setLevel, resources/subscribe
//	servermodern.go  a modern server: the envelope, its listen, server/discover as health
//	probe.go         the server/discover probe that settles a server's era
//	processsetup.go  what the sessions of a shared process set up on it together: a legacy
//	                 server's initialization, level and subscriptions
//	processlisten.go a modern server's one listen, for every session of its process
//	turns.go         a shared legacy server's questions: which session's requests go, which wait
//	fulfil.go        a modern server's input_required carried through for a legacy client
//
// What the go-sdk still does: for a legacy client, the handshake (its ServerSession
// negotiates the protocol version, records the client's initialize and answers it through
// initializeMiddleware, which adds what its types cannot carry), ping from the client, and
// the refusal of requests before initialize and of unknown methods. Everything else, in both
// directions, is raw JSON-RPC on internal/stdio: the servers' handshakes too, because the SDK's
// capability types have no "tasks" and would re-encode what passes through.
package aggregator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/audit"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/catalogcache"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/mcpschema"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// Options configure an Aggregator.
type Options struct {
	// Separator goes between a server's key and its tool names.
	Separator string
	// StartupTimeout bounds each child's start: spawn, initialize and listing.
	StartupTimeout time.Duration
	// MaxMessageSize limits one message in each direction; 0 means stdio.DefaultMaxMessageSize.
	MaxMessageSize int
	// PingInterval is how often each child is pinged; 0 turns pings off. A ping not answered
	// within the interval fails.
	PingInterval time.Duration
	// ProbeTimeout bounds a child's answer to the server/discover probe, after which it is
	// spoken to in the legacy era (initialize); 0 means 2 s. Never longer than StartupTimeout.
	ProbeTimeout time.Duration
	// PingFailures is how many failed pings in a row make a child count as crashed.
	PingFailures int
	// ShutdownGrace is how long a child is given at each step of stopping it.
	ShutdownGrace time.Duration
	// MaxRestarts is how many restarts in a row a crashed server is given before it stays
	// down (until a reload); 0 turns restarts off (the command's default is 5).
	MaxRestarts int
	// RestartDelay is the wait before the first restart of a crashed server; it doubles with
	// each try, up to 30 s. 0 means the default, 500 ms.
	RestartDelay time.Duration
	// Version is reported to the client and the children.
	Version string
	// Log receives the aggregator's own records.
	Log *slog.Logger
	// Stderr receives the children's stderr lines, prefixed with their keys.
	Stderr io.Writer
	// CursorEntry is the name of the aggregator's entry in Cursor's configuration, for
	// Check's Cursor column; "" means "aggregator".
	CursorEntry string
	// InputTTL is how long a modern client has to retry a request the aggregator answered
	// with an InputRequiredResult for a legacy server (suspend.go); 0 means 10 minutes.
	InputTTL time.Duration
	// ToolSearch lists the aggregator's search and call tools instead of the catalog's tools
	// (toolsearch.go).
	ToolSearch bool
	// Lazy starts a server whose catalog Cache holds on its first request instead of with
	// the session (lazy.go); Cache must be set.
	Lazy  bool
	Cache *catalogcache.Cache
	// IdleStop stops a server that had no request for this long (lazy.go); 0 never does.
	IdleStop time.Duration
	// Start starts a server's process; nil starts a child of this process (internal/child).
	// Hosted says that the session is one a shared process hosts (--share), over processes
	// it runs for several sessions: no server is started before the client is known (Start
	// is given the initialize the servers are told: a shared process shares a legacy server
	// only among sessions whose clients would send it the same one), and nothing written to
	// the client waits for it to read (the servers' messages are handed over by readers that
	// serve other sessions as well: Fed).
	Start  Starter
	Hosted bool
	// IDSpace starts the IDs (and progress tokens) of the session's requests to its servers
	// ("" is "agg-", and a client's token passes as written): the shared process gives each
	// session it hosts a space of its own, so that the requests of all its sessions reach a
	// server they share as written (table.go).
	IDSpace string
	// Pinned withholds each definition that differs from the lock file beside the
	// configuration (pinned.go); Start fails when the lock cannot be read.
	Pinned bool
	// Audit receives a line per call, withheld or changed definition and server event
	// (audit.go); nil keeps no audit log. The caller closes it after Close.
	Audit *audit.Log
	// Env is the session's environment, as NAME=value: what its servers inherit and what a
	// reload expands the configuration with; nil is this process's (a session hosted by the
	// shared process of --share has its client's). Dir is the session's working directory,
	// where a server without "cwd" runs; "" is this process's.
	Env []string
	Dir string
}

// Aggregator serves what a set of servers offer to one client.
type Aggregator struct {
	opts    Options
	log     *slog.Logger
	debug   bool // the log takes debug records: traffic summaries are worth computing
	stderr  io.Writer
	cfgPath string
	// roster is every configured server key, each in one state (roster.go). reloadMu
	// serialises reloads and the start-up.
	roster   roster
	reloadMu sync.Mutex
	startErr error // set when no server could start: Serve returns it
	// closing is set, and closingCtx cancelled, when Close begins: a reload under way stops.
	closing       atomic.Bool
	closingCtx    context.Context
	cancelClosing context.CancelFunc

	// starts are the starts under way (claim), writes the catalog cache's (remember): Close
	// waits for them.
	starts, writes sync.WaitGroup
	// catalog is what the servers offer now: read without a lock, made by publish.
	catalog atomic.Pointer[catalog]

	// What the aggregator offers: the union of the servers' capabilities, and of their tasks
	// capabilities (raw: the SDK's types have none; nil when no server offers tasks).
	caps      json.RawMessage
	tasksCaps json.RawMessage

	// inflight is every request that crosses the aggregator (table.go).
	inflight *table
	// sess is the client's session (fromclient.go): what the client set up and said, and the
	// connection to it. The roster reaches it through its clientSink alone (sides.go).
	sess *session
	// client is how the roster reaches the session (sides.go).
	client clientSink
	// setup is what the client set up on the servers, set up again on their new processes.
	setup clientSetup
	// instructions are the servers' instructions combined at the start-up.
	instructions string

	pins  *pins      // the lock in force with --pinned (pinned.go); nil without
	audit *audit.Log // the audit log (audit.go); nil when none is kept, and then it does nothing

	closeOnce sync.Once

	// fault receives the panic that ended one of the session's goroutines (contain): the
	// session ends with it, and in the shared process no other session does. panicOn is the
	// method of faultPanicVar.
	fault   chan error
	panicOn string
}

// faultPanicVar, in the session's environment, names a method whose requests or
// notifications make their handling panic, the client's or a server's: a fault injected by
// the fault suite (a session hosted by the shared process must end alone, and a server's
// reader there serves other sessions too), never set by users.
const faultPanicVar = "MCP_SIMPLE_AGGREGATOR_FAULT_PANIC"

// contain ends the session when a panic reaches the top of the goroutine it is deferred in
// (where says which): it is logged with its stack, and Serve returns it. Unshared that ends
// the program as a crash would, with a message; in the shared process, which hosts many
// sessions, it ends this one alone.
func (a *Aggregator) contain(where string) { a.contained(where, recover()) }

// contained ends the session for v, the value of a recover in where, when there was a panic;
// it reports whether there was.
func (a *Aggregator) contained(where string, v any) bool {
	if v == nil {
		return false
	}
	err := fmt.Errorf("the session failed in %s: %v", where, v)
	a.log.Error(err.Error(), "stack", string(debug.Stack()))
	select {
	case a.fault <- err:
	default:
	}
	return true
}

// Start starts the process of every server of cfg, and returns at once: each server is
// initialized when the client's initialize arrives (startup), with what the client said of
// itself, so that its start overlaps the client's connection. Start fails only when there were
// servers to start and none could be executed, or on a configuration loop of its own.
func Start(ctx context.Context, cfg *config.Config, opts Options) (*Aggregator, error) {
	a, err := newAggregator(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	for _, sk := range cfg.Skipped {
		if !sk.Remote {
			a.log.Debug("not started: "+sk.Reason, "server", sk.Key)
		}
	}
	go mcpschema.Warm(era.Legacy) // beside the servers' start: the first catalog checks definitions
	if a.opts.Lazy || a.opts.Hosted {
		// Whether a server starts now depends on the client, which is not known before its
		// session: deferOrSpawn decides then (the cache's entry for it, or the process a shared
		// process runs for it).
		a.roster.mu.Lock()
		for _, sc := range cfg.Servers {
			a.roster.slots[sc.Key] = &slot{key: sc.Key, cfg: sc, state: dormant}
		}
		a.roster.mu.Unlock()
		return a, nil
	}
	started := false
	for _, res := range a.spawnAll(cfg.Servers) {
		a.enroll(res)
		started = started || res.err == nil
	}
	if len(cfg.Servers) > 0 && !started {
		return nil, a.noServer(nil)
	}
	return a, nil
}

// StartupError is a start-up in which no server could start.
type StartupError struct{ msg string }

func (e *StartupError) Error() string { return e.msg }

// noServer is the error of a start-up in which no server started; failed are the start
// results that say why (nil: the slots' reasons, before any handshake).
func (a *Aggregator) noServer(failed []startResult) error {
	var lines []string
	if failed == nil {
		for _, sl := range a.roster.sorted() {
			lines = append(lines, startResult{cfg: sl.cfg, err: sl.startErr}.failure("could not start"))
		}
	}
	for _, res := range failed {
		lines = append(lines, res.failure("could not start"))
	}
	a.Close()
	return &StartupError{fmt.Sprintf("%s: no server could start:\n%s", a.roster.cfg.File, strings.Join(lines, "\n"))}
}

// spawnAll starts the processes of cfgs, in their order; their handshakes come later.
func (a *Aggregator) spawnAll(cfgs []config.Server) []startResult {
	results := make([]startResult, len(cfgs))
	for i, sc := range cfgs {
		began := time.Now()
		s, err := a.spawn(sc, nil)
		results[i] = startResult{cfg: sc, srv: s, err: err, took: time.Since(began)}
	}
	return results
}

// initAll performs the handshakes of the starting slots in parallel with params, each within
// the start-up timeout, and returns how each went, in key order.
func (a *Aggregator) initAll(ctx context.Context, params json.RawMessage) []startResult {
	a.roster.mu.Lock()
	var results []startResult
	for _, sl := range a.roster.sorted() {
		if sl.state == starting {
			results = append(results, startResult{cfg: sl.cfg, srv: sl.proc})
		} else if sl.state == down {
			results = append(results, startResult{cfg: sl.cfg, err: sl.startErr})
		}
	}
	a.roster.mu.Unlock()
	var wg sync.WaitGroup
	for i := range results {
		res := &results[i]
		if res.srv == nil {
			continue
		}
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, a.opts.StartupTimeout)
			defer cancel()
			start := time.Now()
			if res.err = a.bringUp(sctx, res.srv, params); res.err != nil {
				res.srv = nil
			}
			res.took += time.Since(start)
		})
	}
	wg.Wait()
	return results
}

// startup initializes every server that runs with params (the initialize the client's
// arrival makes of it) and builds the first catalog. A server that fails is reported (on the
// log, and to the client once it is initialized) and stays down; the others serve (FR-009).
// It fails only when there were servers to start and none could. The session se is published
// as cs within it.
func (a *Aggregator) startup(ctx context.Context, se *session, cs *clientSession) (instructions string, err error) {
	a.reloadMu.Lock() // a reload before the client came respawned what it changed
	defer a.reloadMu.Unlock()
	version := cs.version
	if era.Of(version) == era.Modern {
		version = era.Latest(era.Legacy) // what a legacy server is told; a modern one gets _meta
	}
	params := a.serverInit(version, cs.caps, cs.info)
	r := &a.roster
	r.mu.Lock()
	r.started, r.params, r.clientEra = true, params, cs.side.era()
	if a.opts.Lazy || a.opts.Hosted {
		a.deferOrSpawn(params) // lazy.go
	}
	cfg := r.cfg
	listed := len(r.listedServers()) // not started: listed from the cache
	r.mu.Unlock()
	results := a.initAll(ctx, params)
	var failed []startResult
	for _, res := range results {
		if res.err != nil {
			failed = append(failed, res)
			a.auditFailed(res.cfg.Key, res.err)
		}
	}
	if len(cfg.Servers) > 0 && listed == 0 && len(failed) == len(results) {
		return "", a.noServer(failed)
	}
	// A server may announce a list change, or crash, while others are still starting: they
	// leave the first catalog to this function (a.catalog is nil until then).
	r.mu.Lock()
	if err := a.publish(); err != nil {
		r.mu.Unlock()
		a.Close()
		return "", &StartupError{fmt.Sprintf("%s: %v", cfg.File, err)}
	}
	cat := a.catalog.Load()
	a.tasksCaps = unionTasks(cat.servers)
	a.caps = unionCapabilities(cat.servers, a.tasksCaps)
	instructions = combineInstructions(cat.withInstructions(), a.opts.Separator, instructionLimit(cs.name))
	if a.opts.ToolSearch {
		instructions = searchInstructions(cat, cat.withInstructions(), a.opts.Separator, instructionLimit(cs.name))
	}
	a.instructions = instructions
	// Published before reloadMu is released: a reload waiting for it sees the session.
	se.hello.Store(cs)
	r.mu.Unlock()
	for _, res := range failed {
		a.report("error", cfg.File+": "+res.failure("could not start and stays down (the other servers are served)"))
	}
	if warning := nameWarning(cat, a.opts.Separator); warning != "" {
		a.log.Warn(warning)
	}
	if warning := limitWarning(a.exposedTools(cat)); warning != "" { // limits.go
		a.log.Warn(warning)
	}
	for _, s := range cat.servers {
		if s.proc != nil {
			a.ready(s, cfg.File)
		}
	}
	if a.opts.IdleStop > 0 {
		go a.idleLoop() // lazy.go
	}
	return instructions, nil
}

// ready says on the log what a server serves once it started, and which of its filter
// patterns match none of its tools.
func (a *Aggregator) ready(s *server, file string) {
	for _, p := range s.filter.Unmatched(toolNames(s)) {
		a.log.Warn(config.Warning{File: file, Problem: p}.String())
	}
	s.log.Debug("ready", "pid", s.proc.PID(), "tools", len(s.lists[kindTools]), "prompts", len(s.lists[kindPrompts]),
		"resources", len(s.lists[kindResources]), "templates", len(s.lists[kindTemplates]))
}

// loopMessage starts the error of an aggregator that finds itself in a configuration loop;
// the one above it recognizes it in its server's stderr.
const loopMessage = "configuration loop: this file is already served by an mcp-simple-aggregator above this one"

// toolNames are the names of the tools s lists.
func toolNames(s *server) []string {
	var names []string
	for _, def := range s.lists[kindTools] {
		if name, err := stringMember(def, "name"); err == nil {
			names = append(names, name)
		}
	}
	return names
}

// newAggregator applies the defaults of opts and checks for a configuration loop; it starts
// nothing.
func newAggregator(ctx context.Context, cfg *config.Config, opts Options) (*Aggregator, error) {
	if opts.Separator == "" {
		opts.Separator = ":"
	}
	if opts.StartupTimeout <= 0 {
		opts.StartupTimeout = 30 * time.Second
	}
	if opts.MaxMessageSize <= 0 {
		opts.MaxMessageSize = stdio.DefaultMaxMessageSize
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = defaultProbeTimeout
	}
	if opts.PingFailures <= 0 {
		opts.PingFailures = 3
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = 2 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	if opts.RestartDelay <= 0 {
		opts.RestartDelay = 500 * time.Millisecond
	}
	a := &Aggregator{opts: opts, log: opts.Log, stderr: opts.Stderr, cfgPath: canonicalPath(cfg.File),
		debug: opts.Log.Enabled(ctx, slog.LevelDebug), inflight: newTable(opts.IDSpace), audit: opts.Audit,
		fault: make(chan error, 1)}
	a.panicOn = a.getenv(faultPanicVar)
	a.roster = roster{cfg: cfg, slots: map[string]*slot{}}
	a.closingCtx, a.cancelClosing = context.WithCancel(context.Background())
	if err := a.checkLoop(); err != nil {
		return nil, err
	}
	if err := a.readPins(cfg.File); err != nil {
		return nil, err
	}
	a.sess = newSession(a)
	a.client = a.sess
	return a, nil
}

// Serve serves the catalog to one client over in and out until in ends, ctx is cancelled or
// the connection fails: the client's session (fromclient.go).
func (a *Aggregator) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	return a.sess.serve(ctx, in, out)
}

// Close stops every server; it returns when all of them have exited.
func (a *Aggregator) Close() {
	a.closeOnce.Do(func() {
		a.log.Debug("stopping the servers", "pending", a.inflight.pending())
		r := &a.roster
		r.mu.Lock()
		a.closing.Store(true)
		r.closed = true // under roster.mu: nothing starts from now on
		var procs []*server
		for _, sl := range r.slots {
			a.stopTimer(sl)
			a.release(sl)
			if sl.proc != nil {
				procs = append(procs, sl.proc)
			}
			if sl.state == serving {
				a.auditStopped(sl.proc, "mcp-simple-aggregator is shutting down")
			}
		}
		r.mu.Unlock()
		a.cancelClosing()
		var wg sync.WaitGroup
		for _, s := range procs {
			wg.Go(func() {
				a.retire(s, "was stopped", "")
				<-s.stopped
			})
		}
		wg.Wait()
		a.starts.Wait() // a start under way stops its process itself (relaunch, bringUp)
		a.writes.Wait()
		a.sess.notify.stop() // what the roster still announced goes nowhere
	})
}
