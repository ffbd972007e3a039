package child

import (
	"os"
	"os/exec"
	"unsafe"

	"golang.org/x/sys/windows"
)

// platform on Windows: the child and everything it starts belong to a job object that is
// closed, killing them all, when the aggregator exits by any means.
type platform struct {
	job  windows.Handle
	proc *os.Process
}

func (p *platform) prepare(cmd *exec.Cmd) {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return
	}
	info := windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION{}
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
	if _, err := windows.SetInformationJobObject(job, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(job)
		return
	}
	p.job = job
}

func (p *platform) started(cmd *exec.Cmd) {
	p.proc = cmd.Process
	if p.job == 0 {
		return
	}
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(cmd.Process.Pid))
	if err != nil {
		return
	}
	defer windows.CloseHandle(h)
	_ = windows.AssignProcessToJobObject(p.job, h)
}

func (p *platform) exited() {}

// terminate: Windows has no SIGTERM for console programs without a console of their own; the
// closed stdin was the polite request, so go straight to the end.
func (p *platform) terminate() bool { return false }

func (p *platform) groupAlive() bool { return false }

func (p *platform) kill() {
	if p.job != 0 {
		_ = windows.TerminateJobObject(p.job, 1)
	}
	_ = p.proc.Kill() // in case the job object could not be set up
}

func (p *platform) release() {
	if p.job != 0 {
		windows.CloseHandle(p.job)
		p.job = 0
	}
}
