package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/shared"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

const usageText = `Usage: mcp-simple-aggregator --config FILE [flags]
       mcp-simple-aggregator check --config FILE [--json] [--cursor-name NAME] [flags]
       mcp-simple-aggregator pin --config FILE [--server KEY]... [flags]
       mcp-simple-aggregator cache clear

Starts every MCP server listed in FILE as a child process and serves all of their
tools to one MCP client over standard input and output, each tool named after its
server's key: the tool "search_code" of the server "sourcebot" becomes
"sourcebot:search_code".

"check" starts every server of FILE as serving does, prints a table of how each
one started (status, start-up time, protocol, counts of tools, prompts and
resources) and every tool name, marking the names that clients would reject, then
stops them all. It exits with 0 when every server is healthy, 1 otherwise. It also
lists hidden characters in what the servers tell the model, and when there is a
lock file beside FILE (FILE with .lock.json for .json), each definition that
differs from it; a difference fails the check too.

"pin" starts the servers as check does and writes what they list now into the
lock file (every server, or those named with --server), after printing what
differs from the lock it replaces. Serving with --pinned then withholds every
definition that differs from the lock.

"cache clear" removes the catalogs --lazy keeps in the user's cache directory:
every server then starts with its next session once, and is cached again.

Flags:
%s
Example FILE (the format of claude_desktop_config.json and .mcp.json):

  {
    "mcpServers": {
      "memory": {
        "command": "npx",
        "args": ["-y", "@modelcontextprotocol/server-memory"]
      },
      "github": {
        "command": "github-mcp-server",
        "args": ["stdio"],
        "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}
      }
    }
  }

"$VAR", "${VAR}" and "${VAR:-default}" in "command", "args" and "env" values are
replaced by environment variables; "$$" is a literal "$". A variable that is not
set stops the start-up with its name. VS Code's own format ("servers") is read
too, with the variables VS Code and Cursor define: ${env:NAME}, ${userHome},
${workspaceFolder}, ${workspaceFolderBasename}, ${pathSeparator} and ${/}.

Clients that call the Anthropic or OpenAI APIs (Claude Desktop, Cursor, ...)
reject ":" in tool names: use --separator __ for them.

Exit status: 0 after a clean shutdown, 1 when the configuration or a server
fails to start, 2 when the command line is wrong.
`

// options are the parsed command line.
type options struct {
	configPath     string
	separator      string
	startupTimeout time.Duration
	pingInterval   time.Duration
	probeTimeout   time.Duration
	pingFailures   int
	maxRestarts    int
	restartDelay   time.Duration
	maxMessageSize int
	debug          bool
	noWatch        bool          // do not reload when the files of the configuration change
	toolSearch     bool          // list search and call tools instead of every tool
	lazy           bool          // start a server whose catalog is cached on its first request
	idleStop       time.Duration // stop a server with no request for this long
	share          bool          // run the servers in the shared process of every session
	linger         time.Duration // how long the shared process keeps a server no session uses
	pinned         bool          // withhold what differs from the lock file
	auditLog       string        // the audit log's file; "" for none
	auditBodies    bool          // the audit log records arguments and results
	check          bool          // the check command
	json           bool          // check: print JSON
	cursorName     string        // check: the aggregator's entry name in Cursor's configuration
	pin            bool          // the pin command
	servers        keys          // pin: the servers to pin; none for every one
}

// keys are the values of a flag given once per key (pin --server).
type keys []string

func (k *keys) String() string { return strings.Join(*k, ",") }

func (k *keys) Set(v string) error {
	*k = append(*k, v)
	return nil
}

