package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/shared"
)

// stopCmd stops the user's shared processes of --share, and every server they run.
type stopCmd struct{}

func (*stopCmd) name() string     { return "stop" }
func (*stopCmd) synopsis() string { return "stop" }

func (*stopCmd) help() string {
	return `Stops the shared process that sessions with --share use (this build's, and
those of other builds of the program beside it, after an update), and every server
it runs, as a shutdown stops them. It says what it stopped, or that none runs. Sessions still attached go on: their calls in
flight fail, and their servers start again in a new shared process. Use it after
updating a server, or to have the memory back.
`
}

func (*stopCmd) footer() string {
	return `Exit status: 0 when it stopped the shared process or none runs, 1 when it could
not, 2 when the command line is wrong.
`
}

func (*stopCmd) setFlags(*flag.FlagSet)    {}
func (*stopCmd) check(args []string) error { return noArguments(args) }

func (*stopCmd) run(_ []string, env *environment) int {
	if !shared.Supported {
		fmt.Fprintln(env.stdout, "No shared process runs: --share is not supported on this system.")
		return exitOK
	}
	stopped, err := stopShared()
	for _, st := range stopped {
		var servers []string
		for _, s := range st.Servers {
			servers = append(servers, fmt.Sprintf("%s (%s, pid %d)", strings.Join(s.Keys, ", "), s.Command, s.PID))
		}
		fmt.Fprintf(env.stdout, "Stopped the shared process %d (%s): %s attached, %s stopped", st.PID, st.Socket,
			count(len(st.Sessions), "session was", "sessions were"), count(len(st.Servers), "server", "servers"))
		if len(servers) > 0 {
			fmt.Fprintf(env.stdout, ": %s", strings.Join(servers, "; "))
		}
		fmt.Fprintln(env.stdout, ".")
	}
	if err != nil {
		fmt.Fprintf(env.stderr, "%s stop: %v\n", program, err)
		return exitError
	}
	if len(stopped) == 0 {
		fmt.Fprintln(env.stdout, "No shared process runs.")
	}
	return exitOK
}

// stopShared stops the user's shared processes, of this build and of others.
func stopShared() ([]shared.Status, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, errors.New("cannot find the program's own file, which names its shared process: " + err.Error())
	}
	sess, err := shared.Join(shared.Options{Executable: exe, Version: buildVersion()})
	if err != nil {
		return nil, err
	}
	return sess.StopAll()
}

// count is n with the noun for one or for several: "1 session was", "2 sessions were".
func count(n int, one, several string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, several)
}
