package child

import "syscall"

// setParentDeathSignal makes Linux kill the child when the aggregator dies, also by SIGKILL.
func setParentDeathSignal(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