// parseFlags parses the command line of command ("" for serving, "check" or "pin"). When
// done is true the program ends with code: after --help or --version (printed on stdout, as
// asked for) or after a usage error (on stderr).
func parseFlags(args []string, command string, stdout, stderr io.Writer) (opts options, code int, done bool) {
	opts.check, opts.pin = command == "check", command == "pin"
	check := opts.check
	fs := flag.NewFlagSet("mcp-simple-aggregator", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&opts.configPath, "config", "", "the configuration `FILE` (required)")
	fs.StringVar(&opts.separator, "separator", ":", "the text between a server's key and its tool names, such as `__`")
	fs.DurationVar(&opts.startupTimeout, "startup-timeout", 30*time.Second,
		"how long each server may take to start and list its tools, such as `60s`")
	fs.DurationVar(&opts.probeTimeout, "probe-timeout", 2*time.Second,
		"how long each server may take to answer the server/discover probe before it is spoken to in the legacy era (initialize)")
	fs.DurationVar(&opts.pingInterval, "ping-interval", 30*time.Second,
		"how often each server is pinged; 0 turns pings off")
	fs.IntVar(&opts.pingFailures, "ping-failures", 3,
		"how many pings in a row a server may leave unanswered (each within the interval) before it is treated as crashed")
	fs.IntVar(&opts.maxRestarts, "max-restarts", 5,
		"how many times in a row a server that crashed (exited, closed its output, or failed its pings) is restarted before it stays down until a reload; 0 turns restarts off")
	fs.DurationVar(&opts.restartDelay, "restart-delay", 500*time.Millisecond,
		"the wait before a crashed server's first restart; it doubles with each try in a row, up to 30s")
	fs.IntVar(&opts.maxMessageSize, "max-message-size", stdio.DefaultMaxMessageSize,
		"the largest message, in `bytes`, accepted from the client or a server")
	fs.BoolVar(&opts.debug, "debug", false, "also log lifecycle events and traffic summaries on stderr")
	fs.BoolVar(&opts.noWatch, "no-watch", false,
		"do not reload when the configuration file or a server's envFile changes (SIGHUP still reloads)")
	fs.BoolVar(&opts.toolSearch, "tool-search", false,
		"list a search tool and call tools instead of every tool (and the tools of servers with \"alwaysLoad\": true); for clients that cannot hold many tools")
	fs.BoolVar(&opts.lazy, "lazy", false,
		"start a server on its first request instead of with the session when its catalog is in the cache from an earlier run (answered from it until then); the others start with the session and are cached")
	fs.DurationVar(&opts.idleStop, "idle-stop", 0,
		"stop a server that had no request for this `long`, such as 10m, and start it again on its next request (a server that keeps state in memory loses it); 0 never stops one")
	fs.BoolVar(&opts.share, "share", false,
		"run the servers in one background process shared by every session of this user with --share: sessions whose entries for a server are the same use one process of it (not on Windows)")
	fs.DurationVar(&opts.linger, "linger", shared.DefaultLinger,
		"--share: how `long` a server no session uses keeps running, for a session that starts again")
	fs.BoolVar(&opts.pinned, "pinned", false,
		"withhold every definition that differs from the lock file beside the configuration (written by pin)")
	fs.StringVar(&opts.auditLog, "audit-log", "",
		"append a JSON line per call, withheld or changed definition and server start, stop or crash to this `FILE` (created 0600, rotated at 10 MiB, 5 kept)")
	fs.BoolVar(&opts.auditBodies, "audit-log-bodies", false,
		"also write the arguments and results of calls into the audit log (they may hold secrets)")
	version := fs.Bool("version", false, "print the version and exit")
	if check {
		fs.BoolVar(&opts.json, "json", false, "check: print the report as JSON")
		fs.StringVar(&opts.cursorName, "cursor-name", "aggregator",
			"check: the `NAME` of the aggregator's entry in Cursor's mcp.json, which Cursor counts with every tool name against its 60 characters")
	}
	if opts.pin {
		fs.Var(&opts.servers, "server", "pin: the `KEY` of a server to pin, the others keeping their entries in the lock (repeat it for several); without it, every server")
	}
	usage := func(w io.Writer) {
		var b strings.Builder
		fs.SetOutput(&b)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		fmt.Fprintf(w, usageText, b.String())
	}
	fail := func(format string, a ...any) (options, int, bool) {
		usage(stderr)
		fmt.Fprintf(stderr, "\nmcp-simple-aggregator: "+format+"\n", a...)
		return opts, exitUsage, true
	}

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return opts, exitOK, true
		}
		return fail("%v", err)
	}
	switch {
	case *version:
		fmt.Fprintln(stdout, versionLine())
		return opts, exitOK, true
	case fs.NArg() > 0:
		return fail("unexpected argument %q: give the configuration file with --config FILE", fs.Arg(0))
	case opts.configPath == "":
		return fail("--config is required: give the path of the configuration file, such as --config ~/mcp-servers.json")
	case opts.separator == "":
		return fail("--separator must not be empty")
	case opts.startupTimeout <= 0:
		return fail("--startup-timeout must be positive, such as 30s")
	case opts.probeTimeout <= 0:
		return fail("--probe-timeout must be positive, such as 2s")
	case opts.pingInterval < 0:
		return fail("--ping-interval must not be negative (0 turns pings off)")
	case opts.pingFailures < 1:
		return fail("--ping-failures must be at least 1")
	case opts.maxRestarts < 0:
		return fail("--max-restarts must not be negative (0 turns restarts off)")
	case opts.restartDelay <= 0:
		return fail("--restart-delay must be positive, such as 500ms")
	case opts.maxMessageSize < 1<<20:
		return fail("--max-message-size must be at least 1048576 (1 MiB)")
	case opts.idleStop < 0:
		return fail("--idle-stop must not be negative (0 never stops a server)")
	case opts.linger <= 0:
		return fail("--linger must be positive, such as 5m")
	case opts.auditBodies && opts.auditLog == "":
		return fail("--audit-log-bodies needs --audit-log FILE")
	}
	return opts, exitOK, false
}
