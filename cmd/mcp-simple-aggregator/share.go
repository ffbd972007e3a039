package main

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/aggregator"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/child"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/shared"
)

// joinShared makes the session share its servers (--share): its servers are started by the
// shared process of this build (internal/shared), which it starts when none runs. When that
// cannot be (Windows, or a place that is not private), it says why, and the session serves
// unshared: nil.
func joinShared(linger time.Duration, configFile string, aggOpts *aggregator.Options, log *slog.Logger) *shared.Session {
	if !shared.Supported {
		log.Warn("--share is not supported on this system: every session runs its own servers")
		return nil
	}
	if abs, err := filepath.Abs(configFile); err == nil {
		configFile = abs // check shows it to sessions started elsewhere
	}
	exe, err := os.Executable()
	if err == nil {
		var sess *shared.Session
		sess, err = shared.Join(shared.Options{Executable: exe, Version: buildVersion(), Config: configFile, Linger: linger, Log: log})
		if err == nil {
			aggOpts.Start = func(spec child.Spec, client json.RawMessage, stderr io.Writer) (aggregator.Process, error) {
				a, err := sess.Start(spec, client, stderr)
				if err != nil {
					return nil, err
				}
				return a, nil
			}
			aggOpts.StartWithClient = true
			log.Debug("sharing the servers", "socket", sess.Socket())
			return sess
		}
	}
	log.Warn("--share: " + err.Error() + "; this session runs its own servers")
	return nil
}

// sharedStatus is what the shared process of this build runs, for check; nil when none runs
// (or sharing is not supported here).
func sharedStatus() *shared.Status {
	if !shared.Supported {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	sess, err := shared.Join(shared.Options{Executable: exe, Version: buildVersion()})
	if err != nil {
		return nil
	}
	st, ok, err := sess.Status()
	if !ok || err != nil {
		return nil
	}
	return &st
}

// writeShared prints what the shared process runs.
func writeShared(w io.Writer, st *shared.Status) {
	if st == nil {
		fmt.Fprintln(w, "No shared process runs (--share starts one with the first session).")
		return
	}
	fmt.Fprintf(w, "\nShared process %d (%s): %s, %s.\n", st.PID, st.Socket, count(len(st.Sessions), "session", "sessions"), count(len(st.Servers), "server", "servers"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range st.Sessions {
		fmt.Fprintf(tw, "  session\t%d\t%s\n", s.PID, s.Config)
	}
	for _, s := range st.Servers {
		state := count(s.Sessions, "session", "sessions")
		if s.Lingering {
			state = "lingering (no session uses it)"
		}
		if s.Apart != "" {
			state += "; not shared with the other process of its entry: " + s.Apart
		}
		fmt.Fprintf(tw, "  server\t%d\t%v\t%s\t%s\t%s\n", s.PID, s.Keys, s.Command, s.Era, state)
	}
	tw.Flush()
}
