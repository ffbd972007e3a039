//go:build unix

package child

import (
	"os/exec"
	"syscall"
)

const loginShellSupported = true

// prepareLoginShell puts the shell in a process group of its own, so that a timeout ends
// whatever its rc files started too.
func prepareLoginShell(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
