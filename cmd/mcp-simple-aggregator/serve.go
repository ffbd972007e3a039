package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/aggregator"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/shared"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/watch"
)

// serveCmd serves the servers of a configuration to the client on stdin and stdout: what a
// client's configuration runs.
type serveCmd struct {
	config      configFlags
	policy      policyFlags
	noWatch     bool          // do not reload when the files of the configuration change
	linger      time.Duration // how long the shared process keeps a server no session uses
	auditLog    string        // the audit log's file; "" for none
	auditBodies bool          // the audit log records arguments and results
	version     bool
	fs          *flag.FlagSet // what set them, for the flags a forwarder hands over
}

func (*serveCmd) name() string { return "" }

func (*serveCmd) synopsis() string {
	return `--config FILE [flags]
       mcp-simple-aggregator check --config FILE [flags]
       mcp-simple-aggregator pin --config FILE [--server KEY]... [flags]
       mcp-simple-aggregator cache clear
       mcp-simple-aggregator stop`
}

func (*serveCmd) help() string {
	return `Starts every MCP server listed in FILE as a child process and serves all of their
tools to one MCP client over standard input and output, each tool named after its
server's key: the tool "search_code" of the server "sourcebot" becomes
"sourcebot:search_code". Clients that call the Anthropic or OpenAI APIs (Claude
Desktop, Cursor, ...) reject ":" in tool names: use --separator __ for them.

Commands (each has its own --help):
  check   start the servers once and report how each started, then stop them
  pin     write what the servers list now into the lock file that --pinned uses
  cache   "cache clear" empties the catalog cache of --lazy
  stop    stop the shared process of --share, and every server it runs
`
}

func (*serveCmd) footer() string {
	return exampleConfig + `
Exit status: 0 after a clean shutdown, 1 when the configuration or a server
fails to start, 2 when the command line is wrong.
`
}

func (c *serveCmd) setFlags(fs *flag.FlagSet) {
	c.fs = fs
	c.config.set(fs)
	c.policy.set(fs)
	fs.BoolVar(&c.noWatch, "no-watch", false,
		"do not reload when the configuration file or a server's envFile changes (SIGHUP still reloads)")
	fs.DurationVar(&c.linger, "linger", shared.DefaultLinger,
		"with --share, how long a server no session uses keeps running, for a session that starts again: a `DURATION`")
	fs.StringVar(&c.auditLog, "audit-log", "",
		"append a JSON line per call, withheld or changed definition and server start, stop or crash to this `FILE` (created 0600, rotated at 10 MiB, 5 kept)")
	fs.BoolVar(&c.auditBodies, "audit-log-bodies", false,
		"also write the arguments and results of calls into the audit log (they may hold secrets)")
	fs.BoolVar(&c.version, "version", false, "print the version and exit")
}

func (c *serveCmd) check(args []string) error {
	if c.version {
		return nil
	}
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q: give the configuration file with --config FILE", args[0])
	}
	err := firstError(c.config.check(), c.policy.check())
	switch {
	case err != nil:
		return err
	case c.linger <= 0:
		return errors.New("--linger must be positive, such as 5m")
	case c.auditBodies && c.auditLog == "":
		return errors.New("--audit-log-bodies needs --audit-log FILE")
	}
	return nil
}

func (c *serveCmd) run(_ []string, env *environment) int {
	if c.version {
		fmt.Fprintln(env.stdout, versionLine())
		return exitOK
	}
	if c.policy.share && env.hosted == nil {
		if code, ok := c.forward(env); ok {
			return code
		}
	}
	s, ok := begin(&c.config, env, false)
	if !ok {
		return exitError
	}
	defer s.done()
	log, stderr := s.log, s.opts.Stderr
	if w := nothingToStart(s.cfg); w != "" {
		log.Warn(w)
	}
	c.policy.apply(&s.opts)
	if c.policy.lazy {
		s.useCache()
	}
	auditLog := openAuditLog(c.auditLog, c.auditBodies, log) // audit.go
	defer auditLog.Close()                                   // last: after the servers' stop events
	s.opts.Audit = auditLog
	// SIGHUP asks for a reload (on Unix), from here on: one during the start-up does not end
	// the program, it reloads once the servers have started.
	var hup <-chan os.Signal
	if env.hosted == nil {
		ch, stopHup := reloadSignal()
		defer stopHup()
		hup = ch
	} else {
		hup = env.hosted.Reloads // the forwarder's SIGHUP
	}
	agg, err := aggregator.Start(s.ctx, s.cfg, s.opts)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	stopReloads := startReloads(agg, hup, !c.noWatch, log)
	err = agg.Serve(s.ctx, env.stdin, env.stdout)
	var startErr *aggregator.StartupError
	if errors.As(err, &startErr) {
		agg.Close()
		stopReloads()
		fmt.Fprintln(stderr, err)
		return exitError
	}
	log.Debug("shutting down", "reason", shutdownReason(s.ctx, err))
	// Close first: it stops a reload under way (which would otherwise be waited for), and a
	// reload asked for after it does nothing.
	agg.Close()
	stopReloads()
	if err != nil && s.ctx.Err() == nil {
		log.Error("serving the client failed", "error", err)
		return exitError
	}
	return exitOK
}

// forward serves the session through the user's shared process (--share), which hosts it:
// this process reads no configuration, starts no server, and only copies the client's
// messages (internal/shared's forwarder). ok is false when no shared process can be had (on
// Windows, or in a place that is not private): it says why, and the session serves unshared.
func (c *serveCmd) forward(env *environment) (code int, ok bool) {
	if !shared.Supported {
		fmt.Fprintf(env.stderr, "%s: warning: --share is not supported on this system: every session runs its own servers\n", program)
		return 0, false
	}
	// What the program's start-up made and left (a library's schemas compiled at init) is
	// given back to the system: a forwarder runs for as long as its client, once per session.
	debug.FreeOSMemory()
	exe, err := os.Executable()
	if err == nil {
		hup, stopHup := reloadSignal()
		defer stopHup()
		dir, _ := os.Getwd()
		cfgPath, _ := filepath.Abs(c.config.path) // check shows it to sessions started elsewhere
		code, err = shared.Forward(shared.ForwardOptions{
			Options: shared.Options{Executable: exe, Version: buildVersion(), Config: cfgPath, Linger: c.linger},
			Args:    c.handedArgs(), Named: c.config.path, Env: os.Environ(), Dir: dir,
			Stdin: env.stdin, Stdout: env.stdout, Stderr: env.stderr, Reload: hup,
		})
		if err == nil {
			return code, true
		}
	}
	fmt.Fprintf(env.stderr, "%s: warning: --share: %v; this session runs its own servers\n", program, err)
	return 0, false
}

// handedArgs are the flags given on the command line, as the shared process parses them for
// the session it hosts: files as absolute paths (it runs elsewhere).
func (c *serveCmd) handedArgs() []string {
	var args []string
	c.fs.Visit(func(f *flag.Flag) {
		v := f.Value.String()
		if f.Name == "config" || f.Name == "audit-log" {
			if abs, err := filepath.Abs(v); err == nil {
				v = abs
			}
		}
		args = append(args, "-"+f.Name+"="+v)
	})
	return args
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

func shutdownReason(ctx context.Context, err error) string {
	switch {
	case ctx.Err() != nil:
		return "signal"
	case err != nil:
		return err.Error()
	}
	return "end of input"
}
