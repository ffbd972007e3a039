// Command mcp-simple-aggregator starts the MCP servers of a Claude-style configuration file and
// serves all of their tools to one MCP client over stdio, each prefixed with its server's key.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/aggregator"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/catalogcache"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/child"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/logging"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/shared"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/watch"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the configuration or the start-up failed
	exitUsage = 2 // the command line is wrong
)

func main() {
	// For profiling (see BENCHMARKS.md), not for users: a CPU profile of the whole run.
	if path := os.Getenv("MCP_SIMPLE_AGGREGATOR_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			code := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
			pprof.StopCPUProfile()
			f.Close()
			os.Exit(code)
		}
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 1 && args[0] == child.WatchdogArg {
		child.RunWatchdog(stdin, stderr, child.WatchdogDefaultGrace)
		return exitOK
	}
	if len(args) > 0 && args[0] == shared.DaemonArg {
		return runShared(args[1:], stderr)
	}
	if len(args) > 0 && args[0] == "cache" {
		return runCache(args[1:], stdout, stderr)
	}
	rawStderr := stderr
	command := ""
	if len(args) > 0 && (args[0] == "check" || args[0] == "pin") {
		command, args = args[0], args[1:]
	}
	opts, code, done := parseFlags(args, command, stdout, stderr)
	if done {
		return code
	}
	level := slog.LevelWarn
	if opts.debug {
		level = slog.LevelDebug
	}
	errw := logging.NewWriter(stderr, 4096)
	defer errw.Close(2 * time.Second)
	stderr = errw
	log := logging.New(stderr, level)
	child.SetLog(log) // what the login shell says of its PATH, with --debug

	cfg, warnings, err := config.Load(opts.configPath, os.LookupEnv)
	for _, w := range warnings {
		log.Warn(w.String())
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	log.Debug("configuration loaded", "file", cfg.File, "servers", len(cfg.Servers))
	if !opts.check && !opts.pin { // check and pin report it in their own way
		if w := nothingToStart(cfg); w != "" {
			log.Warn(w)
		}
	}

	// The watchdog ends the servers' process groups if this process is killed before it can.
	if exe, err := os.Executable(); err != nil {
		log.Warn("cannot start the watchdog: servers may outlive a SIGKILL of the aggregator", "error", err)
	} else if err := child.StartWatchdog(exe, rawStderr); err != nil {
		log.Warn("cannot start the watchdog: servers may outlive a SIGKILL of the aggregator", "error", err)
	}
	defer child.StopWatchdog()

	// SIGINT and SIGTERM end the session like the end of stdin: every child is stopped.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	aggOpts := aggregator.Options{
		Separator:      opts.separator,
		StartupTimeout: opts.startupTimeout,
		ProbeTimeout:   opts.probeTimeout,
		PingInterval:   opts.pingInterval,
		PingFailures:   opts.pingFailures,
		MaxRestarts:    opts.maxRestarts,
		RestartDelay:   opts.restartDelay,
		MaxMessageSize: opts.maxMessageSize,
		Version:        buildVersion(),
		Log:            log,
		Stderr:         stderr,
		CursorEntry:    opts.cursorName,
		ToolSearch:     opts.toolSearch,
		IdleStop:       opts.idleStop,
		Pinned:         opts.pinned,
	}
	if opts.lazy {
		// The cache is never the reason a server is missing: without it, every server starts
		// with the session.
		if cache, err := openCache(); err != nil {
			log.Warn("--lazy: the catalog cache cannot be used, and every server starts with the session: " + err.Error())
		} else {
			aggOpts.Lazy, aggOpts.Cache = true, cache
		}
	}
	if opts.check {
		return runCheck(ctx, cfg, aggOpts, opts, stdout)
	}
	if opts.pin {
		aggOpts.Pinned = false // pin compares with the lock itself
		return runPin(ctx, cfg, aggOpts, opts.servers, stdout, log)
	}
	if opts.share {
		// After the configuration was read and checked: its errors are this session's alone.
		if sess := joinShared(opts, cfg.File, &aggOpts, log); sess != nil {
			defer sess.Close()
		}
	}
	auditLog := openAuditLog(opts, log) // audit.go
	defer auditLog.Close()              // last: after the servers' stop events
	aggOpts.Audit = auditLog
	// SIGHUP asks for a reload (on Unix), from here on: one during the start-up does not end
	// the program, it reloads once the servers have started.
	hup, stopHup := reloadSignal()
	defer stopHup()
	agg, err := aggregator.Start(ctx, cfg, aggOpts)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	stopReloads := startReloads(agg, hup, !opts.noWatch, log)
	err = agg.Serve(ctx, stdin, stdout)
	var startErr *aggregator.StartupError
	if errors.As(err, &startErr) {
		agg.Close()
		stopReloads()
		fmt.Fprintln(stderr, err)
		return exitError
	}
	log.Debug("shutting down", "reason", shutdownReason(ctx, err))
	// Close first: it stops a reload under way (which would otherwise be waited for), and a
	// reload asked for after it does nothing.
	agg.Close()
	stopReloads()
	if err != nil && ctx.Err() == nil {
		log.Error("serving the client failed", "error", err)
		return exitError
	}
	return exitOK
}

