// Package aggregator is the routing core: it starts the configured servers, keeps the catalog
// of what they offer under prefixed names, and serves it to one MCP client, routing each
// request to the server that owns it and carrying arguments and results through unchanged.
//
// The design, with the way of one call through it in both directions, is in docs/design.md.
// Files by role:
//
//	aggregator.go  Start, Serve, Close; a server going down; the capabilities offered
//	client.go      what arrives from the client: the dispatcher, the session, the handshake
//	fromserver.go  what arrives from a server: the dispatcher
//	handlers.go    the client's requests: routed by name, URI or task, fanned out, listed
//	server.go      a server's life: start, handshake, the one call path and pager, pings, stop
//	table.go       the in-flight table: every request that crosses the aggregator
//	queue.go       what waits for the client before it is ready
//	changes.go     list changes and list_changed notifications
//	reload.go      a reload: the new file applied server by server, nothing in flight lost
//	instructions.go  the servers' instructions combined for the client, and as resources
//	catalog.go     the catalog: names, URIs, collisions
//	toolsearch.go  --tool-search: the search and call tools, the index of each catalog
//	envelope.go    every JSON-RPC message and error the aggregator writes itself
//	check.go       the check command
//
// What the go-sdk still does: the client-side handshake (its ServerSession negotiates the
// protocol version, records the client's initialize and answers it through
// initializeMiddleware, which adds what its types cannot carry), ping from the client, and
// the refusal of requests before initialize and of unknown methods. Everything else, in both
// directions, is raw JSON-RPC on internal/stdio: the servers' handshakes too, because the SDK's
// capability types have no "tasks" and would re-encode what passes through.
package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
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
	// PingFailures is how many failed pings in a row make a child count as crashed.
	PingFailures int
	// ShutdownGrace is how long a child is given at each step of stopping it.
	ShutdownGrace time.Duration
	// Version is reported to the client and the children.
	Version string
	// Log receives the aggregator's own records.
	Log *slog.Logger
	// Stderr receives the children's stderr lines, prefixed with their keys.
	Stderr io.Writer
	// CursorEntry is the name of the aggregator's entry in Cursor's configuration, for
	// Check's Cursor column; "" means "aggregator".
	CursorEntry string
	// ToolSearch lists the aggregator's search and call tools instead of the catalog's tools
	// (toolsearch.go).
	ToolSearch bool
}

// Aggregator serves what a set of servers offer to one client.
type Aggregator struct {
	opts    Options
	log     *slog.Logger
	debug   bool // the log takes debug records: traffic summaries are worth computing
	stderr  io.Writer
	cfgPath string
	// The servers, three ways (guarded by mu): spawned are every process ever started (Close
	// stops them all); servers are the current server of each key once initialized (up, or
	// down after a crash, until a reload replaces it), in key order; the catalog's servers are
	// those whose tools, prompts and resources are served now.
	cfg       *config.Config
	spawned   []*server
	spawnErrs []error // by entry of cfg.Servers: why its process did not start
	servers   []*server
	startErr  error // set when no server could start: Serve returns it
	// reloadMu serialises reloads (and the first start-up); restarting holds, during a
	// reload, the keys of the servers it restarts, each with a channel closed when it is done.
	reloadMu   sync.Mutex
	restarting map[string]chan struct{}
	// started is set once the servers are initialized (at the client's initialize), with
	// serverParams, the initialize they were sent (servers started later get the same).
	started      bool
	serverParams json.RawMessage
	// closing is set, and closingCtx cancelled, when Close begins: a reload under way stops.
	closing       atomic.Bool
	closingCtx    context.Context
	cancelClosing context.CancelFunc

	catalog atomic.Pointer[catalog]
	mu      sync.Mutex // serialises catalog changes

	// What the aggregator offers: the union of the servers' capabilities, and of their tasks
	// capabilities (raw: the SDK's types have none; nil when no server offers tasks).
	caps      json.RawMessage
	tasksCaps json.RawMessage

	client   *stdio.Conn
	sdk      *sdkConn
	inflight *table
	queue    clientQueue // what waits for the client to be ready
	notify   *debouncer

	// session is what the client said in initialize, published once it is answered;
	// initializing is the same while the SDK answers it (read by its middleware only).
	session      atomic.Pointer[clientSession]
	initializing *clientSession

	closeOnce sync.Once
}

// chainVar lists the configuration files of the aggregators above this one, so that a
// configuration that starts itself again is caught instead of recursing.
const chainVar = "MCP_SIMPLE_AGGREGATOR_CONFIG_CHAIN"

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
	a.spawnAll(cfg.Servers)
	if len(cfg.Servers) > 0 && len(a.spawned) == 0 {
		return nil, a.noServer(nil)
	}
	return a, nil
}

