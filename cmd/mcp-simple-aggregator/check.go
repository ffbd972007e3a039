package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/aggregator"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/shared"
)

// runCheck runs the check command: the report goes to stdout, as a table or as JSON.
// It also says what the shared process of --share runs, when one runs.
func runCheck(ctx context.Context, cfg *config.Config, opts aggregator.Options, cl options, stdout io.Writer) int {
	rep := aggregator.Check(ctx, cfg, opts)
	st := sharedStatus()
	if cl.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		enc.Encode(struct {
			*aggregator.Report
			Shared *shared.Status `json:"shared,omitempty"`
		}{rep, st})
	} else {
		writeReport(stdout, rep)
		if st != nil || cl.share {
			writeShared(stdout, st)
		}
	}
	if !rep.OK {
		return exitError
	}
	return exitOK
}

func writeReport(w io.Writer, rep *aggregator.Report) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tSTATUS\tSTART-UP\tPROTOCOL\tERA\tTOOLS\tPROMPTS\tRESOURCES\tHIDDEN")
	for _, s := range rep.Servers {
		switch s.Status {
		case "ok":
			fmt.Fprintf(tw, "%s\tok\t%dms\t%s\t%s\t%d\t%d\t%d\t%d\n", s.Key, s.StartupMS, s.Protocol, s.Era, s.Tools, s.Prompts, s.Resources, s.HiddenTools)
		case "failed":
			fmt.Fprintf(tw, "%s\tfailed\t%dms\t-\t-\t-\t-\t-\t-\n", s.Key, s.StartupMS)
		default:
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\t-\t-\t-\n", s.Key, s.Status)
		}
	}
	tw.Flush()
	var failures, notes []string
	for _, s := range rep.Servers {
		switch s.Status {
		case "failed":
			failures = append(failures, s.Error)
		case "disabled", "remote":
			notes = append(notes, fmt.Sprintf("server %q is not started: %s", s.Key, s.Reason))
		}
		if s.LoginShellPath != "" {
			notes = append(notes, fmt.Sprintf("server %q: its command %q is not in the aggregator's PATH; it was found in the login shell's PATH, which the server runs with: %s", s.Key, s.Command, s.LoginShellPath))
		}
		notes = append(notes, s.UnmatchedPatterns...)
		if c := s.Cached; c != nil {
			if c.Clients == 0 {
				notes = append(notes, fmt.Sprintf("server %q: its catalog is not in the cache: it starts with the next session, and is cached then", s.Key))
			} else {
				notes = append(notes, fmt.Sprintf("server %q: its catalog is in the cache (for %d client(s); written %v ago): with --lazy it starts on its first request", s.Key, c.Clients, time.Duration(c.AgeSeconds)*time.Second))
			}
		}
		for _, w := range s.Withheld {
			notes = append(notes, w.Line)
		}
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\n%s\n", strings.Join(notes, "\n"))
	}
	failures = append(failures, rep.Problems...)
	if len(failures) > 0 {
		fmt.Fprintf(w, "\n%s\n", strings.Join(failures, "\n"))
	}
	hidden, differences := writeTrust(w, rep) // checktrust.go
	writeInstructions(w, rep)
	if len(rep.Tools) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TOOL\tANTHROPIC/OPENAI\tCURSOR")
		for _, t := range rep.Tools {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, accepted(t.API), accepted(t.Cursor))
		}
		tw.Flush()
	}
	writeToolLimits(w, rep)
	for _, a := range rep.Advice {
		fmt.Fprintf(w, "\n%s\n", a)
	}
	healthy, started, skipped, withheld := 0, 0, 0, 0
	for _, s := range rep.Servers {
		withheld += len(s.Withheld)
		switch s.Status {
		case "ok":
			healthy++
			started++
		case "failed":
			started++
		default:
			skipped++
		}
	}
	fmt.Fprintf(w, "\n%d of %d servers healthy, %d tools", healthy, started, len(rep.Tools))
	if unpinned := pinnedWithheld(rep); unpinned > 0 {
		withheld -= unpinned
		fmt.Fprintf(w, "; %d definitions withheld by the lock (--pinned)", unpinned)
	}
	if withheld > 0 {
		fmt.Fprintf(w, "; %d definitions withheld (clients would reject every list they are in)", withheld)
	}
	if differences > 0 {
		fmt.Fprintf(w, "; %d definitions differ from the lock", differences)
	}
	if hidden > 0 {
		fmt.Fprintf(w, "; %d runs of hidden characters", hidden)
	}
	if skipped > 0 {
		fmt.Fprintf(w, "; %d entries not started (disabled or remote)", skipped)
	}
	fmt.Fprintln(w, ".")
	fmt.Fprintf(w, "Serving, %s.\n", rep.Restarts)
	fmt.Fprintf(w, "Serving, %s.\n", rep.ByUse)
}

// writeToolLimits prints, when the tools pass a client's limit on their number, a line per
// client with a known limit, and whether this file's tools pass it.
func writeToolLimits(w io.Writer, rep *aggregator.Report) {
	over := false
	for _, l := range rep.ToolLimits {
		over = over || l.Over
	}
	if !over {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "CLIENT\tMAX TOOLS\t%d TOOLS\n", len(rep.Tools))
	for _, l := range rep.ToolLimits {
		verdict := "ok"
		if l.Over {
			verdict = fmt.Sprintf("over by %d: %s", len(rep.Tools)-l.Max, l.Effect)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", l.Clients, l.Max, verdict)
	}
	tw.Flush()
}

func accepted(ok bool) string {
	if ok {
		return "ok"
	}
	return "rejected"
}

// writeInstructions reports the servers' instructions: each one's size, and what the combined
// text comes to for a client that does not cut it and for Claude Code, which cuts each
// server's instructions at 2,048 characters.
func writeInstructions(w io.Writer, rep *aggregator.Report) {
	if rep.Instructions == "" {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTRUCTIONS\tCHARACTERS")
	for _, s := range rep.Servers {
		if s.InstructionsChars > 0 {
			fmt.Fprintf(tw, "%s\t%d\n", s.Key, s.InstructionsChars)
		}
	}
	tw.Flush()
	full, fitted := utf16Len(rep.Instructions), utf16Len(rep.InstructionsClaudeCode)
	fmt.Fprintf(w, "The client gets them combined: %d characters", full)
	if fitted < full {
		fmt.Fprintf(w, "; Claude Code, which keeps 2048, gets %d, with the longest texts cut (each server's full text stays readable as a resource)", fitted)
	}
	fmt.Fprintln(w, ". --json shows both texts.")
}

// utf16Len counts characters as JavaScript does.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r > 0xFFFF {
			n++
		}
	}
	return n
}
