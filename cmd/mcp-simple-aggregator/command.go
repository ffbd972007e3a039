package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/shared"
)

// A command is one of the program's commands, each a type in a file of its own (serve.go,
// check.go, pin.go, cache.go, stop.go) with a flag set of its own: a flag that a command does
// not take is a usage error that names the command. Its usage text is pinned by
// testdata/usage/NAME.txt (TestUsage).
type command interface {
	// name is the word typed after the program's name; "" for serving.
	name() string
	// synopsis is the usage line, after "Usage: mcp-simple-aggregator ".
	synopsis() string
	// help is what the command does, printed under the usage line; footer follows the flags.
	help() string
	footer() string
	// setFlags defines the command's flags on fs.
	setFlags(fs *flag.FlagSet)
	// check says what is wrong with the parsed command line (the flags' values, and args, the
	// arguments after them); nil when nothing is.
	check(args []string) error
	// run does the command, once its command line is right, and returns the exit status.
	run(args []string, env *environment) int
}

// environment is what a command runs with: its standard files and, for a session the shared
// process of --share hosts for a forwarder, that session (its client's environment and
// directory, its servers the shared process's, and no watchdog or signals of its own).
type environment struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	hosted         *shared.Hosted
	ctx            context.Context // the hosted session's
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the configuration or the start-up failed
	exitUsage = 2 // the command line is wrong
)

// program is the program's name, before every message of its own.
const program = "mcp-simple-aggregator"

// commands are the program's commands, serving first.
func commands() []command {
	return []command{&serveCmd{}, &checkCmd{}, &pinCmd{}, &cacheCmd{}, &stopCmd{}}
}

// commandFor is the command args start with (serving when they start with no command's name),
// and the arguments after its name.
func commandFor(args []string) (command, []string) {
	all := commands()
	if len(args) > 0 {
		for _, c := range all[1:] {
			if args[0] == c.name() {
				return c, args[1:]
			}
		}
	}
	return all[0], args
}

// title is the command as typed: "mcp-simple-aggregator check".
func title(c command) string {
	if c.name() == "" {
		return program
	}
	return program + " " + c.name()
}

// execute parses the command line of c and runs it. --help prints the usage on stdout and
// succeeds; a mistake in the command line is said on stderr, with how to get the usage, and
// ends with exitUsage.
func execute(c command, args []string, env *environment) int {
	fs := flag.NewFlagSet(title(c), flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.setFlags(fs)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		io.WriteString(env.stdout, usage(c))
		return exitOK
	}
	if err == nil {
		err = c.check(fs.Args())
	} else if owners := takenBy(err.Error()); owners != "" {
		err = fmt.Errorf("%v (a flag of %s, not of %s)", err, owners, commandWord(c))
	}
	if err != nil {
		if len(args) == 0 { // the command alone: its usage says what it takes
			fmt.Fprintf(env.stderr, "%s\n", usage(c))
		}
		fmt.Fprintf(env.stderr, "%s: %v\nRun '%s --help' for its usage.\n", title(c), err, title(c))
		return exitUsage
	}
	return c.run(fs.Args(), env)
}

// takenBy names the commands that take the flag of an error of package flag's for a flag that
// is not defined ("flag provided but not defined: -audit-log"): "serving" or "check and pin";
// "" when the error is another, or no command takes the flag.
func takenBy(flagErr string) string {
	name, ok := strings.CutPrefix(flagErr, "flag provided but not defined: -")
	if !ok {
		return ""
	}
	name = strings.TrimPrefix(name, "-")
	var owners []string
	for _, c := range commands() {
		fs := flag.NewFlagSet(title(c), flag.ContinueOnError)
		c.setFlags(fs)
		if fs.Lookup(name) != nil {
			owners = append(owners, commandWord(c))
		}
	}
	switch len(owners) {
	case 0:
		return ""
	case 1:
		return owners[0]
	}
	return strings.Join(owners[:len(owners)-1], ", ") + " and " + owners[len(owners)-1]
}

// commandWord is how a message names c: "serving", or the command's name.
func commandWord(c command) string {
	if c.name() == "" {
		return "serving"
	}
	return c.name()
}

// usage is the usage text of c: its usage line, what it does, its flags, and its footer.
func usage(c command) string {
	fs := flag.NewFlagSet(title(c), flag.ContinueOnError)
	c.setFlags(fs)
	var flags strings.Builder
	fs.SetOutput(&flags)
	fs.PrintDefaults()
	var b strings.Builder
	fmt.Fprintf(&b, "Usage: %s %s\n\n%s", program, c.synopsis(), c.help())
	if flags.Len() > 0 {
		fmt.Fprintf(&b, "\nFlags:\n%s", flags.String())
	}
	if f := c.footer(); f != "" {
		fmt.Fprintf(&b, "\n%s", f)
	}
	return b.String()
}

// noArguments is the check of a command that takes no argument after its flags.
func noArguments(args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q", args[0])
	}
	return nil
}