// nothingToStart is the warning, said at start-up before any client connects, for a
// configuration with no server to start, naming the entries and why each is skipped; "" when
// there are servers to start.
func nothingToStart(cfg *config.Config) string {
	if len(cfg.Servers) > 0 {
		return ""
	}
	var skipped []string
	for _, sk := range cfg.Skipped {
		skipped = append(skipped, fmt.Sprintf("%q (%s)", sk.Key, sk.Reason))
	}
	why := ""
	if len(skipped) > 0 {
		why = ": " + strings.Join(skipped, ", ")
	}
	return fmt.Sprintf("%s: there is no server to start (every entry is disabled or remote, or there is none); serving an empty list%s", cfg.File, why)
}

// watchDebounce is how long the watcher waits after the last change of a burst (an editor's
// save, ten saves in a row) before the reload, so that the reload reads the final content.
const watchDebounce = 200 * time.Millisecond

// startReloads starts what triggers a reload: SIGHUP (the signals on hup) and, when watching,
// a change of the configuration file or of a server's envFile. Reloads run one at a time. The
// returned stop ends the triggers and waits for a reload under way; call it before closing agg.
func startReloads(agg *aggregator.Aggregator, hup <-chan os.Signal, watching bool, log *slog.Logger) (stop func()) {
	var w *watch.Watcher
	reload := func() {
		agg.Reload()
		if w != nil {
			// A reload may have changed the files: another envFile, a re-pointed link.
			if err := w.Set(agg.Files()); err != nil && !errors.Is(err, watch.ErrClosed) {
				log.Warn("cannot watch the configuration for changes", "error", err)
			}
		}
	}
	if watching {
		// The watcher starts with no file and is given them once w is set: no change can call
		// reload before.
		nw, err := watch.New(nil, watchDebounce, reload, log)
		if err != nil {
			log.Warn("cannot watch the configuration for changes: it is not reloaded when it changes", "error", err)
		} else {
			w = nw
			if err := w.Set(agg.Files()); err != nil {
				log.Warn("cannot watch the configuration for changes", "error", err)
			}
			log.Debug("watching the configuration for changes", "files", agg.Files())
		}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-hup:
				log.Debug("reloading on SIGHUP")
				reload()
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		if w != nil {
			w.Close()
		}
	}
}

// openCache opens the catalog cache in the user's cache directory.
func openCache() (*catalogcache.Cache, error) {
	dir, err := catalogcache.Default()
	if err != nil {
		return nil, err
	}
	return catalogcache.Open(dir)
}

// runCache runs the cache command: "cache clear" removes every cached catalog.
func runCache(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 || args[0] != "clear" {
		fmt.Fprintln(stderr, "mcp-simple-aggregator: usage: mcp-simple-aggregator cache clear")
		return exitUsage
	}
	cache, err := openCache()
	if err == nil {
		err = cache.Clear()
	}
	if err != nil {
		fmt.Fprintf(stderr, "mcp-simple-aggregator: cache clear: %v\n", err)
		return exitError
	}
	fmt.Fprintf(stdout, "cleared the catalog cache %s\n", cache.Dir())
	return exitOK
}

func shutdownReason(ctx context.Context, err error) string {
	switch {
	case ctx.Err() != nil:
		return "signal"
	case err != nil:
		return err.Error()
	}
	return "end of input"
}
