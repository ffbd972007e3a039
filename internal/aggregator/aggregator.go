// Package aggregator is the routing core: it starts the configured servers, keeps the catalog
// of their tools under prefixed names, and serves that catalog to one MCP client, routing each
// call to the child that owns the tool and carrying arguments and results through unchanged.
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

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
}

// Aggregator serves the tools of a set of child servers.
type Aggregator struct {
	opts    Options
	log     *slog.Logger
	debug   bool // the log takes debug records: traffic summaries are worth computing
	stderr  io.Writer
	cfgPath string
	servers []*server

	catalog atomicCatalog
	mu      sync.Mutex // serialises catalog changes

	caps *mcp.ServerCapabilities // what the aggregator offers: the union of the children's

	up         *stdio.Conn
	upSession  atomic.Pointer[mcp.ServerSession]
	started    atomic.Bool            // the client has sent initialize
	ready      atomic.Bool            // the client has sent notifications/initialized
	version    atomic.Pointer[string] // the protocol version of the session with the client
	clientCaps map[string]json.RawMessage
	clientName string
	notify     *debouncer
	pending    *pendingTable
	reverse    *reverseTable
	early      earlyQueue // children's notifications from before the client was initialized
	tasks      taskTable
	tasksCaps  json.RawMessage            // the union of the children's tasks capabilities; nil for none
	initID     atomic.Pointer[jsonrpc.ID] // the ID of the client's initialize
	closeOnce  sync.Once
}

// atomicCatalog holds the current catalog snapshot: calls read it without locks.
type atomicCatalog = atomic.Pointer[catalog]

// chainVar lists the configuration files of the aggregators above this one, so that a
// configuration that starts itself again is caught instead of recursing.
const chainVar = "MCP_SIMPLE_AGGREGATOR_CONFIG_CHAIN"