// StartupError is a start-up in which no server could start.
type StartupError struct{ msg string }

func (e *StartupError) Error() string { return e.msg }

// noServer is the error of a start-up in which no server started; errs are the handshakes'
// errors, by server of a.spawned.
func (a *Aggregator) noServer(errs []error) error {
	var lines []string
	for i, sc := range a.cfg.Servers {
		if err := a.spawnErrs[i]; err != nil {
			lines = append(lines, startFailure(sc.Key, err, "could not start"))
		}
	}
	for i, s := range a.spawned {
		if errs != nil && errs[i] != nil {
			lines = append(lines, startFailure(s.key, errs[i], "could not start"))
		}
	}
	slices.Sort(lines)
	a.Close()
	return &StartupError{fmt.Sprintf("%s: no server could start:\n%s", a.cfg.File, strings.Join(lines, "\n"))}
}

// spawnAll starts the processes of cfgs; a.spawned are those that run, a.spawnErrs (by entry)
// the reasons of the others.
func (a *Aggregator) spawnAll(cfgs []config.Server) {
	a.spawnErrs = make([]error, len(cfgs))
	for i, sc := range cfgs {
		s, err := a.spawn(sc)
		if err != nil {
			a.spawnErrs[i] = err
			continue
		}
		a.spawned = append(a.spawned, s)
	}
}

// initAll initializes servers in parallel with params, each within the start-up timeout. took
// is how long each took; errs says why those that failed did (they are stopped).
func (a *Aggregator) initAll(ctx context.Context, servers []*server, params json.RawMessage) (errs []error, took []time.Duration) {
	errs, took = make([]error, len(servers)), make([]time.Duration, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, a.opts.StartupTimeout)
			defer cancel()
			start := time.Now()
			errs[i] = a.initServer(sctx, s, params)
			took[i] = time.Since(start)
		})
	}
	wg.Wait()
	return errs, took
}

// startup initializes every server that runs with params (the initialize the client's
// arrival makes of it) and builds the first catalog. A server that fails is reported (on the
// log, and to the client once it is initialized) and stays down; the others serve (FR-009).
// It fails only when there were servers to start and none could.
func (a *Aggregator) startup(ctx context.Context, cs *clientSession) (instructions string, err error) {
	a.reloadMu.Lock() // a reload before the client came respawned what it changed
	defer a.reloadMu.Unlock()
	params := a.serverInit(cs.version, cs.caps, cs.info)
	errs, _ := a.initAll(ctx, a.spawned, params)
	// A server may announce a list change while others are still starting: refresh takes
	// the same lock and leaves the first catalog to this function.
	a.mu.Lock()
	for i, s := range a.spawned {
		if errs[i] == nil {
			a.servers = append(a.servers, s)
		}
	}
	if len(a.cfg.Servers) > 0 && len(a.servers) == 0 {
		a.mu.Unlock()
		return "", a.noServer(errs)
	}
	cat, err := buildCatalog(a.servers, a.opts.Separator)
	if err != nil {
		a.mu.Unlock()
		a.Close()
		return "", &StartupError{fmt.Sprintf("%s: %v", a.cfg.File, err)}
	}
	a.catalog.Store(cat)
	a.tasksCaps = unionTasks(a.servers)
	a.caps = unionCapabilities(a.servers, a.tasksCaps)
	a.started, a.serverParams = true, params
	instructions = combineInstructions(a.servers, a.opts.Separator, instructionLimit(cs.name))
	if a.opts.ToolSearch {
		instructions = searchInstructions(cat, a.servers, a.opts.Separator, instructionLimit(cs.name))
	}
	unmatched := map[*server][]config.Problem{}
	names := map[*server][numKinds]int{}
	for _, s := range a.servers {
		unmatched[s] = s.filter.Unmatched(toolNames(s))
		for k := range numKinds {
			n := names[s]
			n[k] = len(s.lists[k])
			names[s] = n
		}
	}
	// Published before reloadMu is released: a reload waiting for it sees the session, and
	// initializes the servers it starts with the same params.
	a.session.Store(cs)
	a.mu.Unlock()
	var failures []string
	for i, sc := range a.cfg.Servers {
		if err := a.spawnErrs[i]; err != nil {
			failures = append(failures, startFailure(sc.Key, err, "could not start and stays down (the other servers are served)"))
		}
	}
	for i, s := range a.spawned {
		if errs[i] != nil {
			failures = append(failures, startFailure(s.key, errs[i], "could not start and stays down (the other servers are served)"))
		}
	}
	slices.Sort(failures)
	for _, f := range failures {
		msg := a.cfg.File + ": " + f
		a.log.Error(msg)
		a.toClient(logNotification("error", msg))
	}
	if len(a.cfg.Servers) == 0 {
		a.log.Warn(fmt.Sprintf("%s: there is no server to start (every entry is disabled or remote, or there is none); serving an empty list", a.cfg.File))
	}
	if warning := nameWarning(cat, a.opts.Separator); warning != "" {
		a.log.Warn(warning)
	}
	for _, w := range cat.warnings {
		a.log.Warn(w)
	}
	for _, s := range cat.servers {
		for _, p := range unmatched[s] {
			a.log.Warn(config.Warning{File: a.cfg.File, Problem: p}.String())
		}
		n := names[s]
		s.log.Debug("ready", "tools", n[kindTools], "prompts", n[kindPrompts], "resources", n[kindResources], "templates", n[kindTemplates])
		go a.watch(s)
		if a.opts.PingInterval > 0 {
			go a.pingLoop(s)
		}
	}
	return instructions, nil
}

