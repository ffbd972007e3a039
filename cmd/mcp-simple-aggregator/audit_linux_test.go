package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// An audit log that cannot be written costs one warning and no call: a full disk (/dev/full,
// every write fails with ENOSPC) is warned of once however many calls follow; a file that
// cannot be opened (read-only, immutable for root) is warned of once at the start, and the
// servers are served without an audit log.
func TestAuditLogUnwritable(t *testing.T) {
	readOnly := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(readOnly, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chattr", "+i", readOnly).CombinedOutput(); err != nil {
			t.Skipf("running as root, and chattr +i fails: %v %s", err, out)
		}
		t.Cleanup(func() { exec.Command("chattr", "-i", readOnly).Run() })
	} else if err := os.Chmod(readOnly, 0o400); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, warning string }{
		{"/dev/full", "mcp-simple-aggregator: warning: audit log /dev/full: write /dev/full: no space left on device; events are counted and not written until writing works again\n"},
		{readOnly, "mcp-simple-aggregator: warning: audit log: open " + readOnly + ": "},
	} {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			agg := startAggregator(t, `{"mcpServers": {"fx": {"command": "$FIXTURE"}}}`, "--audit-log", tc.file)
			agg.initialize("test")
			for range 50 {
				if m := agg.call("tools/call", `{"name":"fx:echo","arguments":{"n":1}}`); m.Error != nil {
					t.Fatalf("a call with an audit log that cannot be written: %s", m.Line)
				}
			}
			agg.stop()
			stderr := agg.stderr.String()
			if strings.Count(stderr, "warning: audit log") != 1 || !strings.Contains(stderr, tc.warning) {
				t.Errorf("stderr, want one warning %q:\n%s", tc.warning, stderr)
			}
		})
	}
}
