package aggregator

import (
	"fmt"
	"regexp"
	"strings"
)

// The limits that clients put on what a server offers them, in one place, each with where it
// came from. Through an aggregator every server's tools reach the client as one server's, so
// a limit that a user's servers each stay within can be passed by all of them together.
//
// The rules on names are apiToolName (catalog.go: the Anthropic and OpenAI APIs) and
// cursorKeeps below; the limits on instructions are instructionLimits (instructions.go).

// toolLimit is the largest number of tools a client takes; beyond it the client refuses the
// request, drops tools, or works badly.
type toolLimit struct {
	// Clients are the clients that have the limit, for people.
	Clients string
	Max     int
	// Effect says what happens beyond the limit.
	Effect string
	// Source is where the number comes from.
	Source string
}

// toolLimits are the known limits on the number of tools, the smallest first.
var toolLimits = []toolLimit{
	{
		Clients: "Cursor", Max: 40, Effect: "sends only the first 40 tools to the model",
		Source: "Cursor's MCP documentation (\"Cursor currently only sends the first 40 tools to the Agent\"), and its forum",
	},
	{
		Clients: "Antigravity", Max: 50, Effect: "takes at most 50 MCP tools across all servers",
		Source: "Antigravity's MCP documentation; issue #22",
	},
	{
		Clients: "Windsurf", Max: 100, Effect: "takes at most 100 tools in Cascade across all servers",
		Source: "Windsurf's Cascade MCP documentation (a limit of 100 total tools); docs/clients.md",
	},
	{
		Clients: "VS Code (Copilot Chat), JetBrains Copilot", Max: 128, Effect: "refuses a chat request with more than 128 tools",
		Source: "VS Code's agent tools documentation (at most 128 tools per chat request); docs/clients.md for JetBrains",
	},
	{
		Clients: "OpenAI API (ChatGPT, Codex and other clients that call it)", Max: 128, Effect: "refuses a request with more than 128 functions",
		Source: "OpenAI API reference, chat completions \"tools\" (\"A max of 128 functions are supported\")",
	},
	{
		Clients: "Gemini API (clients that call it)", Max: 128, Effect: "refuses a request with more than 128 function declarations",
		Source: "Gemini API function calling documentation (at most 128 function declarations per request)",
	},
}

// cursorChars are the characters Cursor keeps in tool names.
var cursorChars = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// cursorLimit is Cursor's limit on a server entry's name and a tool's name together.
const cursorLimit = 60

// cursorKeeps reports whether Cursor keeps the tool name offered by the server entry named
// entry (the aggregator's, in Cursor's configuration): letters, digits and _, and the two
// names together at most 60 characters (Cursor's MCP documentation and forum; see the
// README's table of clients).
func cursorKeeps(entry, name string) bool {
	return cursorChars.MatchString(name) && len(entry)+len(name) <= cursorLimit
}

// ToolLimitReport is one client's limit on the number of tools, and whether the tools exposed
// pass it.
type ToolLimitReport struct {
	Clients string `json:"clients"`
	Max     int    `json:"max"`
	Over    bool   `json:"over"`
	Effect  string `json:"effect"`
}

// toolLimitReports are the known limits, each marked when n tools pass it.
func toolLimitReports(n int) []ToolLimitReport {
	out := make([]ToolLimitReport, 0, len(toolLimits))
	for _, l := range toolLimits {
		out = append(out, ToolLimitReport{Clients: l.Clients, Max: l.Max, Over: n > l.Max, Effect: l.Effect})
	}
	return out
}

// limitHelp says what brings the number of tools down.
const limitHelp = "to stay within them, start with --tool-search (a search tool and two call tools in place of every tool), " +
	"or hide the tools you do not need with the servers' \"includeTools\", \"excludeTools\" or \"disabledTools\" " +
	"(check lists every tool), or split the servers among several aggregator entries"

// limitWarning is the start-up warning when the n tools exposed pass known limits, naming the
// clients and what helps; "" when they pass none.
func limitWarning(n int) string {
	var over []string
	for _, l := range toolLimits {
		if n > l.Max {
			over = append(over, fmt.Sprintf("%s (%d: %s)", l.Clients, l.Max, l.Effect))
		}
	}
	if len(over) == 0 {
		return ""
	}
	return fmt.Sprintf("%d tools are exposed, more than some clients take: %s; %s", n, strings.Join(over, "; "), limitHelp)
}

// exposedTools is how many tools the client's tools/list holds: every tool of the catalog, or
// with --tool-search the aggregator's own and those of the "alwaysLoad" servers.
func (a *Aggregator) exposedTools(cat *catalog) int {
	if !a.opts.ToolSearch {
		return len(cat.order)
	}
	n := len(ownToolDefs(""))
	for _, e := range cat.order {
		if e.server.cfg.AlwaysLoad {
			n++
		}
	}
	return n
}
