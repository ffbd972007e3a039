package toolsearch

import (
	"slices"
	"strings"
	"sync"
	"unicode"
)

// Long queries. A model that plans a task often searches with the whole of it: "read the sales
// figures in sales.xlsx, plot them as a bar chart by month and save it as a PNG". Ranked as one
// bag of words, the tools that match most of its words win, and those of a step with few words
// (the chart) fall behind tools that match many words weakly. So a query of several steps is
// also searched step by step, and the answer takes the best tools of each step in turn, after
// the best of the whole.

// minStepTerms is the fewest terms a query needs to be searched step by step: a short query is
// one request, whatever its commas and "and"s ("price and title of a product page").
const minStepTerms = 6

// steps returns the query terms of each step of query, when it has two steps or more that each
// match something in the index; otherwise nil.
func (ix *Index) steps(query string) [][]queryTerm {
	parts := splitSteps(query)
	if len(parts) < 2 {
		return nil
	}
	var out [][]queryTerm
	total := 0
	for _, p := range parts {
		qts := queryTerms(p)
		known := false
		for _, q := range qts {
			if ix.knows(q) {
				known = true
				break
			}
		}
		if known {
			out = append(out, qts)
			total += len(qts)
		}
	}
	if len(out) < 2 || total < minStepTerms {
		return nil
	}
	return out
}

// knows reports whether a query term, or one of its expansions, is a term of the index.
func (ix *Index) knows(q queryTerm) bool {
	if _, ok := ix.idf[q.term]; ok {
		return true
	}
	for _, e := range expansions()[q.term] {
		if _, ok := ix.idf[e.term]; ok {
			return true
		}
	}
	return q.literal != "" && ix.idf[q.literal] > 0
}

// splitSteps cuts a request at what usually separates its steps: the end of a sentence (a
// full stop, question or exclamation mark followed by a space or the end, a semicolon, a colon,
// a line break), a comma, and the words "and", "then", "also" and "after". The pieces are
// returned without the separators.
func splitSteps(text string) []string {
	var parts []string
	var cur strings.Builder
	flush := func() {
		if p := strings.TrimSpace(cur.String()); p != "" {
			parts = append(parts, p)
		}
		cur.Reset()
	}
	rs := []rune(text)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		next := rune(' ')
		if i+1 < len(rs) {
			next = rs[i+1]
		}
		switch {
		case r == '\n' || r == ';' || r == ',' || r == '。' || r == '，' || r == '；':
			flush()
		case (r == '.' || r == '?' || r == '!' || r == ':') && unicode.IsSpace(next):
			flush()
		case unicode.IsSpace(r):
			// A separating word: cut before it, and drop it.
			j := i + 1
			for j < len(rs) && unicode.IsLetter(rs[j]) {
				j++
			}
			if j > i+1 && (j == len(rs) || !unicode.IsLetter(rs[j])) && stepWords()[strings.ToLower(string(rs[i+1:j]))] {
				flush()
				i = j - 1
				continue
			}
			cur.WriteRune(r)
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return parts
}

// stepWords separate the steps of a long query. The set is made on first use, not at init,
// like expansions.
var stepWords = sync.OnceValue(func() map[string]bool { return set("and then also after afterwards finally next plus") })

// The weights of the merge (reciprocal rank fusion, Cormack, Clarke and Buettcher, 2009): a
// tool gets wholeWeight/(fuseK+rank) from its place in the whole query's ranking, plus
// 1/(fuseK+rank) from its place in each step's first stepDepth. The whole query leads: a tool
// that only a step finds comes before the whole query's tenth or so, and the best of a step
// that the whole query also found moves up. On LiveMCPBench's tasks, weights of 2.5 to 4, fuseK
// of 2 to 5 and depths of 5 to 8 gave recall@5 within 0.01 of each other; an even merge (the
// first of each list in turn) lost to the whole query alone, step noise crowding out its best.
const (
	wholeWeight = 4.0
	fuseK       = 2.0
	stepDepth   = 5
)

// fuse merges the rankings of the whole query (lists[0]) and of its steps into one of at most
// n hits. A hit keeps the coverage the whole query gave it; its score is its fused score.
func fuse(lists [][]Hit, n int) []Hit {
	score := map[int]float64{}
	var out []Hit
	for li, l := range lists {
		w := 1.0
		if li == 0 {
			w = wholeWeight
		} else {
			l = l[:min(len(l), stepDepth)]
		}
		for r, h := range l {
			if _, seen := score[h.Tool]; !seen {
				out = append(out, h)
			}
			score[h.Tool] += w / (fuseK + float64(r+1))
		}
	}
	for i := range out {
		out[i].Score = score[out[i].Tool]
	}
	slices.SortFunc(out, func(a, b Hit) int {
		if better(a, b) {
			return -1
		}
		return 1
	})
	return out[:min(n, len(out))]
}
