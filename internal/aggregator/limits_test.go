package aggregator

import (
	"strings"
	"testing"
)

func TestToolLimitsTable(t *testing.T) {
	for i, l := range toolLimits {
		if l.Clients == "" || l.Max <= 0 || l.Effect == "" || l.Source == "" {
			t.Errorf("limit %d is incomplete (every limit says whose it is, what happens and where it comes from): %+v", i, l)
		}
		if i > 0 && toolLimits[i-1].Max > l.Max {
			t.Errorf("limits not sorted, smallest first: %d before %d", toolLimits[i-1].Max, l.Max)
		}
	}
}

func TestLimitWarning(t *testing.T) {
	if w := limitWarning(40); w != "" {
		t.Errorf("40 tools: %q, want no warning", w)
	}
	w := limitWarning(41)
	if !strings.HasPrefix(w, "41 tools are exposed, more than some clients take: Cursor (40: ") || strings.Contains(w, "Antigravity") {
		t.Errorf("41 tools: %q, want Cursor alone", w)
	}
	w = limitWarning(129)
	for _, l := range toolLimits {
		if !strings.Contains(w, l.Clients) {
			t.Errorf("129 tools: the warning does not name %s: %q", l.Clients, w)
		}
	}
	// What helps, and nothing that does not exist yet presented as if it did.
	if !strings.Contains(w, `"includeTools", "excludeTools" or "disabledTools"`) || !strings.Contains(w, "start with --tool-search") {
		t.Errorf("the warning does not say what helps: %q", w)
	}
	reports := toolLimitReports(100)
	over := 0
	for _, r := range reports {
		if r.Over {
			over++
		}
	}
	if len(reports) != len(toolLimits) || over != 2 {
		t.Errorf("toolLimitReports(100) = %+v, want every limit, Cursor and Antigravity over", reports)
	}
}
