package toolsearch_test

import (
	"slices"
	"testing"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/toolsearch"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/toolsearch/evaluation"
)

// The same catalog and query give the same ranking, in one index and over a new one: ties are
// broken by the place in the index, and nothing depends on the order of a map (two
// abbreviations that stem alike once took turns, and recall@1 moved between runs).
func TestSearchIsDeterministic(t *testing.T) {
	sets, err := evaluation.LoadAll("../../testdata/toolsearch")
	if err != nil {
		t.Fatal(err)
	}
	for _, set := range sets {
		// Copies of each server make ties: the same tool under two keys scores alike.
		tools := evaluation.Scale(set, 2*len(set.Tools))
		first, again := toolsearch.New(tools), toolsearch.New(tools)
		for _, q := range set.Queries {
			for _, limit := range []int{1, 5, 20} {
				a := first.Search(q.Text, toolsearch.Options{Limit: limit})
				b := first.Search(q.Text, toolsearch.Options{Limit: limit})
				c := again.Search(q.Text, toolsearch.Options{Limit: limit})
				if !slices.Equal(a, b) || !slices.Equal(a, c) {
					t.Fatalf("%s: Search(%q, limit %d) gave %v, then %v, and over a rebuilt index %v", set.Name, q.Text, limit, a, b, c)
				}
			}
		}
	}
}
