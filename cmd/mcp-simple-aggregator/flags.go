package main

import (
	"errors"
	"flag"
	"strings"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/aggregator"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// The flags that several commands share, in groups: each command defines the groups it uses
// (serve.go, check.go, pin.go), so that none takes a flag it would ignore.

// configFlags are the flags of every command that reads a configuration and starts its
// servers: serving, check and pin.
type configFlags struct {
	path           string
	separator      string
	startupTimeout time.Duration
	probeTimeout   time.Duration
	maxMessageSize int
	debug          bool
}

func (f *configFlags) set(fs *flag.FlagSet) {
	fs.StringVar(&f.path, "config", "", "the configuration `FILE` (required)")
	fs.StringVar(&f.separator, "separator", ":", "the `TEXT` between a server's key and its tool names, such as __")
	fs.DurationVar(&f.startupTimeout, "startup-timeout", 30*time.Second,
		"how long each server may take to start and list its tools: a `DURATION`, such as 60s")
	fs.DurationVar(&f.probeTimeout, "probe-timeout", 2*time.Second,
		"how long each server may take to answer the server/discover probe (a `DURATION`) before it is spoken to in the legacy era (initialize)")
	fs.IntVar(&f.maxMessageSize, "max-message-size", stdio.DefaultMaxMessageSize,
		"the largest message accepted from the client or a server, in `BYTES`")
	fs.BoolVar(&f.debug, "debug", false, "also log lifecycle events and traffic summaries on stderr")
}

func (f *configFlags) check() error {
	switch {
	case f.path == "":
		return errors.New("--config is required: give the path of the configuration file, such as --config ~/mcp-servers.json")
	case f.separator == "":
		return errors.New("--separator must not be empty")
	case f.startupTimeout <= 0:
		return errors.New("--startup-timeout must be positive, such as 30s")
	case f.probeTimeout <= 0:
		return errors.New("--probe-timeout must be positive, such as 2s")
	case f.maxMessageSize < 1<<20:
		return errors.New("--max-message-size must be at least 1048576 (1 MiB)")
	}
	return nil
}

// options are the aggregator's options that the configuration flags set.
func (f *configFlags) options() aggregator.Options {
	return aggregator.Options{
		Separator:      f.separator,
		StartupTimeout: f.startupTimeout,
		ProbeTimeout:   f.probeTimeout,
		MaxMessageSize: f.maxMessageSize,
		Version:        buildVersion(),
	}
}

// policyFlags say how the servers are served: their health checks and restarts, when they
// start and stop, what the client lists. Serving takes them, and check, which reports what
// they make of the configuration.
type policyFlags struct {
	pingInterval time.Duration
	pingFailures int
	maxRestarts  int
	restartDelay time.Duration
	toolSearch   bool          // list search and call tools instead of every tool
	lazy         bool          // start a server whose catalog is cached on its first request
	idleStop     time.Duration // stop a server with no request for this long
	share        bool          // run the servers in the shared process of every session
	pinned       bool          // withhold what differs from the lock file
}

func (f *policyFlags) set(fs *flag.FlagSet) {
	fs.DurationVar(&f.pingInterval, "ping-interval", 30*time.Second,
		"the `DURATION` between two pings of each server; 0 turns pings off")
	fs.IntVar(&f.pingFailures, "ping-failures", 3,
		"how many pings in a row (`N`) a server may leave unanswered, each within the interval, before it is treated as crashed")
	fs.IntVar(&f.maxRestarts, "max-restarts", 5,
		"how many times in a row (`N`) a server that crashed (exited, closed its output, or failed its pings) is restarted before it stays down until a reload; 0 turns restarts off")
	fs.DurationVar(&f.restartDelay, "restart-delay", 500*time.Millisecond,
		"the `DURATION` to wait before a crashed server's first restart; it doubles with each try in a row, up to 30s")
	fs.BoolVar(&f.toolSearch, "tool-search", false,
		"list a search tool and call tools instead of every tool (and the tools of servers with \"alwaysLoad\": true); for clients that cannot hold many tools")
	fs.BoolVar(&f.lazy, "lazy", false,
		"start a server on its first request instead of with the session when its catalog is in the cache from an earlier run (answered from it until then); the others start with the session and are cached")
	fs.DurationVar(&f.idleStop, "idle-stop", 0,
		"stop a server that had no request for this `DURATION`, such as 10m, and start it again on its next request (a server that keeps state in memory loses it); 0 never stops one")
	fs.BoolVar(&f.share, "share", false,
		"run the servers in one background process shared by every session of this user with --share: sessions whose entries for a server are the same use one process of it (not on Windows)")
	fs.BoolVar(&f.pinned, "pinned", false,
		"withhold every definition that differs from the lock file beside the configuration (written by pin)")
}

func (f *policyFlags) check() error {
	switch {
	case f.pingInterval < 0:
		return errors.New("--ping-interval must not be negative (0 turns pings off)")
	case f.pingFailures < 1:
		return errors.New("--ping-failures must be at least 1")
	case f.maxRestarts < 0:
		return errors.New("--max-restarts must not be negative (0 turns restarts off)")
	case f.restartDelay <= 0:
		return errors.New("--restart-delay must be positive, such as 500ms")
	case f.idleStop < 0:
		return errors.New("--idle-stop must not be negative (0 never stops a server)")
	}
	return nil
}

// apply sets the options the policy flags decide.
func (f *policyFlags) apply(o *aggregator.Options) {
	o.PingInterval, o.PingFailures = f.pingInterval, f.pingFailures
	o.MaxRestarts, o.RestartDelay = f.maxRestarts, f.restartDelay
	o.ToolSearch, o.IdleStop, o.Pinned = f.toolSearch, f.idleStop, f.pinned
}

// keys are the values of a flag given once per key (pin --server).
type keys []string

func (k *keys) String() string { return strings.Join(*k, ",") }

func (k *keys) Set(v string) error {
	*k = append(*k, v)
	return nil
}

// firstError is the first of errs that is not nil.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// exampleConfig is the end of the usage of the commands that read a configuration.
const exampleConfig = `Example FILE (the format of claude_desktop_config.json and .mcp.json):

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
`
