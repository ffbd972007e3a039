// Package evaluation measures tool retrieval: the labelled sets of testdata/toolsearch, a plain
// BM25 baseline, and recall@k and MRR. The benchmark (internal/bench -only toolsearch) and the
// tests of internal/toolsearch use it.
package evaluation

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/toolsearch"
)

// Separator joins a server's key and a tool's name in the sets, as the aggregator's default.
const Separator = ":"

// Set is a labelled retrieval set: tools and queries whose answers are known.
type Set struct {
	Name    string
	Tools   []toolsearch.Tool
	Defs    []json.RawMessage // the definitions, by tool, as their servers list them (nil when the set has none)
	Servers int
	Queries []Query
}

// Query is a question and the tools (exposed names) that answer it; finding any of them is a hit.
type Query struct {
	Text     string
	Relevant []string
}

// LoadServers reads the set of dir (testdata/toolsearch): every servers/<key>.json, a
// tools/list result of the server key, and queries.tsv (query, tab, relevant tools separated
// by spaces; # starts a comment).
func LoadServers(dir string) (*Set, error) {
	files, err := filepath.Glob(filepath.Join(dir, "servers", "*.json"))
	if err != nil {
		return nil, err
	}
	set := &Set{Name: "recorded servers"}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var list struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(data, &list); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		key := strings.TrimSuffix(filepath.Base(f), ".json")
		set.Servers++
		for _, def := range list.Tools {
			var d struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(def, &d); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			set.Tools = append(set.Tools, toolsearch.FromDefinition(key+Separator+d.Name, key, d.Name, def))
			set.Defs = append(set.Defs, def)
		}
	}
	set.Queries, err = loadQueries(filepath.Join(dir, "queries.tsv"))
	if err != nil {
		return nil, err
	}
	return set, set.check()
}

func loadQueries(path string) ([]Query, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var qs []Query
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		text, rel, ok := strings.Cut(line, "\t")
		if !ok {
			return nil, fmt.Errorf("%s:%d: no tab between the query and its tools", path, n)
		}
		qs = append(qs, Query{Text: text, Relevant: strings.Fields(rel)})
	}
	return qs, sc.Err()
}

// LoadMCPProxy reads mcpproxy-go's published retrieval set (testdata/toolsearch/mcpproxy):
// its corpus of tools (names and descriptions, no schemas) and its graded queries, of which
// the labels of the highest relevance count as the answers.
func LoadMCPProxy(dir string) (*Set, error) {
	var corpus struct {
		Tools []struct {
			Server      string `json:"server"`
			Tool        string `json:"tool"`
			Description string `json:"description"`
		} `json:"tools"`
	}
	var golden struct {
		Queries []struct {
			Query  string `json:"query"`
			Labels []struct {
				ToolID    string `json:"tool_id"`
				Relevance int    `json:"relevance"`
			} `json:"labels"`
		} `json:"queries"`
	}
	for file, v := range map[string]any{"corpus_v1.tools.json": &corpus, "retrieval_golden_v1.json": &golden} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, v); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	set := &Set{Name: "mcpproxy-go golden set"}
	seen := map[string]bool{}
	for _, t := range corpus.Tools {
		if !seen[t.Server] {
			seen[t.Server] = true
			set.Servers++
		}
		set.Tools = append(set.Tools, toolsearch.Tool{Name: t.Server + Separator + t.Tool, Server: t.Server, Original: t.Tool, Description: t.Description})
	}
	for _, q := range golden.Queries {
		top := 0
		for _, l := range q.Labels {
			top = max(top, l.Relevance)
		}
		var rel []string
		for _, l := range q.Labels {
			if l.Relevance == top && top > 0 {
				rel = append(rel, l.ToolID)
			}
		}
		if len(rel) > 0 {
			set.Queries = append(set.Queries, Query{Text: q.Query, Relevant: rel})
		}
	}
	return set, set.check()
}

// check reports a query whose answer is not a tool of the set.
func (s *Set) check() error {
	names := map[string]bool{}
	for _, t := range s.Tools {
		names[t.Name] = true
	}
	for _, q := range s.Queries {
		for _, r := range q.Relevant {
			if !names[r] {
				return fmt.Errorf("%s: query %q: no tool %q", s.Name, q.Text, r)
			}
		}
	}
	return nil
}

