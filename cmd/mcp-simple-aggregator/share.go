package main

import (
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/shared"
)

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
