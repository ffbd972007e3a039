package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/aggregator"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/catalogcache"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/child"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/logging"
)

// startup is what serving, check and pin share before they start servers: the log on stderr,
// the configuration read and checked, the watchdog, and the signals that end the command.
type startup struct {
	ctx  context.Context
	log  *slog.Logger
	cfg  *config.Config
	opts aggregator.Options // with what the configuration flags set
	done func()             // ends what begin started; call it last
	// unusable, with partial, are the servers of the file that cannot be started as written
	// (an unset variable): cfg holds the others.
	unusable *config.UnusableServersError
}

// begin reads the configuration of f and starts what the servers need. A configuration that
// cannot be used is said on stderr: ok is false, and the command ends with exitError. With
// partial (check), a file some of whose servers cannot be started as written (every unset
// variable is said, at once) goes on with the others, and s.unusable says which.
func begin(f *configFlags, env *environment, partial bool) (s *startup, ok bool) {
	level := slog.LevelWarn
	if f.debug {
		level = slog.LevelDebug
	}
	errw := logging.NewWriter(env.stderr, 4096)
	log := logging.New(errw, level)
	if env.hosted == nil {
		// What the login shell says of its PATH, with --debug: the program's own log (the
		// shared process keeps its own, for the servers of every session).
		child.SetLog(log)
	}
	var undo []func()
	s = &startup{log: log, done: func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}}
	undo = append(undo, func() { errw.Close(2 * time.Second) })

	lookup := os.LookupEnv
	if env.hosted != nil {
		lookup = config.EnvLookup(env.hosted.Env)
	}
	// A hosted session reads the file by its absolute path, and says it as unshared: as the
	// client's command line names it.
	said := func(text string) string { return text }
	if h := env.hosted; h != nil && h.Named != h.Config {
		said = func(text string) string { return strings.ReplaceAll(text, h.Config+":", h.Named+":") }
	}
	cfg, warnings, err := config.Load(f.path, lookup)
	for _, w := range warnings {
		log.Warn(said(w.String()))
	}
	if env.hosted != nil && err != nil {
		err = errors.New(said(err.Error()))
	}
	if errors.As(err, &s.unusable) && partial {
		fmt.Fprintln(errw, err)
		cfg, err = s.unusable.Usable, nil
	}
	if err != nil {
		fmt.Fprintln(errw, err)
		s.done()
		return nil, false
	}
	log.Debug("configuration loaded", "file", cfg.File, "servers", len(cfg.Servers))
	s.cfg = cfg
	s.opts = f.options()
	s.opts.Log, s.opts.Stderr = log, errw
	if h := env.hosted; h != nil {
		// The shared process runs the servers, under its own watchdog, and ends the session
		// with ctx.
		s.ctx = env.ctx
		s.opts.Env, s.opts.Dir = h.Env, h.Dir
		sess := h.Session(log, s.opts.MaxMessageSize)
		s.opts.Start = func(spec child.Spec, client json.RawMessage, stderr io.Writer) (aggregator.Process, error) {
			a, err := sess.Start(spec, client, stderr)
			if err != nil {
				return nil, err
			}
			return a, nil
		}
		s.opts.Hosted = true
		s.opts.IDSpace = sess.IDSpace() // the requests of every session meet at a shared server as written
		return s, true
	}

	// The watchdog ends the servers' process groups if this process is killed before it can.
	if exe, err := os.Executable(); err != nil {
		log.Warn("cannot start the watchdog: servers may outlive a SIGKILL of the aggregator", "error", err)
	} else if err := child.StartWatchdog(exe, env.stderr); err != nil {
		log.Warn("cannot start the watchdog: servers may outlive a SIGKILL of the aggregator", "error", err)
	}
	undo = append(undo, child.StopWatchdog)

	// SIGINT and SIGTERM end the command like the end of stdin: every child is stopped.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	undo = append(undo, stop)
	s.ctx = ctx
	return s, true
}

// useCache sets the options of --lazy: the catalog cache in the user's cache directory. The
// cache is never the reason a server is missing: without it, every server starts with the
// session.
func (s *startup) useCache() {
	cache, err := openCache()
	if err != nil {
		s.log.Warn("--lazy: the catalog cache cannot be used, and every server starts with the session: " + err.Error())
		return
	}
	if w := cache.Warning(); w != "" {
		s.log.Warn(w)
	}
	s.opts.Lazy, s.opts.Cache = true, cache
}

// openCache opens the catalog cache in the user's cache directory.
func openCache() (*catalogcache.Cache, error) {
	dir, err := catalogcache.Default()
	if err != nil {
		return nil, err
	}
	return catalogcache.Open(dir)
}
