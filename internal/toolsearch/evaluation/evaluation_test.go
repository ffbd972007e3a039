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
		for _, r := range q.Answers[0] {
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

// The targets of the issues (#21, #31), on every set: never below plain BM25 over the same
// fields (recall@1, recall@5, MRR), recall@5 at least 0.05 above it, and mcpproxy-go's golden
// set kept at 0.88 or more.
func TestTargets(t *testing.T) {
	sets, err := LoadAll("../../../testdata/toolsearch")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sets {
		ours, base := Evaluate(s, Search(s)), Evaluate(s, BM25(s))
		t.Logf("%s: recall@1 %.3f (BM25 %.3f), recall@5 %.3f (%.3f), MRR %.3f (%.3f)", s.Name,
			ours.RecallAt1, base.RecallAt1, ours.RecallAt5, base.RecallAt5, ours.MRR, base.MRR)
		if ours.RecallAt5 < base.RecallAt5+0.05 || ours.MRR < base.MRR || ours.RecallAt1 < base.RecallAt1 {
			t.Errorf("%s: recall@5 %.3f, MRR %.3f, recall@1 %.3f: want recall@5 at least %.3f and no loss against BM25 (%.3f, %.3f, %.3f)", s.Name,
				ours.RecallAt5, ours.MRR, ours.RecallAt1, base.RecallAt5+0.05, base.RecallAt5, base.MRR, base.RecallAt1)
		}
		if s.Name == "mcpproxy-go golden set" && ours.RecallAt5 < 0.88 {
			t.Errorf("%s: recall@5 %.3f, want at least 0.88", s.Name, ours.RecallAt5)
		}
	}
}

// The public sets load whole: as many tools and queries as their sources publish (LiveMCPBench:
// 95 tasks, one of which names only tools its suite lacks).
func TestPublicSets(t *testing.T) {
	sets, err := LoadAll("../../../testdata/toolsearch")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][3]int{ // tools, servers, queries
		"mcpproxy-go golden set": {45, 7, 47},
		"LiveMCPBench":           {527, 70, 94},
		"MetaTool single-tool":   {199, 199, 1031},
		"MetaTool multi-tool":    {199, 199, 497},
	}
	for _, s := range sets {
		w, ok := want[s.Name]
		if !ok {
			continue
		}
		if got := [3]int{len(s.Tools), s.Servers, len(s.Queries)}; got != w {
			t.Errorf("%s: %d tools, %d servers, %d queries; want %v", s.Name, got[0], got[1], got[2], w)
		}
	}
}