// loopMessage starts the error of an aggregator that finds itself in a configuration loop;
// the one above it recognizes it in its server's stderr.
const loopMessage = "configuration loop: this file is already served by an mcp-simple-aggregator above this one"

// startFailure says that the server key could not start (what, such as "could not start"), and
// why: what happened to it, or that it is a configuration loop.
func startFailure(key string, err error, what string) string {
	if strings.Contains(err.Error(), loopMessage) {
		return fmt.Sprintf("server %q %s: it is a configuration loop: it starts mcp-simple-aggregator on this same configuration file again; remove it from the file, or give it another configuration file: %v", key, what, err)
	}
	return fmt.Sprintf("server %q %s: %v", key, what, err)
}

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
	a := &Aggregator{opts: opts, log: opts.Log, stderr: opts.Stderr, cfgPath: canonicalPath(cfg.File), cfg: cfg,
		debug: opts.Log.Enabled(ctx, slog.LevelDebug), inflight: newTable()}
	a.closingCtx, a.cancelClosing = context.WithCancel(context.Background())
	if err := a.checkLoop(); err != nil {
		return nil, err
	}
	// Created before any watcher can trigger it; it sends only once the client has said it
	// is initialized (the queue is flushed after Serve has connected the client).
	a.notify = newDebouncer(10*time.Millisecond, func(method string) {
		if a.queue.isReady() {
			a.writeClient(notification(method, nil))
		}
	})
	return a, nil
}

// childEnv is the aggregator's environment with a server's env on top (the server's values
// win), plus the loop-detection chain.
func (a *Aggregator) childEnv(env map[string]string) []string {
	base := os.Environ()
	out := make([]string, 0, len(base)+len(env)+1)
	over := map[string]bool{chainVar: true}
	for name := range env {
		over[envKey(name)] = true
	}
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if !over[envKey(name)] {
			out = append(out, kv)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(env)) {
		out = append(out, name+"="+env[name])
	}
	chain := a.cfgPath
	if parent := os.Getenv(chainVar); parent != "" {
		chain = parent + string(os.PathListSeparator) + a.cfgPath
	}
	return append(out, chainVar+"="+chain)
}

// envKey is how the OS compares environment names: without case on Windows.
func envKey(name string) string {
	if runtime.GOOS == "windows" {
		return strings.ToUpper(name)
	}
	return name
}

// checkLoop fails when an aggregator above this one serves the same configuration file: its
// servers would start this one again, forever.
func (a *Aggregator) checkLoop() error {
	chain := os.Getenv(chainVar)
	if chain == "" {
		return nil
	}
	files := filepath.SplitList(chain)
	if !slices.Contains(files, a.cfgPath) {
		return nil
	}
	return fmt.Errorf("%s: %s (%s -> %s); "+
		"a server in it starts mcp-simple-aggregator on the same file again: remove that server, or give it another configuration file",
		a.cfgPath, loopMessage, strings.Join(files, " -> "), a.cfgPath)
}

func canonicalPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return path
}

// drainOnEOF is how long, after the client closed its input, the answers to its last requests
// are still awaited before shutting down.
const drainOnEOF = 5 * time.Second

