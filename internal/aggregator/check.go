package aggregator

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/catalogcache"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/mcpschema"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/trust"
)

// Report is what Check found out about a configuration.
type Report struct {
	File    string         `json:"config"`
	OK      bool           `json:"ok"`
	Servers []ServerReport `json:"servers"`
	Tools   []ToolReport   `json:"tools"`
	// Problems are failures that belong to no single server (colliding names).
	Problems []string `json:"problems,omitempty"`
	// Advice says how to make rejected names acceptable, and how to stay within the clients'
	// limits on the number of tools.
	Advice []string `json:"advice,omitempty"`
	// ToolLimits are the known limits of clients on the number of tools (limits.go), each
	// marked when the tools exposed pass it.
	ToolLimits []ToolLimitReport `json:"toolLimits"`
	// Instructions is what a client that does not cut them gets as the aggregator's
	// instructions; InstructionsClaudeCode what Claude Code gets (fitted to its limit).
	Instructions           string `json:"instructions,omitempty"`
	InstructionsClaudeCode string `json:"instructionsClaudeCode,omitempty"`
	// Restarts says what happens to a server that crashes while serving.
	Restarts string `json:"restarts"`
	// ByUse says when servers start and stop (--lazy, --idle-stop).
	ByUse string `json:"byUse"`
	// LockFile is the lock file the servers were compared with (checktrust.go); "" when
	// there is none. LockOnly are the keys it has entries for that the configuration no
	// longer has.
	LockFile string   `json:"lockFile,omitempty"`
	LockOnly []string `json:"lockOnly,omitempty"`
}

// NothingToStart is the report's problem, after the file's name, when the configuration has no
// server to start.
const NothingToStart = "there is no server to start (every entry is disabled or remote, or there is none)"

// ServerReport is one entry of the configuration: how its server started, or why it was not.
type ServerReport struct {
	Key     string `json:"key"`
	Command string `json:"command,omitempty"`
	// Status is "ok", "failed", "disabled" or "remote" (an entry that is not a stdio server,
	// left out).
	Status string `json:"status"`
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
	// Reason says why a disabled or remote entry is not started.
	Reason    string `json:"reason,omitempty"`
	StartupMS int64  `json:"startupMs"`
	Protocol  string `json:"protocol,omitempty"`
	// Era is the protocol era it is spoken to in: "modern" (it answered the server/discover
	// probe) or "legacy" (initialize).
	Era string `json:"era,omitempty"`
	// Tools, Prompts and Resources count what is served: after the filters, without the
	// withheld definitions.
	Tools     int `json:"tools"`
	Prompts   int `json:"prompts"`
	Resources int `json:"resources"`
	// HiddenTools counts the tools its filters ("includeTools", "excludeTools",
	// "disabledTools") hide; UnmatchedPatterns are the filter patterns that match none of its
	// tools (a typo hides nothing, or keeps what it meant to hide).
	HiddenTools       int      `json:"hiddenTools"`
	UnmatchedPatterns []string `json:"unmatchedPatterns,omitempty"`
	// InstructionsChars is the size of its instructions, in characters (UTF-16 code units,
	// as the clients that cut them count).
	InstructionsChars int `json:"instructionsChars"`
	// LoginShellPath is the PATH of the user's login shell when the command was not in the
	// aggregator's PATH and was found there: the server runs with it.
	LoginShellPath string `json:"loginShellPath,omitempty"`
	// Withheld are the definitions it lists that break the MCP schema, which are not served
	// (a server with some is still healthy), and with --pinned those that differ from the lock.
	Withheld []WithheldReport `json:"withheld,omitempty"`
	// HiddenCharacters are the hidden characters in what it tells the model (but in the tools
	// its filters hide); Lock are its definitions that differ from the lock file, member by
	// member (every one, "unpinned", when the lock has no entry for it). See checktrust.go.
	HiddenCharacters []trust.Finding    `json:"hiddenCharacters,omitempty"`
	Lock             []trust.Difference `json:"lock,omitempty"`
	// Definitions are what its lists tell the model: what pin pins.
	Definitions *trust.Server `json:"-"`
	// Cached says what the catalog cache holds for it (with --lazy): the entries written for
	// its entry, one per client it was started for, and the newest's age.
	Cached *CachedReport `json:"cached,omitempty"`
}

