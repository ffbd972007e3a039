package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/child"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/logging"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/shared"
)

// runInternal runs the program as one of its own helper processes, which it starts itself and
// users never type: the watchdog (child.WatchdogArg) and the shared process of --share
// (shared.DaemonArg). ok is false for any other command line.
func runInternal(args []string, stdin io.Reader, stderr io.Writer) (code int, ok bool) {
	switch {
	case len(args) == 1 && args[0] == child.WatchdogArg:
		child.RunWatchdog(stdin, stderr, child.WatchdogDefaultGrace)
		return exitOK, true
	case len(args) > 0 && args[0] == shared.DaemonArg:
		return runShared(args[1:], stderr), true
	}
	return 0, false
}

// sharedGCPercent is the shared process's GOGC: its collector runs once its heap has grown by
// three times what was live after the last collection, where the default (100) waits for once.
// It is the one process of the program that does every session's work, and what it keeps is
// small beside what it allocates on the way (each call's messages and records: with one session
// at the default's floor of 4 MB it collected several times a second under load, a few per cent
// of its CPU; BENCHMARKS.md, "Round eighteen"). For that, its heap may reach four times what
// is live instead of twice: the floor 12 MB, and a hundred sessions' records three times over.
const sharedGCPercent = 300

// runShared runs the program as the shared process of --share (shared.DaemonArg SOCKET
// LINGER), which a session starts: until it has no session and no server, SIGTERM, or stop.
// Every line of its log starts with the time it was written.
func runShared(args []string, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintf(stderr, "%s: %s is started by a session with --share, as %s SOCKET LINGER\n", program, shared.DaemonArg, shared.DaemonArg)
		return exitUsage
	}
	linger, err := time.ParseDuration(args[1])
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s: the linger %q: %v\n", program, shared.DaemonArg, args[1], err)
		return exitUsage
	}
	if os.Getenv("GOGC") == "" { // the user's setting, when there is one, holds
		debug.SetGCPercent(sharedGCPercent)
	}
	stamped := logging.Timestamped(stderr, time.Now)
	log := logging.New(stamped, slog.LevelInfo)
	child.SetLog(log)
	// The watchdog ends the servers' process groups if this process is killed before it can.
	if exe, err := os.Executable(); err != nil {
		log.Warn("cannot start the watchdog: servers may outlive a SIGKILL of the shared process", "error", err)
	} else if err := child.StartWatchdog(exe, stamped); err != nil {
		log.Warn("cannot start the watchdog: servers may outlive a SIGKILL of the shared process", "error", err)
	}
	defer child.StopWatchdog()
	signal.Ignore(syscall.SIGHUP) // it has no terminal, and no configuration to reload
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := shared.RunDaemon(ctx, args[0], linger, log, hostSession); err != nil {
		log.Error("the shared process failed", "error", err)
		return exitError
	}
	return exitOK
}

// hostSession runs a session the shared process hosts for a forwarder: serving, with the
// client's flags, environment and directory, over the shared process's servers. Its
// configuration's errors are the session's alone, said as unshared.
func hostSession(ctx context.Context, h *shared.Hosted) int {
	c := &serveCmd{}
	fs := flag.NewFlagSet(program, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.setFlags(fs)
	err := fs.Parse(h.Args)
	if err == nil {
		err = c.check(fs.Args())
	}
	if err != nil {
		fmt.Fprintf(h.Stderr, "%s: %v\n", program, err)
		return exitUsage
	}
	return c.run(nil, &environment{stdin: h.In, stdout: h.Out, stderr: h.Stderr, hosted: h, ctx: ctx})
}
