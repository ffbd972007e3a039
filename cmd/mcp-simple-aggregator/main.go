// Command mcp-simple-aggregator starts the MCP servers of a Claude-style configuration file and
// serves all of their tools to one MCP client over stdio, each prefixed with its server's key.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/aggregator"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/child"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/logging"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/watch"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the configuration or the start-up failed
	exitUsage = 2 // the command line is wrong
)

const usageText = `Usage: mcp-simple-aggregator --config FILE [flags]
       mcp-simple-aggregator check --config FILE [--json] [--cursor-name NAME] [flags]

Starts every MCP server listed in FILE as a child process and serves all of their
tools to one MCP client over standard input and output, each tool named after its
server's key: the tool "search_code" of the server "sourcebot" becomes
"sourcebot:search_code".

"check" starts every server of FILE as serving does, prints a table of how each
one started (status, start-up time, protocol, counts of tools, prompts and
resources) and every tool name, marking the names that clients would reject, then
stops them all. It exits with 0 when every server is healthy, 1 otherwise.

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
set stops the start-up with its name.

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
	pingFailures   int
	maxMessageSize int
	debug          bool
	noWatch        bool   // do not reload when the files of the configuration change
	toolSearch     bool   // list search and call tools instead of every tool
	check          bool   // the check command
	json           bool   // check: print JSON
	cursorName     string // check: the aggregator's entry name in Cursor's configuration
}

func main() {
	// For profiling (see BENCHMARKS.md), not for users: a CPU profile of the whole run.
	if path := os.Getenv("MCP_SIMPLE_AGGREGATOR_CPUPROFILE"); path != "" {
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			code := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
			pprof.StopCPUProfile()
			f.Close()
			os.Exit(code)
		}
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 1 && args[0] == child.WatchdogArg {
		child.RunWatchdog(stdin, stderr, child.WatchdogDefaultGrace)
		return exitOK
	}
	rawStderr := stderr
	check := len(args) > 0 && args[0] == "check"
	if check {
		args = args[1:]
	}
	opts, code, done := parseFlags(args, check, stdout, stderr)
	if done {
		return code
	}
	level := slog.LevelWarn
	if opts.debug {
		level = slog.LevelDebug
	}
	errw := logging.NewWriter(stderr, 4096)
	defer errw.Close(2 * time.Second)
	stderr = errw
	log := logging.New(stderr, level)

	cfg, warnings, err := config.Load(opts.configPath, os.LookupEnv)
	for _, w := range warnings {
		log.Warn(w.String())
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	log.Debug("configuration loaded", "file", cfg.File, "servers", len(cfg.Servers))

	// The watchdog ends the servers' process groups if this process is killed before it can.
	if exe, err := os.Executable(); err != nil {
		log.Warn("cannot start the watchdog: servers may outlive a SIGKILL of the aggregator", "error", err)
	} else if err := child.StartWatchdog(exe, rawStderr); err != nil {
		log.Warn("cannot start the watchdog: servers may outlive a SIGKILL of the aggregator", "error", err)
	}
	defer child.StopWatchdog()

	// SIGINT and SIGTERM end the session like the end of stdin: every child is stopped.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	aggOpts := aggregator.Options{
		Separator:      opts.separator,
		StartupTimeout: opts.startupTimeout,
		PingInterval:   opts.pingInterval,
		PingFailures:   opts.pingFailures,
		MaxMessageSize: opts.maxMessageSize,
		Version:        buildVersion(),
		Log:            log,
		Stderr:         stderr,
		CursorEntry:    opts.cursorName,
		ToolSearch:     opts.toolSearch,
	}
	if opts.check {
		return runCheck(ctx, cfg, aggOpts, opts.json, stdout)
	}
	// SIGHUP asks for a reload (on Unix), from here on: one during the start-up does not end
	// the program, it reloads once the servers have started.
	hup, stopHup := reloadSignal()
	defer stopHup()
	agg, err := aggregator.Start(ctx, cfg, aggOpts)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitError
	}
	stopReloads := startReloads(agg, hup, !opts.noWatch, log)
	err = agg.Serve(ctx, stdin, stdout)
	var startErr *aggregator.StartupError
	if errors.As(err, &startErr) {
		agg.Close()
		stopReloads()
		fmt.Fprintln(stderr, err)
		return exitError
	}
	log.Debug("shutting down", "reason", shutdownReason(ctx, err))
	// Close first: it stops a reload under way (which would otherwise be waited for), and a
	// reload asked for after it does nothing.
	agg.Close()
	stopReloads()
	if err != nil && ctx.Err() == nil {
		log.Error("serving the client failed", "error", err)
		return exitError
	}
	return exitOK
}

// watchDebounce is how long the watcher waits after the last change of a burst (an editor's
// save, ten saves in a row) before the reload, so that the reload reads the final content.
const watchDebounce = 200 * time.Millisecond

// startReloads starts what triggers a reload: SIGHUP (the signals on hup) and, when watching,
// a change of the configuration file or of a server's envFile. Reloads run one at a time. The
// returned stop ends the triggers and waits for a reload under way; call it before closing agg.
func startReloads(agg *aggregator.Aggregator, hup <-chan os.Signal, watching bool, log *slog.Logger) (stop func()) {
	var w *watch.Watcher
	reload := func() {
		agg.Reload()
		if w != nil {
			// A reload may have changed the files: another envFile, a re-pointed link.
			if err := w.Set(agg.Files()); err != nil && !errors.Is(err, watch.ErrClosed) {
				log.Warn("cannot watch the configuration for changes", "error", err)
			}
		}
	}
	if watching {
		// The watcher starts with no file and is given them once w is set: no change can call
		// reload before.
		nw, err := watch.New(nil, watchDebounce, reload, log)
		if err != nil {
			log.Warn("cannot watch the configuration for changes: it is not reloaded when it changes", "error", err)
		} else {
			w = nw
			if err := w.Set(agg.Files()); err != nil {
				log.Warn("cannot watch the configuration for changes", "error", err)
			}
			log.Debug("watching the configuration for changes", "files", agg.Files())
		}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-hup:
				log.Debug("reloading on SIGHUP")
				reload()
			}
		}
	}()
	return func() {
		close(quit)
		<-done
		if w != nil {
			w.Close()
		}
	}
}

func shutdownReason(ctx context.Context, err error) string {
	switch {
	case ctx.Err() != nil:
		return "signal"
	case err != nil:
		return err.Error()
	}
	return "end of input"
}

// parseFlags parses the command line. When done is true the program ends with code: after
// --help or --version (printed on stdout, as asked for) or after a usage error (on stderr).
func parseFlags(args []string, check bool, stdout, stderr io.Writer) (opts options, code int, done bool) {
	opts.check = check
	fs := flag.NewFlagSet("mcp-simple-aggregator", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&opts.configPath, "config", "", "the configuration `FILE` (required)")
	fs.StringVar(&opts.separator, "separator", ":", "the text between a server's key and its tool names, such as `__`")
	fs.DurationVar(&opts.startupTimeout, "startup-timeout", 30*time.Second,
		"how long each server may take to start and list its tools, such as `60s`")
	fs.DurationVar(&opts.pingInterval, "ping-interval", 30*time.Second,
		"how often each server is pinged; 0 turns pings off")
	fs.IntVar(&opts.pingFailures, "ping-failures", 3,
		"how many pings in a row a server may leave unanswered (each within the interval) before it is treated as crashed")
	fs.IntVar(&opts.maxMessageSize, "max-message-size", stdio.DefaultMaxMessageSize,
		"the largest message, in `bytes`, accepted from the client or a server")
	fs.BoolVar(&opts.debug, "debug", false, "also log lifecycle events and traffic summaries on stderr")
	fs.BoolVar(&opts.noWatch, "no-watch", false,
		"do not reload when the configuration file or a server's envFile changes (SIGHUP still reloads)")
	fs.BoolVar(&opts.toolSearch, "tool-search", false,
		"list a search tool and call tools instead of every tool (and the tools of servers with \"alwaysLoad\": true); for clients that cannot hold many tools")
	version := fs.Bool("version", false, "print the version and exit")
	if check {
		fs.BoolVar(&opts.json, "json", false, "check: print the report as JSON")
		fs.StringVar(&opts.cursorName, "cursor-name", "aggregator",
			"check: the `NAME` of the aggregator's entry in Cursor's mcp.json, which Cursor counts with every tool name against its 60 characters")
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
	case opts.pingInterval < 0:
		return fail("--ping-interval must not be negative (0 turns pings off)")
	case opts.pingFailures < 1:
		return fail("--ping-failures must be at least 1")
	case opts.maxMessageSize < 1<<20:
		return fail("--max-message-size must be at least 1048576 (1 MiB)")
	}
	return opts, exitOK, false
}

// Set by the release build (.goreleaser.yaml) with -ldflags "-X main.version=... -X
// main.commit=... -X main.date=...": the version without a leading "v", as the npm packages
// and server.json carry it.
var version, commit, date string

// buildVersion is the bare version the binary was built from, served as serverInfo.version.
func buildVersion() string {
	info, _ := debug.ReadBuildInfo()
	return bareVersion(version, info)
}

// versionLine is what --version prints.
func versionLine() string {
	info, _ := debug.ReadBuildInfo()
	return formatVersion(version, commit, date, info)
}

// bareVersion is the release version when stamped, otherwise the module version of the build
// info without its "v" (`go install ...@v1.2.3` gives 1.2.3), or "(devel)".
func bareVersion(stamped string, info *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if info != nil && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return strings.TrimPrefix(info.Main.Version, "v")
	}
	return "(devel)"
}

// formatVersion is the version, then the commit and the build date when the release build
// stamped them, or else the commit and its time as the go command recorded them (if it did).
func formatVersion(stamped, commit, date string, info *debug.BuildInfo) string {
	rev, when := commit, ""
	if date != "" {
		when = "built " + date
	}
	if rev == "" && info != nil {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				when = "committed " + s.Value
			}
		}
	}
	line := "mcp-simple-aggregator " + bareVersion(stamped, info)
	var details []string
	if rev != "" {
		details = append(details, "commit "+rev)
	}
	if when != "" {
		details = append(details, when)
	}
	if len(details) > 0 {
		line += " (" + strings.Join(details, ", ") + ")"
	}
	return line
}