// CachedReport is what the catalog cache holds for a server's entry.
type CachedReport struct {
	// Clients is how many clients its catalog is cached for (0: none; it starts with the
	// session the first time).
	Clients int `json:"clients"`
	// Written is when the newest entry was written; AgeSeconds how long ago.
	Written    time.Time `json:"written,omitzero"`
	AgeSeconds int64     `json:"ageSeconds,omitempty"`
}

// WithheldReport is one withheld definition and why.
type WithheldReport struct {
	// Kind is "tool", "prompt", "resource" or "resource template".
	Kind string `json:"kind"`
	// Name is the tool's or prompt's name, the resource's URI or the template's URI
	// template; "" when it has none.
	Name string `json:"name,omitempty"`
	// Line is the message that names it on stderr and to the client.
	Line string `json:"message"`
	// Violations are the rules of the MCP schema it breaks; Difference is (with --pinned)
	// how it differs from the lock.
	Violations []mcpschema.Violation `json:"violations,omitempty"`
	Difference *trust.Difference     `json:"difference,omitempty"`
}

// ToolReport is one exposed tool and which clients accept its name.
type ToolReport struct {
	Name   string `json:"name"`
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// API reports whether the Anthropic and OpenAI APIs accept the name (Claude Desktop,
	// claude.ai, ChatGPT, and every client that passes names to them).
	API bool `json:"anthropicOpenAI"`
	// Cursor reports whether Cursor keeps the tool (see cursorKeeps).
	Cursor bool `json:"cursor"`
}

// Check starts every server of cfg in parallel, exactly as serving does, reports how each one
// fared, what it offers and what its filters hide, lists the entries that are not started,
// and stops them all. Unlike Start it does not stop at a failure: every server is reported.
// The report is OK when there were servers to start and all of them did, and (when there is a
// lock file) none differs from the lock (checktrust.go).
func Check(ctx context.Context, cfg *config.Config, opts Options) *Report {
	a, err := newAggregator(ctx, cfg, opts)
	rep := &Report{File: cfg.File}
	if err != nil {
		rep.Problems = append(rep.Problems, err.Error())
		return rep
	}
	policy, byUse := a.restartPolicy(), a.byUsePolicy()
	a.opts.MaxRestarts = 0 // check reports how the servers start: one that crashes meanwhile is not restarted
	for _, res := range a.spawnAll(cfg.Servers) {
		a.enroll(res)
	}
	defer a.Close()
	// By key, as the configuration's entries are sorted.
	results := map[string]startResult{}
	for _, res := range a.initAll(ctx, a.defaultInit()) {
		results[res.cfg.Key] = res
	}
	var servers []*server
	rep.Restarts, rep.ByUse = policy, byUse
	rep.OK = len(cfg.Servers) > 0
	if !rep.OK {
		rep.Problems = append(rep.Problems, cfg.File+": "+NothingToStart)
	}
	lock := a.checkLock(rep, cfg) // checktrust.go
	for _, sc := range cfg.Servers {
		res := results[sc.Key]
		r := ServerReport{Key: sc.Key, Command: sc.Command, Status: "ok", OK: true, StartupMS: res.took.Milliseconds()}
		if s := res.srv; s != nil {
			servers = append(servers, s)
			names := toolNames(s)
			for _, n := range names {
				if _, hidden := s.filter.Hidden(n); hidden {
					r.HiddenTools++
				}
			}
			for _, p := range s.filter.Unmatched(names) {
				r.UnmatchedPatterns = append(r.UnmatchedPatterns, config.Warning{File: cfg.File, Problem: p}.String())
			}
			// The era of the client check stands for: the one of the protocol it declares.
			withheld := screen(s, era.Of(era.Latest(era.Legacy)))
			for k := range numKinds {
				for i := range s.lists[k] {
					if w, ok := withheld[k][i]; ok {
						r.Withheld = append(r.Withheld, w.report())
					}
				}
			}
			checkTrust(rep, &r, s, withheld, lock) // checktrust.go
			r.Tools = len(names) - r.HiddenTools - len(withheld[kindTools])
			r.Prompts = len(s.lists[kindPrompts]) - len(withheld[kindPrompts])
			r.Resources, r.Protocol, r.Era = len(s.lists[kindResources])-len(withheld[kindResources]), s.protocol, s.side().era().String()
			r.InstructionsChars = length(strings.TrimSpace(s.instructions))
			r.LoginShellPath = s.proc.LoginShellPath()
		} else {
			r.Status, r.OK, r.Error = "failed", false, res.failure("could not start")
			rep.OK = false
		}
		if opts.Cache != nil {
			r.Cached = a.cachedReport(sc)
		}
		rep.Servers = append(rep.Servers, r)
	}
	for _, sk := range cfg.Skipped {
		status := "disabled"
		if sk.Remote {
			status = "remote"
		}
		rep.Servers = append(rep.Servers, ServerReport{Key: sk.Key, Status: status, Reason: sk.Reason})
	}
	slices.SortStableFunc(rep.Servers, func(x, y ServerReport) int { return strings.Compare(x.Key, y.Key) })
	cat, err := buildCatalog(servers, a.opts.Separator)
	if err != nil {
		rep.OK = false
		rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %v", cfg.File, err))
		return rep
	}
	rep.Instructions = combineInstructions(cat.withInstructions(), a.opts.Separator, 0)
	rep.InstructionsClaudeCode = combineInstructions(cat.withInstructions(), a.opts.Separator, instructionLimits["claude-code"])
	rep.Advice = append(rep.Advice, cat.warnings...)
	if w := nameWarning(cat, a.opts.Separator); w != "" {
		rep.Advice = append(rep.Advice, w)
	}
	entry := a.opts.CursorEntry
	if entry == "" {
		entry = "aggregator"
	}
	cursorBad := 0
	for _, t := range cat.order {
		if !cursorKeeps(entry, t.exposed) {
			cursorBad++
		}
	}
	if cursorBad > 0 {
		rep.Advice = append(rep.Advice, fmt.Sprintf("%d tool names would be dropped by Cursor, which keeps only letters, digits and _, "+
			"and at most %d characters for its server entry's name and the tool's together (%d are left here for an entry named %q; "+
			"give yours with --cursor-name); to avoid it, use --separator __ and short server keys of letters, digits and _",
			cursorBad, cursorLimit, max(cursorLimit-len(entry), 0), entry))
	}
	rep.ToolLimits = toolLimitReports(len(cat.order))
	if w := limitWarning(len(cat.order)); w != "" {
		rep.Advice = append(rep.Advice, w)
	}
	for _, t := range cat.order {
		rep.Tools = append(rep.Tools, ToolReport{
			Name:   t.exposed,
			Server: t.server.key,
			Tool:   t.original,
			API:    apiToolName(t.exposed),
			Cursor: cursorKeeps(entry, t.exposed),
		})
	}
	return rep
}

