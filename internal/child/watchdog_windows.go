package child

import "os/exec"

// On Windows the job object ends the children and everything they start when the aggregator
// ends, however it ends.
const watchdogSupported = false

func prepareWatchdog(*exec.Cmd)  {}
func ignoreSignals()             {}
func signalGroup(int, bool) bool { return false }
func groupExists(int) bool       { return false }
