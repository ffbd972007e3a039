package aggregator

import (
	"strings"
	"testing"
)

func TestToolLimitsTable(t *testing.T) {
	type key struct {
		clients string
		soft    bool
	}
	seen := map[key]bool{}
	for i, l := range toolLimits {
		if l.Clients == "" || l.Max <= 0 || l.Effect == "" || l.Source == "" {
			t.Errorf("limit %d is incomplete (every limit says whose it is, what happens and where it comes from): %+v", i, l)
		}
		if i > 0 && toolLimits[i-1].Max > l.Max {
			t.Errorf("limits not sorted, smallest first: %d before %d", toolLimits[i-1].Max, l.Max)
		}
		// A client has at most one limit of each kind, and its warning comes before its cut:
		// a soft limit above the hard one would never be seen.
		k := key{l.Clients, l.Soft}
		if seen[k] {
			t.Errorf("%s has two limits of the same kind (soft %v)", l.Clients, l.Soft)
		}
		seen[k] = true
		if l.Soft {
			for _, h := range toolLimits {
				if h.Clients == l.Clients && !h.Soft && h.Max <= l.Max {
					t.Errorf("%s warns at %d but already cuts at %d", l.Clients, l.Max, h.Max)
				}
			}
		}
	}
}

// The limits rechecked for issue #27: each number as its source gives it, and whether the
// client loses tools beyond it.
func TestToolLimitsRechecked(t *testing.T) {
	want := map[string]struct {
		max  int
		soft bool
	}{
		"Trae":                                   {40, false},
		"VS Code (Copilot Chat)":                 {64, true},
		"Cursor":                                 {80, true},
		"Antigravity":                            {100, false},
		"Windsurf":                               {100, false},
		"JetBrains Copilot":                      {128, false},
		"Zed":                                    {128, false},
		"claude.ai, Claude Desktop (connectors)": {256, false},
	}
	for _, l := range toolLimits {
		w, ok := want[l.Clients]
		if !ok {
			continue
		}
		delete(want, l.Clients)
		if l.Max != w.max || l.Soft != w.soft {
			t.Errorf("%s: %d (soft %v), want %d (soft %v)", l.Clients, l.Max, l.Soft, w.max, w.soft)
		}
	}
	for c := range want {
		t.Errorf("no limit for %s", c)
	}
}

func TestLimitWarning(t *testing.T) {
	if w := limitWarning(40); w != "" {
		t.Errorf("40 tools: %q, want no warning", w)
	}
	w := limitWarning(41)
	if !strings.HasPrefix(w, "41 tools are exposed, more than some clients take: Trae (40: ") || strings.Contains(w, "Cursor") {
		t.Errorf("41 tools: %q, want Trae alone", w)
	}
	w = limitWarning(257)
	for _, l := range toolLimits {
		if !strings.Contains(w, l.Clients) {
			t.Errorf("257 tools: the warning does not name %s: %q", l.Clients, w)
		}
	}
	// What helps, and nothing that does not exist yet presented as if it did.
	if !strings.Contains(w, `"includeTools", "excludeTools" or "disabledTools"`) || !strings.Contains(w, "start with --tool-search") {
		t.Errorf("the warning does not say what helps: %q", w)
	}
	reports := toolLimitReports(100)
	var over []string
	for _, r := range reports {
		if r.Over {
			over = append(over, r.Clients)
		}
	}
	if len(reports) != len(toolLimits) || strings.Join(over, "; ") != "Trae; VS Code (Copilot Chat); Cursor" {
		t.Errorf("toolLimitReports(100) = %+v, want every limit, Trae, VS Code and Cursor over", reports)
	}
	for i, r := range reports {
		if r.Soft != toolLimits[i].Soft {
			t.Errorf("report %s: soft %v, want %v", r.Clients, r.Soft, toolLimits[i].Soft)
		}
	}
}
