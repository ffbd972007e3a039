package aggregator

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
)

// The session's environment: what its servers inherit (with their entries' env over it), what
// the configuration's references are expanded with, and the chain of configuration files that
// catches an aggregator started again on its own file.

// chainVar lists the configuration files of the aggregators above this one, so that a
// configuration that starts itself again is caught instead of recursing.
const chainVar = "MCP_SIMPLE_AGGREGATOR_CONFIG_CHAIN"

// childEnv is the aggregator's environment with a server's env on top (the server's values
// win), plus the loop-detection chain.
func (a *Aggregator) childEnv(env map[string]string) []string {
	base := a.environ()
	out := make([]string, 0, len(base)+len(env)+1)
	over := map[string]bool{chainVar: true}
	for name := range env {
		over[envKey(name)] = true
	}
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if !over[envKey(name)] {
			out = append(out, kv)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(env)) {
		out = append(out, name+"="+env[name])
	}
	chain := a.cfgPath
	if parent := a.getenv(chainVar); parent != "" {
		chain = parent + string(os.PathListSeparator) + a.cfgPath
	}
	return append(out, chainVar+"="+chain)
}

// envKey is how the OS compares environment names: without case on Windows.
func envKey(name string) string {
	if runtime.GOOS == "windows" {
		return strings.ToUpper(name)
	}
	return name
}

// environ is the session's environment (Options.Env).
func (a *Aggregator) environ() []string {
	if a.opts.Env != nil {
		return a.opts.Env
	}
	return os.Environ()
}

// lookupEnv is a variable of the session's environment, for the configuration's references.
func (a *Aggregator) lookupEnv(name string) (string, bool) {
	if a.opts.Env == nil {
		return os.LookupEnv(name)
	}
	return config.EnvLookup(a.opts.Env)(name)
}

func (a *Aggregator) getenv(name string) string {
	v, _ := a.lookupEnv(name)
	return v
}

// checkLoop fails when an aggregator above this one serves the same configuration file: its
// servers would start this one again, forever.
func (a *Aggregator) checkLoop() error {
	chain := a.getenv(chainVar)
	if chain == "" {
		return nil
	}
	files := filepath.SplitList(chain)
	if !slices.Contains(files, a.cfgPath) {
		return nil
	}
	return fmt.Errorf("%s: %s (%s -> %s); "+
		"a server in it starts mcp-simple-aggregator on the same file again: remove that server, or give it another configuration file",
		a.cfgPath, loopMessage, strings.Join(files, " -> "), a.cfgPath)
}

func canonicalPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return path
}