// Serve serves the catalog to one client over in and out until in ends, ctx is cancelled or
// the connection fails.
func (a *Aggregator) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	a.client = stdio.New(in, out, &stdio.Options{
		MaxMessageSize: a.opts.MaxMessageSize,
		DrainOnEOF:     drainOnEOF,
		Batches:        a.batches,
	})
	a.sdk = newSDKConn(a.client)
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcp-simple-aggregator", Version: a.opts.Version}, &mcp.ServerOptions{
		SupportedProtocolVersions: protocolVersions,
		Logger:                    slog.New(slog.DiscardHandler),
	})
	srv.AddReceivingMiddleware(a.initializeMiddleware)
	session, err := srv.Connect(ctx, a.sdk, nil)
	if err != nil {
		return err
	}
	go a.readClient()
	done := make(chan error, 1)
	go func() { done <- session.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// Not session.Close: it waits for the reader, and a read of stdin cannot be
		// interrupted. The program exits once the servers are stopped.
		err = ctx.Err()
	}
	if a.startErr != nil {
		return a.startErr
	}
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// Close stops every server; it returns when all of them have exited.
func (a *Aggregator) Close() {
	a.closeOnce.Do(func() {
		var wg sync.WaitGroup
		a.mu.Lock()
		a.closing.Store(true) // under a.mu: a reload publishes a new server, or stops it itself
		spawned := slices.Clone(a.spawned)
		a.mu.Unlock()
		a.cancelClosing()
		for _, s := range spawned {
			s.markDown("was stopped")
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.stop(a.opts.ShutdownGrace)
			}()
		}
		wg.Wait()
		a.notify.stop()
	})
}

// serverDown takes a server that stopped serving out of the catalog: its tools, prompts and
// resources leave the lists, the client is told, what it had in flight ends (its answers fail,
// its requests to the client are cancelled there), and the process group is ended. Failed
// servers stay down.
func (a *Aggregator) serverDown(s *server, why string) {
	if !s.markDown(why) {
		return
	}
	a.endCalls(s, func(c *call) json.RawMessage { return serverGone(c, s.key, why) }, fmt.Sprintf("server %q %s", s.key, why))
	a.log.Error(fmt.Sprintf("server %q %s; its tools, prompts and resources are no longer available%s", s.key, why, tailText(s.proc.Tail())))
	go s.stop(a.opts.ShutdownGrace)
	if s.draining.Load() {
		return // a reload stops it anyway, and builds the catalog without it
	}
	a.mu.Lock()
	if cat := a.catalog.Load(); cat != nil {
		a.storeCatalog(cat.without(s))
	}
	a.mu.Unlock()
}

// endCalls ends what s, which went down, had in flight: its calls fail with the error errFor
// gives, and its requests that reached the client are cancelled there for reason.
func (a *Aggregator) endCalls(s *server, errFor func(*call) json.RawMessage, reason string) {
	for _, c := range a.inflight.sweep(s) {
		if c.to == s {
			a.failWith(c, errFor(c))
		} else if c.delivered {
			a.toClient(cancelled(c.toID, reason))
		}
	}
}

func (a *Aggregator) liveServers() []*server {
	var live []*server
	for _, s := range a.servers {
		if !s.isDown() {
			live = append(live, s)
		}
	}
	return live
}

// unionCapabilities is what the aggregator offers, encoded for its answer to initialize. A
// client can only be told of changes to what it was offered at initialize, and a reload may
// add servers: so tools, prompts, resources and logging are always offered, with list changes
// (a list no server serves is empty; logging/setLevel is answered here and passed to the
// servers that log). Resource subscriptions and completions are offered when some server
// offers them, and tasks as the union of the servers' tasks capabilities. Built as JSON: the
// SDK's types have no tasks.
func unionCapabilities(servers []*server, tasks json.RawMessage) json.RawMessage {
	resources := map[string]bool{"listChanged": true}
	caps := map[string]any{
		"tools":     map[string]bool{"listChanged": true},
		"prompts":   map[string]bool{"listChanged": true},
		"resources": resources,
		"logging":   struct{}{},
	}
	for _, s := range servers {
		if r, ok := s.caps["resources"]; ok {
			var sub struct {
				Subscribe bool `json:"subscribe"`
			}
			_ = json.Unmarshal(r, &sub)
			if sub.Subscribe {
				resources["subscribe"] = true
			}
		}
		if s.offers("completions") {
			caps["completions"] = struct{}{}
		}
	}
	if tasks != nil {
		caps["tasks"] = tasks
	}
	b, _ := json.Marshal(caps)
	return b
}

// unionTasks is the tasks capability the aggregator offers: the union of the servers' (nil
// when none offers tasks).
func unionTasks(servers []*server) json.RawMessage {
	var merged map[string]any
	for _, s := range servers {
		var m map[string]any
		if len(s.tasks) == 0 || json.Unmarshal(s.tasks, &m) != nil {
			continue
		}
		merged = mergeObjects(merged, m)
	}
	if merged == nil {
		return nil
	}
	b, _ := json.Marshal(merged)
	return b
}

// mergeObjects adds src's members to dst, merging objects member by member; dst keeps what it
// has otherwise.
func mergeObjects(dst, src map[string]any) map[string]any {
	if dst == nil {
		dst = map[string]any{}
	}
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			dv, _ := dst[k].(map[string]any)
			dst[k] = mergeObjects(dv, sv)
		} else if _, ok := dst[k]; !ok {
			dst[k] = v
		}
	}
	return dst
}