// Ranker ranks the tools of a set for a query: their places in Set.Tools, best first.
type Ranker func(query string) []int

// Scores are the figures of a ranker on a set.
type Scores struct {
	RecallAt1, RecallAt5, MRR float64
	// Hits5 are, by query, whether an answer was in the first five.
	Hits5 []bool
}

// Evaluate runs every query of s through rank: recall@1 and recall@5 are the shares of
// queries with an answer first or in the first five; MRR is the mean of 1/rank of the first
// answer within the first ten (0 when none is there).
func Evaluate(s *Set, rank Ranker) Scores {
	var sc Scores
	for _, q := range s.Queries {
		ranked := rank(q.Text)
		r := 0
		for i, t := range ranked {
			if i >= 10 {
				break
			}
			if slices.Contains(q.Relevant, s.Tools[t].Name) {
				r = i + 1
				break
			}
		}
		if r == 1 {
			sc.RecallAt1++
		}
		if r >= 1 && r <= 5 {
			sc.RecallAt5++
		}
		sc.Hits5 = append(sc.Hits5, r >= 1 && r <= 5)
		if r > 0 {
			sc.MRR += 1 / float64(r)
		}
	}
	n := float64(max(len(s.Queries), 1))
	sc.RecallAt1 /= n
	sc.RecallAt5 /= n
	sc.MRR /= n
	return sc
}

// Search is the ranker of toolsearch over the tools of s.
func Search(s *Set) Ranker {
	ix := toolsearch.New(s.Tools)
	return func(q string) []int {
		var out []int
		for _, h := range ix.Search(q, toolsearch.Options{Limit: 10}) {
			out = append(out, h.Tool)
		}
		return out
	}
}

// BM25 is the plain baseline: Okapi BM25 (k1 1.2, b 0.75) over one field, the exposed name and
// the description, split at every character that is not a letter or a digit and lower-cased,
// with no stemming, stop words, synonyms or field weights. It is what the peers' searches
// start from (docker's hand-written BM25, mcpproxy-go's Bleve index).
func BM25(s *Set) Ranker {
	const k1, b = 1.2, 0.75
	tfs := make([]map[string]float64, len(s.Tools))
	lens := make([]float64, len(s.Tools))
	df := map[string]float64{}
	var avg float64
	for i, t := range s.Tools {
		tfs[i] = map[string]float64{}
		for _, w := range plainWords(t.Name + " " + t.Description) {
			if tfs[i][w] == 0 {
				df[w]++
			}
			tfs[i][w]++
			lens[i]++
		}
		avg += lens[i]
	}
	avg /= float64(max(len(s.Tools), 1))
	n := float64(len(s.Tools))
	return func(q string) []int {
		type scored struct {
			i int
			s float64
		}
		var out []scored
		qs := plainWords(q)
		for i := range s.Tools {
			var score float64
			for _, w := range qs {
				tf := tfs[i][w]
				if tf == 0 {
					continue
				}
				idf := math.Log(1 + (n-df[w]+0.5)/(df[w]+0.5))
				score += idf * tf * (k1 + 1) / (tf + k1*(1-b+b*lens[i]/avg))
			}
			if score > 0 {
				out = append(out, scored{i, score})
			}
		}
		slices.SortStableFunc(out, func(a, b scored) int {
			switch {
			case a.s > b.s:
				return -1
			case a.s < b.s:
				return 1
			}
			return 0
		})
		ids := make([]int, 0, 10)
		for _, x := range out[:min(10, len(out))] {
			ids = append(ids, x.i)
		}
		return ids
	}
}

func plainWords(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// Scale returns n tools made of the tools of s, copied under server keys of their own (the
// copies of github are github, github-2, github-3, ...), for measurements of speed.
func Scale(s *Set, n int) []toolsearch.Tool {
	out := make([]toolsearch.Tool, 0, n)
	for copyN := 1; len(out) < n; copyN++ {
		for _, t := range s.Tools {
			if len(out) == n {
				break
			}
			if copyN > 1 {
				t.Server = fmt.Sprintf("%s-%d", t.Server, copyN)
				t.Name = t.Server + Separator + t.Original
			}
			out = append(out, t)
		}
	}
	return out
}
