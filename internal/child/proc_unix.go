//go:build unix

package child

import (
	"errors"
	"os/exec"
	"syscall"
)

// platform on Unix: the child leads a process group of its own, so that it and everything it
// starts can be signalled together.
type platform struct {
	pgid int
}

func (p *platform) prepare(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(cmd.SysProcAttr)
}

func (p *platform) started(cmd *exec.Cmd) {
	p.pgid = cmd.Process.Pid
	watchGroup(p.pgid)
}

func (p *platform) exited() {}

// terminate sends SIGTERM to the group; it reports whether any process was there.
func (p *platform) terminate() bool {
	return syscall.Kill(-p.pgid, syscall.SIGTERM) == nil
}

func (p *platform) groupAlive() bool {
	return !errors.Is(syscall.Kill(-p.pgid, 0), syscall.ESRCH)
}

func (p *platform) kill() { _ = syscall.Kill(-p.pgid, syscall.SIGKILL) }

// release tells the watchdog the group is ended: Stop has killed it.
func (p *platform) release() { forgetGroup(p.pgid) }
