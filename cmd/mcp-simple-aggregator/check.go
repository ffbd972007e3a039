package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/aggregator"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/shared"
)

// checkCmd starts every server of a configuration as serving does, reports how each started
// and what it serves, then stops them all.
type checkCmd struct {
	config     configFlags
	policy     policyFlags
	json       bool   // print JSON
	cursorName string // the aggregator's entry name in Cursor's configuration
}

func (*checkCmd) name() string     { return "check" }
func (*checkCmd) synopsis() string { return "check --config FILE [flags]" }

func (*checkCmd) help() string {
	return `Starts every server of FILE as serving does, prints a table of how each one
started (status, start-up time, protocol, counts of tools, prompts and resources)
and every tool name, marking the names that clients would reject, then stops them
all. It also lists hidden characters in what the servers tell the model and, when
there is a lock file beside FILE (FILE with .lock.json for .json), each definition
that differs from it; a difference fails the check too. Give it the flags you
serve with: it says what they make of FILE (names, restarts, --lazy, --pinned).
When a shared process of --share runs, it says what that process runs.
`
}

func (*checkCmd) footer() string {
	return `Exit status: 0 when every server is healthy, 1 otherwise, 2 when the command
line is wrong.
`
}

func (c *checkCmd) setFlags(fs *flag.FlagSet) {
	c.config.set(fs)
	c.policy.set(fs)
	fs.BoolVar(&c.json, "json", false, "print the report as JSON")
	fs.StringVar(&c.cursorName, "cursor-name", "aggregator",
		"the `NAME` of the aggregator's entry in Cursor's mcp.json, which Cursor counts with every tool name against its 60 characters")
}

func (c *checkCmd) check(args []string) error {
	return firstError(noArguments(args), c.config.check(), c.policy.check())
}

// run prints the report on stdout, as a table or as JSON, and what the shared process of
// --share runs, when one runs.
func (c *checkCmd) run(_ []string, env *environment) int {
	s, ok := begin(&c.config, env, true)
	if !ok {
		return exitError
	}
	defer s.done()
	c.policy.apply(&s.opts)
	s.opts.CursorEntry = c.cursorName
	if c.policy.lazy {
		s.useCache()
	}
	rep := aggregator.Check(s.ctx, s.cfg, s.opts)
	if s.unusable != nil {
		// Said on stderr already; in the report, each such server failed, with its problems.
		rep.Servers = append(rep.Servers, unusableReports(s.unusable)...)
		// The servers that are left out are not "no server to start".
		rep.Problems = slices.DeleteFunc(rep.Problems, func(p string) bool { return strings.HasSuffix(p, ": "+aggregator.NothingToStart) })
		slices.SortStableFunc(rep.Servers, func(x, y aggregator.ServerReport) int { return strings.Compare(x.Key, y.Key) })
		rep.OK = false
	}
	st := sharedStatus()
	if c.json {
		enc := json.NewEncoder(env.stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		enc.Encode(struct {
			*aggregator.Report
			Shared *shared.Status `json:"shared,omitempty"`
		}{rep, st})
	} else {
		writeReport(env.stdout, rep)
		if st != nil || c.policy.share {
			writeShared(env.stdout, st)
		}
	}
	if !rep.OK {
		return exitError
	}
	return exitOK
}

// unusableReports are the report's entries of the servers that cannot be started as written
// (an unset variable, a "cwd" that is not a directory): each failed, with its problems, a line
// each as the configuration's error says them.
func unusableReports(u *config.UnusableServersError) []aggregator.ServerReport {
	var out []aggregator.ServerReport
	for _, key := range u.Unusable {
		var lines []string
		for _, p := range u.ProblemsOf(key) {
			lines = append(lines, config.Warning{File: u.Err.File, Problem: p}.String())
		}
		out = append(out, aggregator.ServerReport{Key: key, Status: "failed", Error: strings.Join(lines, "\n")})
	}
	return out
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
