// Command mcp-simple-aggregator starts the MCP servers of a Claude-style configuration file and
// serves all of their tools to one MCP client over stdio, each prefixed with its server's key.
//
// Each command is a type in a file of its own: serving (serve.go), check, pin, cache and stop;
// command.go parses their command lines, and internal.go runs the program's own helper
// processes (the watchdog, the shared process of --share).
package main

import (
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
)

func main() {
	// For profiling (see BENCHMARKS.md), not for users: a CPU profile of the whole run, and
	// beside it (".allocs") what the run allocated; "%p" in the path is the process's ID (a
	// forwarder and the shared process it starts inherit one).
	if path := os.Getenv("MCP_SIMPLE_AGGREGATOR_CPUPROFILE"); path != "" {
		path = strings.ReplaceAll(path, "%p", strconv.Itoa(os.Getpid()))
		if f, err := os.Create(path); err == nil && pprof.StartCPUProfile(f) == nil {
			code := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
			pprof.StopCPUProfile()
			f.Close()
			if a, err := os.Create(path + ".allocs"); err == nil {
				runtime.GC() // the profile is as of the last collection
				_ = pprof.Lookup("allocs").WriteTo(a, 0)
				a.Close()
			}
			os.Exit(code)
		}
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs the command of args and returns its exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if code, ok := runInternal(args, stdin, stderr); ok {
		return code
	}
	c, rest := commandFor(args)
	return execute(c, rest, &environment{stdin: stdin, stdout: stdout, stderr: stderr})
}
