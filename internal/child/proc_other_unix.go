//go:build unix && !linux

package child

import "syscall"

// setParentDeathSignal does nothing where there is no parent-death signal (macOS, the BSDs):
// there a child learns of the aggregator's death from the end of its stdin, which every
// MCP stdio server must treat as the end of its session.
func setParentDeathSignal(*syscall.SysProcAttr) {}
