// Package evaluation measures tool retrieval: the labelled sets of testdata/toolsearch (ours and
// public ones, README.md there says where each comes from), a plain BM25 baseline, and recall@k
// and MRR. The benchmark (internal/bench -only toolsearch) and the tests of internal/toolsearch
// use it.
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
	// Tasks says that its queries are whole tasks of several steps, each step an answer.
	Tasks bool
}

// Query is a question and what answers it. Each answer is a set of tools (exposed names) of
// which finding any counts: a question has one answer, with every tool that does the job; a
// task has one answer per tool it needs, and a ranking is as good as the share of them it finds.
type Query struct {
	Text    string
	Answers [][]string
}

// relevant reports whether the tool named name answers any part of q.
func (q Query) relevant(name string) bool {
	for _, a := range q.Answers {
		if slices.Contains(a, name) {
			return true
		}
	}
	return false
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
		qs = append(qs, Query{Text: text, Answers: [][]string{strings.Fields(rel)}})
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
			set.Queries = append(set.Queries, Query{Text: q.Query, Answers: [][]string{rel}})
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
		if len(q.Answers) == 0 {
			return fmt.Errorf("%s: query %q has no answer", s.Name, q.Text)
		}
		for _, a := range q.Answers {
			for _, r := range a {
				if !names[r] {
					return fmt.Errorf("%s: query %q: no tool %q", s.Name, q.Text, r)
				}
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
	// Recall5 are, by query, the share of its answers found in the first five.
	Recall5 []float64
}

// Evaluate runs every query of s through rank. recall@k is, by query, the share of its answers
// with a tool among the first k results (for a question, 1 or 0), averaged over the queries;
// MRR is the mean of 1/rank of the first relevant tool within the first ten (0 when none is
// there).
func Evaluate(s *Set, rank Ranker) Scores {
	var sc Scores
	for _, q := range s.Queries {
		ranked := rank(q.Text)
		recall := func(k int) float64 {
			found := 0
			for _, a := range q.Answers {
				for _, t := range ranked[:min(k, len(ranked))] {
					if slices.Contains(a, s.Tools[t].Name) {
						found++
						break
					}
				}
			}
			return float64(found) / float64(len(q.Answers))
		}
		sc.RecallAt1 += recall(1)
		r5 := recall(5)
		sc.RecallAt5 += r5
		sc.Recall5 = append(sc.Recall5, r5)
		for i, t := range ranked[:min(10, len(ranked))] {
			if q.relevant(s.Tools[t].Name) {
				sc.MRR += 1 / float64(i+1)
				break
			}
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
		for _, w := range plainWords(fields(t)) {
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

// fields is the text of every field of t that the search indexes, in one.
func fields(t toolsearch.Tool) string {
	parts := []string{t.Name, t.Title, t.Description}
	for _, p := range t.Params {
		parts = append(parts, p.Name, p.Description)
	}
	return strings.Join(parts, " ")
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
