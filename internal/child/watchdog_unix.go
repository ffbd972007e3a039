//go:build unix

package child

import (
	"errors"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
)

const watchdogSupported = true

func prepareWatchdog(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// ignoreSignals keeps the watchdog alive through the signals that end the aggregator: a
// terminal's Ctrl-C or hang-up reaches the whole foreground group.
func ignoreSignals() { signal.Ignore(syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGPIPE) }

// signalGroup sends SIGTERM (or SIGKILL) to the group; it reports whether the group exists.
func signalGroup(pgid int, kill bool) bool {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	return !errors.Is(syscall.Kill(-pgid, sig), syscall.ESRCH)
}

func groupExists(pgid int) bool { return !errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) }

func watchGroup(pgid int)  { tellWatchdog("+" + strconv.Itoa(pgid)) }
func forgetGroup(pgid int) { tellWatchdog("-" + strconv.Itoa(pgid)) }
