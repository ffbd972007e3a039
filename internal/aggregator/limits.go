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
// The rules on names are apiToolName (the Anthropic and OpenAI APIs) and cursorKeeps below;
// the limits on instructions are instructionLimits.

// toolLimit is a number of tools beyond which a client no longer takes them as they are. A
// hard limit loses tools: the client drops some, or refuses the request or the server. A soft
// one (Soft) only warns, or puts the tools behind a step of its own, and every tool can still
// be called. A client that warns at one number and cuts at another has an entry for each.
type toolLimit struct {
	// Clients are the clients that have the limit, for people.
	Clients string
	Max     int
	Soft    bool
	// Effect says what happens beyond the limit.
	Effect string
	// Source is where the number comes from, and when it was seen: the vendor's own
	// documentation where it says, else reports of the behaviour, each with its date.
	Source string
}

// toolLimits are the known limits on the number of tools, the smallest first. Rechecked on
// 2026-11-25 (issue #27): vendors change these without notice, so each Source says when.
var toolLimits = []toolLimit{
	{
		Clients: "Trae", Max: 40,
		Effect: "drops the tools past 40 (or past 8,000 characters of descriptions), tool by tool",
		Source: "TRAE's documentation, MCP troubleshooting (\"所有 MCP Server 工具的数量上限：40\", all MCP servers' tools at most 40; " +
			"descriptions at most 8,000 characters; past either, tools are dropped one by one), seen 2026-11 in its w3cschool mirror; " +
			"Trae-AI/TRAE#1144 (2025-06, the maintainers: not raised for now; still 40 in comments of 2026-04) and #1344, #1627",
	},
	{
		Clients: "VS Code (Copilot Chat)", Max: 64, Soft: true,
		Effect: "groups the tools past 64 into virtual tools, which the model must open before it can call one",
		Source: "microsoft/vscode#322784 (2026-06-24: grouping starts after START_GROUPING_AFTER_TOOL_COUNT, " +
			"HARD_TOOL_LIMIT / 2 = 64, to keep every request under 128; the threshold is an experiment); " +
			"virtual tools since VS Code 1.103 (2025-08, vscode-copilot-chat#310), the too-many-tools warning removed in " +
			"microsoft/vscode#290581 (2026-01-26); before, a request with more than 128 tools was refused",
	},
	{
		Clients: "Cursor", Max: 80, Soft: true,
		Effect: "warns that more than 80 tools are enabled",
		Source: "Snowflake-Labs/mcp#77 and #79 (2025-09-02: \"Cursor, for example, warns at 80, previously 40\"), " +
			"DaxianLee/cocos-mcp-server#11 (2026-02-06); until mid-2025 Cursor's MCP documentation said " +
			"\"Cursor will only send the first 40 tools to the Agent\"; since 2026-01 it gives the model only the tools' names " +
			"and looks a definition up when needed (cursor.com/blog/dynamic-context-discovery)",
	},
	{
		Clients: "Antigravity", Max: 100,
		Effect: "refuses a server whose tools would bring the enabled tools past 100, so none of its tools is enabled",
		Source: "Antigravity's error \"adding this instance with N enabled tools would exceed max limit of 100\", " +
			"reported in homeassistant-ai/ha-mcp#420 (2026-01-11), youichi-uda/unity-mcp-pro-plugin#1 (2026-03-16), " +
			"hi-godot/godot-ai#170 (2026-04-22) and msrbuilds/elementor-mcp#37 (2026-05-01, fixed with disabledTools); " +
			"50 before 2026 (issue #22)",
	},
	{
		Clients: "Windsurf", Max: 100,
		Effect: "takes at most 100 tools in Cascade across all servers",
		Source: "Windsurf's Cascade MCP documentation (\"a limit of 100 total tools\" Cascade has access to at any given time), " +
			"quoted 2026-06-16 (desplega.ai); 50 in 2025-04 (Zhwt/go-mcp-mysql#3)",
	},
	{
		Clients: "JetBrains Copilot", Max: 128,
		Effect: "refuses every chat request with more than 128 tools",
		Source: "microsoft/copilot-intellij-feedback#1842 (plugin 1.11.2, 2026-06-21; again 2026-07-22: " +
			"\"You may not include more than 128 tools in your request.\")",
	},
	{
		Clients: "Zed", Max: 128,
		Effect: "the model's API refuses an agent request with more than 128 tools",
		Source: "zed-industries/zed#42393 (Zed 0.209 with OpenAI GPT-5, 2025-11-10: \"Invalid 'tools': array too long. " +
			"Expected an array with maximum length 128\"), akbxr/gitlab-mcp-zed#8 (2026-04-06: \"the 128 tools supported by " +
			"Zed's integration\")",
	},
	{
		Clients: "OpenAI API (ChatGPT, Codex and other clients that call it)", Max: 128,
		Effect: "refuses a request with more than 128 functions",
		Source: "OpenAI API reference, chat completions \"tools\" (\"A max of 128 functions are supported\"), " +
			"as SDK references generated from it quote it, seen 2026-11",
	},
	{
		Clients: "Gemini API (clients that call it)", Max: 128,
		Effect: "refuses a request with more than 128 function declarations",
		Source: "Vertex AI API reference (v1beta1), Tool.functionDeclarations (\"Maximum 128 function declarations can be provided\"; " +
			"64 in SDK references of 2025), seen 2026-11",
	},
	{
		Clients: "claude.ai, Claude Desktop (connectors)", Max: 256,
		Effect: "keeps about the first 256 tools across connectors and drops the rest without a word",
		Source: "reports, not documented: anthropics/claude-ai-mcp#587 (2026-07-09, Cowork in Claude Desktop keeps exactly " +
			"the first 256 tools of a connector), anthropics/claude-code#77704 (2026-07-15, claude.ai and Claude Desktop, " +
			"256 in total across connectors); Softeria/ms-365-mcp-server#655 (2026-09-01) saw 269 arrive and suspects a size budget",
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
	// Soft is true when beyond Max the client only warns, or puts the tools behind a step of
	// its own, and loses none.
	Soft   bool   `json:"soft"`
	Over   bool   `json:"over"`
	Effect string `json:"effect"`
}

// toolLimitReports are the known limits, each marked when n tools pass it.
func toolLimitReports(n int) []ToolLimitReport {
	out := make([]ToolLimitReport, 0, len(toolLimits))
	for _, l := range toolLimits {
		out = append(out, ToolLimitReport{Clients: l.Clients, Max: l.Max, Soft: l.Soft, Over: n > l.Max, Effect: l.Effect})
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
