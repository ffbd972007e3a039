package aggregator

import (
	"regexp"
	"strings"
	"testing"
)

// apiToolName is the APIs' rule, ^[A-Za-z0-9_-]{1,64}$, name for name.
func TestAPIToolName(t *testing.T) {
	rule := regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	for _, name := range []string{"", "a", "gh__search", "gh:search", "a-b_C9", strings.Repeat("x", 64), strings.Repeat("x", 65),
		"tool.name", "tool name", "é", "a\n", "Z", "-_-", "gh__" + strings.Repeat("y", 60), "\x00"} {
		if got, want := apiToolName(name), rule.MatchString(name); got != want {
			t.Errorf("apiToolName(%q) = %v, want %v", name, got, want)
		}
	}
}
