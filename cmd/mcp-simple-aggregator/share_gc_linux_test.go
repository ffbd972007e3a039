package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// The shared process collects at GOGC 300 (sharedGCPercent), or at the user's GOGC when one is
// set: the goal of its first collection, in the runtime's trace (GODEBUG=gctrace=1, on its
// stderr: its log), is the floor of 4 MB times GOGC/100.
func TestShareCollector(t *testing.T) {
	for _, tc := range []struct {
		gogc string
		goal int
	}{{"", 4 * sharedGCPercent / 100}, {"100", 4}} {
		t.Run("GOGC="+tc.gogc, func(t *testing.T) {
			dir := shareDir(t)
			t.Setenv("GODEBUG", "gctrace=1")
			t.Setenv("GOGC", tc.gogc)
			tag := newTag(t)
			s := shareSession(t, writeConfig(t, `{"mcpServers": {"a": `+tagged(tag)+`}}`))
			first := regexp.MustCompile(`(?m)^gc 1 @.* (\d+) MB goal`)
			var goal []byte
			deadline := time.Now().Add(30 * time.Second)
			for goal == nil && time.Now().Before(deadline) {
				s.call("tools/call", `{"name":"a:big","arguments":{"bytes":1048576}}`)
				logs, _ := filepath.Glob(filepath.Join(dir, "shared-*.log"))
				for _, l := range logs {
					text, _ := os.ReadFile(l)
					if m := first.FindSubmatch(text); m != nil {
						goal = m[1]
					}
				}
			}
			if n, err := strconv.Atoi(string(goal)); err != nil || n != tc.goal {
				t.Errorf("the shared process's first collection had a goal of %q MB, want %d", goal, tc.goal)
			}
			endShared(t, dir, tag, s)
		})
	}
}
