package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"strings"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/aggregator"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/trust"
)

// pinCmd starts the servers of a configuration as check does and writes what they list now
// into the lock file beside it, which serving with --pinned holds them to.
type pinCmd struct {
	config  configFlags
	servers keys // the servers to pin; none for every one
}

func (*pinCmd) name() string     { return "pin" }
func (*pinCmd) synopsis() string { return "pin --config FILE [--server KEY]... [flags]" }

func (*pinCmd) help() string {
	return `Starts the servers of FILE as check does and writes what they list now into the
lock file beside FILE (FILE with .lock.json for .json): every server, or those
named with --server, after printing what differs from the lock it replaces.
Serving with --pinned then withholds every definition that differs from the lock.
`
}

func (*pinCmd) footer() string {
	return `Exit status: 0 when every server was pinned, 1 when one failed to start (the
others are pinned) or none could, 2 when the command line is wrong.
`
}

func (c *pinCmd) setFlags(fs *flag.FlagSet) {
	c.config.set(fs)
	fs.Var(&c.servers, "server", "the `KEY` of a server to pin, the others keeping their entries in the lock (repeat it for several); without it, every server")
}

func (c *pinCmd) check(args []string) error {
	return firstError(noArguments(args), c.config.check())
}

func (c *pinCmd) run(_ []string, env *environment) int {
	s, ok := begin(&c.config, env, false)
	if !ok {
		return exitError
	}
	defer s.done()
	return pin(s.ctx, s.cfg, s.opts, c.servers, env.stdout, s.log)
}

// pin pins the servers of cfg (or those of keys): they are started and checked as check starts
// them (aggregator.Check starts and stops them), what each lists now is pinned in the lock
// file beside the configuration, in place of its entry, and the lock is written. What differs
// from the lock it replaces is printed first, on stdout: it is what the user accepts. A server
// that fails to start keeps its entry; without keys, the entries of servers no longer in the
// configuration are removed. It exits with 1 when a server failed (the lock is written for the
// others) or none could start (nothing is written).
func pin(ctx context.Context, cfg *config.Config, opts aggregator.Options, keys []string, stdout io.Writer, log *slog.Logger) int {
	path := trust.LockPath(cfg.File)
	lock, err := trust.ReadLock(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		lock = trust.NewLock()
	case err != nil && len(keys) > 0:
		log.Error(fmt.Sprintf("%v; pin every server (without --server) to write it anew", err))
		return exitError
	case err != nil:
		log.Warn(fmt.Sprintf("%v; it is written anew", err))
		lock = trust.NewLock()
	}
	chosen, err := pinned(cfg, keys)
	if err != nil {
		log.Error(err.Error())
		return exitError
	}
	rep := aggregator.Check(ctx, chosen, opts)
	code, wrote := exitOK, 0
	var lines []string
	for _, s := range rep.Servers {
		switch {
		case s.Status == "failed":
			code = exitError
			keeps := "it has no entry in the lock"
			if lock.Has(s.Key) {
				keeps = "its entry in the lock is kept"
			}
			lines = append(lines, fmt.Sprintf("%s; %s", s.Error, keeps))
		case s.Definitions != nil:
			lines = append(lines, acceptedLines(lock, s.Definitions)...)
			lock.Set(s.Definitions)
			wrote++
		}
	}
	if len(keys) == 0 {
		for _, key := range lock.Keys() {
			if !configured(cfg, key) {
				lock.Delete(key)
				lines = append(lines, fmt.Sprintf("server %q is no longer in %s: its entry is removed", key, cfg.File))
			}
		}
	}
	if wrote == 0 {
		lines = append(lines, rep.Problems...) // a configuration loop, say
		lines = append(lines, fmt.Sprintf("No server started: %s is left as it was.", path))
		fmt.Fprintln(stdout, strings.Join(lines, "\n"))
		return exitError
	}
	fmt.Fprintln(stdout, strings.Join(lines, "\n"))
	if err := trust.WriteLock(path, lock, trust.LockPerm(cfg.File)); err != nil {
		log.Error(err.Error())
		return exitError
	}
	fmt.Fprintf(stdout, "Pinned %d of %d servers in %s.\n", wrote, len(chosen.Servers), path)
	return code
}

// pinned is cfg with only the servers of keys (every server when there are none); a key that
// is not a server of cfg, or one that is not started (disabled, remote), is an error.
func pinned(cfg *config.Config, keys []string) (*config.Config, error) {
	if len(keys) == 0 {
		return cfg, nil
	}
	out := &config.Config{File: cfg.File}
	for _, key := range keys {
		i := slices.IndexFunc(cfg.Servers, func(s config.Server) bool { return s.Key == key })
		if i >= 0 {
			if !slices.ContainsFunc(out.Servers, func(s config.Server) bool { return s.Key == key }) {
				out.Servers = append(out.Servers, cfg.Servers[i])
			}
			continue
		}
		if j := slices.IndexFunc(cfg.Skipped, func(s config.Skipped) bool { return s.Key == key }); j >= 0 {
			return nil, fmt.Errorf("%s: server %q is not started (%s), so it cannot be pinned", cfg.File, key, cfg.Skipped[j].Reason)
		}
		var all []string
		for _, s := range cfg.Servers {
			all = append(all, fmt.Sprintf("%q", s.Key))
		}
		return nil, fmt.Errorf("%s: there is no server %q (--server); its servers are %s", cfg.File, key, strings.Join(all, ", "))
	}
	slices.SortFunc(out.Servers, func(x, y config.Server) int { return strings.Compare(x.Key, y.Key) })
	return out, nil
}

// configured reports whether cfg has the server key: started, or disabled (a disabled server
// keeps its pins for when it is enabled again; a remote one has none).
func configured(cfg *config.Config, key string) bool {
	return slices.ContainsFunc(cfg.Servers, func(s config.Server) bool { return s.Key == key }) ||
		slices.ContainsFunc(cfg.Skipped, func(s config.Skipped) bool { return s.Key == key && !s.Remote })
}

// acceptedLines are the lines that say what pinning def changes in lock: each difference, or one
// line for a server pinned for the first time, or that it is as pinned.
func acceptedLines(lock *trust.Lock, def *trust.Server) []string {
	key := def.Key()
	diffs := lock.Compare(def)
	switch {
	case !lock.Has(key):
		return []string{fmt.Sprintf("server %q is pinned for the first time: %s", key, counted(diffs))}
	case len(diffs) == 0:
		return []string{fmt.Sprintf("server %q is as pinned", key)}
	}
	lines := make([]string, len(diffs))
	for i, d := range diffs {
		lines[i] = d.String()
	}
	return lines
}

// counted says how many definitions of each kind diffs name: `13 tools, 1 prompt, the
// instructions`; "nothing" for none.
func counted(diffs []trust.Difference) string {
	var counts [trust.Instructions + 1]int
	for _, d := range diffs {
		counts[d.Kind]++
	}
	var parts []string
	for k, n := range counts {
		switch {
		case n == 0 || trust.Kind(k) == trust.Resource: // resources are not pinned
		case trust.Kind(k) == trust.Instructions:
			parts = append(parts, "the instructions")
		case n == 1:
			parts = append(parts, "1 "+trust.Kind(k).String())
		default:
			parts = append(parts, fmt.Sprintf("%d %ss", n, trust.Kind(k)))
		}
	}
	if len(parts) == 0 {
		return "nothing (it lists no tool, prompt or resource template, and gives no instructions)"
	}
	return strings.Join(parts, ", ")
}
