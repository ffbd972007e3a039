package evaluation

import (
	"strings"
	"testing"
)

func loadBoth(t *testing.T) (servers, mcpproxy *Set) {
	t.Helper()
	servers, err := LoadServers("../../../testdata/toolsearch")
	if err != nil {
		t.Fatal(err)
	}
	mcpproxy, err = LoadMCPProxy("../../../testdata/toolsearch/mcpproxy")
	if err != nil {
		t.Fatal(err)
	}
	return servers, mcpproxy
}

// The labelled set is what the issue asks for: at least 300 tools of 15 public servers, 150
// queries, none of which uses a word of the name of a tool it expects.
func TestServersSet(t *testing.T) {
	s, _ := loadBoth(t)
	if len(s.Tools) < 300 || s.Servers < 15 || len(s.Queries) < 150 {
		t.Errorf("%d tools of %d servers, %d queries: want at least 300, 15 and 150", len(s.Tools), s.Servers, len(s.Queries))
	}
	byName := map[string]string{}
	for _, tool := range s.Tools {
		byName[tool.Name] = tool.Original
	}
	norm := func(w string) string { return strings.TrimSuffix(w, "s") }
	small := map[string]bool{"a": true, "an": true, "as": true, "in": true, "with": true, "the": true, "of": true, "to": true}
	for _, q := range s.Queries {
		for _, r := range q.Relevant {
			name := map[string]bool{}
			for _, w := range plainWords(byName[r]) {
				name[norm(w)] = true
			}
			for _, w := range plainWords(q.Text) {
				if name[norm(w)] && !small[w] {
					t.Errorf("query %q uses %q, a word of the name of %s", q.Text, w, r)
				}
			}
		}
	}
}

// The targets of the issue, on both sets: recall@5 at least 0.08 above plain BM25 on ours,
// and no loss on mcpproxy-go's, where plain BM25 already does well.
func TestTargets(t *testing.T) {
	s, m := loadBoth(t)
	for _, c := range []struct {
		set  *Set
		gain float64
	}{{s, 0.08}, {m, 0}} {
		ours, base := Evaluate(c.set, Search(c.set)), Evaluate(c.set, BM25(c.set))
		t.Logf("%s: recall@1 %.3f (BM25 %.3f), recall@5 %.3f (%.3f), MRR %.3f (%.3f)", c.set.Name,
			ours.RecallAt1, base.RecallAt1, ours.RecallAt5, base.RecallAt5, ours.MRR, base.MRR)
		if ours.RecallAt5 < base.RecallAt5+c.gain || ours.MRR < base.MRR || ours.RecallAt1 < base.RecallAt1 {
			t.Errorf("%s: recall@5 %.3f, MRR %.3f, recall@1 %.3f: want recall@5 at least %.3f and no loss against BM25 (%.3f, %.3f, %.3f)", c.set.Name,
				ours.RecallAt5, ours.MRR, ours.RecallAt1, base.RecallAt5+c.gain, base.RecallAt5, base.MRR, base.RecallAt1)
		}
	}
}