// Start starts every server of cfg in parallel and returns once all of them have initialized
// and listed their tools. If any fails, the others are stopped and the error describes every
// failure.
func Start(ctx context.Context, cfg *config.Config, opts Options) (*Aggregator, error) {
	a, err := newAggregator(ctx, cfg, opts)
	if err != nil {
		return nil, err
	}
	opts = a.opts
	ctx, cancel := context.WithTimeout(ctx, opts.StartupTimeout)
	defer cancel()
	servers := make([]*server, len(cfg.Servers))
	errs := make([]error, len(cfg.Servers))
	var wg sync.WaitGroup
	for i, sc := range cfg.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			servers[i], errs[i] = a.startServer(ctx, sc)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("server %q: %w", sc.Key, errs[i])
			}
		}()
	}
	wg.Wait()
	// A child may announce a list change while others are still starting: refreshTools takes
	// the same lock and leaves the first catalog to this function.
	a.mu.Lock()
	for _, s := range servers {
		if s != nil {
			a.servers = append(a.servers, s)
		}
	}
	if err := errors.Join(errs...); err != nil {
		a.mu.Unlock()
		a.Close()
		return nil, fmt.Errorf("%s: start-up failed, every server was stopped:\n%w", cfg.File, err)
	}
	cat, err := buildCatalog(a.servers, opts.Separator)
	if err != nil {
		a.mu.Unlock()
		a.Close()
		return nil, fmt.Errorf("%s: %w", cfg.File, err)
	}
	a.catalog.Store(cat)
	a.caps = unionCapabilities(a.servers)
	a.tasksCaps = unionTasks(a.servers)
	a.mu.Unlock()
	if warning := nameWarning(cat, opts.Separator); warning != "" {
		a.log.Warn(warning)
	}
	for _, w := range cat.warnings {
		a.log.Warn(w)
	}
	for _, s := range a.servers {
		s.log.Debug("ready", "tools", len(s.lists[kindTools]), "prompts", len(s.lists[kindPrompts]),
			"resources", len(s.lists[kindResources]), "templates", len(s.lists[kindTemplates]))
		go a.watch(s)
		if opts.PingInterval > 0 {
			go a.pingLoop(s)
		}
	}
	return a, nil
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
	a := &Aggregator{opts: opts, log: opts.Log, stderr: opts.Stderr, cfgPath: canonicalPath(cfg.File),
		debug: opts.Log.Enabled(ctx, slog.LevelDebug), pending: newPendingTable(), reverse: newReverseTable()}
	if err := a.checkLoop(); err != nil {
		return nil, err
	}
	// Created before any watcher can trigger it; it sends only once Serve has connected the
	// client and the client has said it is initialized (ready is set after up).
	a.notify = newDebouncer(10*time.Millisecond, func(method string) {
		if a.ready.Load() {
			if err := a.up.Notify(method); err != nil {
				a.log.Debug("notify "+method, "error", err)
			}
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
	return fmt.Errorf("%s: configuration loop: this file is already served by an mcp-simple-aggregator above this one (%s -> %s); "+
		"a server in it starts mcp-simple-aggregator on the same file again: remove that server, or give it another configuration file",
		a.cfgPath, strings.Join(files, " -> "), a.cfgPath)
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
	a.up = stdio.New(in, out, &stdio.Options{
		MaxMessageSize: a.opts.MaxMessageSize,
		BadLine:        a.badClientLine,
		Received:       a.received,
		Intercept:      a.interceptClient,
		DrainOnEOF:     drainOnEOF,
		Batches:        a.batches,
		Answering:      a.answering,
	})
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcp-simple-aggregator", Version: a.opts.Version}, &mcp.ServerOptions{
		Capabilities:              a.caps,
		SupportedProtocolVersions: protocolVersions,
		InitializedHandler:        a.initialized,
		Logger:                    slog.New(slog.DiscardHandler),
	})
	session, err := srv.Connect(ctx, a.up.Transport(), nil)
	if err != nil {
		return err
	}
	a.upSession.Store(session)
	done := make(chan error, 1)
	go func() { done <- session.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// Not session.Close: it waits for the reader, and a read of stdin cannot be
		// interrupted. The program exits once the children are stopped.
		err = ctx.Err()
	}
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// protocolVersions are the versions the aggregator speaks with its client, latest first.
var protocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// clientVersion is the protocol version of the session with the client; "" before initialize.
func (a *Aggregator) clientVersion() string {
	if v := a.version.Load(); v != nil {
		return *v
	}
	return ""
}

// batches reports whether the client may send JSON-RPC batches: in protocol versions before
// 2025-06-18, which removed them (2025-03-26 requires receiving them), once initialized.
func (a *Aggregator) batches() bool {
	v := a.clientVersion()
	return v != "" && v < "2025-06-18"
}

// received sees every message from the client before the SDK does: list_changed may be sent
// only once the client has said it is initialized.
func (a *Aggregator) received(msg jsonrpc.Message) {
	if r, ok := msg.(*jsonrpc.Request); ok && r.Method == "notifications/initialized" && !a.ready.Load() {
		a.early.flush(a) // sets ready
		a.clientReady()
	}
}

// Close stops every child; it returns when all of them have exited.
func (a *Aggregator) Close() {
	a.closeOnce.Do(func() {
		var wg sync.WaitGroup
		for _, s := range a.servers {
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
// resources leave the lists, the client is told, its requests in flight fail, and the process
// group is ended. Failed servers stay down.
func (a *Aggregator) serverDown(s *server, why string) {
	if !s.markDown(why) {
		return
	}
	a.failPending(s, why)
	a.cancelReverse(s, why)
	a.tasks.drop(s)
	a.log.Error(fmt.Sprintf("server %q %s; its tools, prompts and resources are no longer available%s", s.key, why, tailText(s.proc.Tail())))
	go s.stop(a.opts.ShutdownGrace)
	a.mu.Lock()
	a.storeCatalog(a.catalog.Load().without(s))
	a.mu.Unlock()
}

func (a *Aggregator) liveServers() []*server {
	var live []*server
	for _, s := range a.servers {
		select {
		case <-s.down:
		default:
			live = append(live, s)
		}
	}
	return live
}

// unionCapabilities is what the aggregator offers: tools always, with list changes (children
// come and go); prompts, resources (and subscriptions), completions and logging when some child
// offers them.
func unionCapabilities(servers []*server) *mcp.ServerCapabilities {
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	for _, s := range servers {
		c := s.caps
		if c.Prompts != nil {
			caps.Prompts = &mcp.PromptCapabilities{ListChanged: true}
		}
		if c.Resources != nil {
			if caps.Resources == nil {
				caps.Resources = &mcp.ResourceCapabilities{ListChanged: true}
			}
			caps.Resources.Subscribe = caps.Resources.Subscribe || c.Resources.Subscribe
		}
		if c.Completions != nil {
			caps.Completions = &mcp.CompletionCapabilities{}
		}
		if c.Logging != nil {
			caps.Logging = &mcp.LoggingCapabilities{}
		}
	}
	return caps
}

// advertises reports whether the aggregator offers list k.
func (a *Aggregator) advertises(k kind) bool {
	switch k {
	case kindPrompts:
		return a.caps.Prompts != nil
	case kindResources, kindTemplates:
		return a.caps.Resources != nil
	}
	return true
}
