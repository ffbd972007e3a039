package child

import "os/exec"

// On Windows, programs get the PATH of the user's environment whoever starts them: there is
// no login shell to ask.
const loginShellSupported = false

func prepareLoginShell(*exec.Cmd) {}