// byUsePolicy says when servers start and stop.
func (a *Aggregator) byUsePolicy() string {
	var parts []string
	if a.opts.Lazy {
		parts = append(parts, "a server whose catalog is in the cache starts on its first request (--lazy), the others with the session")
	} else {
		parts = append(parts, "every server starts with the session")
	}
	if a.opts.IdleStop > 0 {
		parts = append(parts, fmt.Sprintf("a server without a request for %v is stopped, and started again by its next request (--idle-stop): a server that keeps state in memory (a browser, an in-memory store) loses it", a.opts.IdleStop))
	}
	return strings.Join(parts, "; ")
}

// cachedReport is what the catalog cache holds for the entry sc.
func (a *Aggregator) cachedReport(sc config.Server) *CachedReport {
	entries := a.opts.Cache.Of(catalogcache.Server{Command: sc.Command, Args: sc.Args, Env: sc.Env, Dir: a.dirOf(sc)})
	rep := &CachedReport{Clients: len(entries)}
	if len(entries) > 0 {
		rep.Written = entries[0].Written
		rep.AgeSeconds = int64(time.Since(entries[0].Written).Seconds())
	}
	return rep
}

// restartPolicy says what happens to a server that crashes while serving.
func (a *Aggregator) restartPolicy() string {
	if a.opts.MaxRestarts == 0 {
		return "a server that crashes stays down until a reload (--max-restarts 0)"
	}
	return fmt.Sprintf("a server that crashes is restarted up to %d times in a row, the first after %v, doubling to %v (--max-restarts, --restart-delay)",
		a.opts.MaxRestarts, a.opts.RestartDelay, maxBackoff)
}
