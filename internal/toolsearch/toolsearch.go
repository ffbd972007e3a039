// Package toolsearch finds tools by what they do: an index of tool definitions searched with a
// natural-language query, for the aggregator's --tool-search mode.
//
// The ranking is BM25F (Robertson and Zaragoza, "The Probabilistic Relevance Framework: BM25
// and Beyond", 2009) over the fields of a definition, each with its own weight and length
// normalisation: the tool's name, its title, its server's key, its description, and the names
// and descriptions of its parameters. Identifiers are split into words (snake_case, camelCase,
// kebab-case, the aggregator's separator), words are lightly stemmed, and a query word also
// matches its synonyms and the long forms of abbreviations at a lower weight (synonyms.go). A
// query that names a tool exactly finds that tool first, and one whose words cover a tool's
// name boosts it. A request of several steps is also searched step by step (long.go). Every
// tool that matches a word of the query can be found: nothing is cut for matching weakly,
// since a model picks from candidates but can do nothing with an empty answer. Everything is
// in memory and built from the definitions alone: nothing is downloaded or trained.
package toolsearch

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"sync"
)

// Tool is what the index knows of one tool.
type Tool struct {
	// Name is the name the client calls it by (the exposed name, key+separator+tool).
	Name string
	// Server is the key of its server; Original the name its server gives it.
	Server, Original   string
	Title, Description string
	Params             []Param
}

// Param is one parameter of a tool's input schema.
type Param struct{ Name, Description string }

// FromDefinition reads a tool definition as tools/list gives it (the name, title, description,
// annotations.title and the top-level properties of inputSchema) into a Tool named name, of
// the server key, originally named original. A definition that does not decode gives a Tool
// with the names only.
func FromDefinition(name, server, original string, def json.RawMessage) Tool {
	t := Tool{Name: name, Server: server, Original: original}
	var d struct {
		Title       string `json:"title"`
		Description string `json:"description"`
		Annotations struct {
			Title string `json:"title"`
		} `json:"annotations"`
		InputSchema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"inputSchema"`
	}
	if json.Unmarshal(def, &d) != nil {
		return t
	}
	t.Title, t.Description = d.Title, d.Description
	if t.Title == "" {
		t.Title = d.Annotations.Title
	}
	for name, schema := range d.InputSchema.Properties {
		var p struct {
			Description string `json:"description"`
		}
		json.Unmarshal(schema, &p) // a schema that is not an object has no description
		t.Params = append(t.Params, Param{name, p.Description})
	}
	slices.SortFunc(t.Params, func(a, b Param) int { return strings.Compare(a.Name, b.Name) })
	return t
}

// The fields of a tool, with their weights and length normalisation (BM25F's w and b). The
// name says most about a tool and is short, so its length matters little; descriptions vary
// from three words to pages, so theirs matters most. Parameters say what a tool acts on
// (a "path", a "channel") but many tools share them.
const (
	fieldName = iota
	fieldTitle
	fieldServer
	fieldDescription
	fieldParamName
	fieldParamDescription
	numFields
)

var (
	fieldWeight = [numFields]float64{3.0, 2.0, 1.0, 1.0, 0.6, 0.3}
	fieldB      = [numFields]float64{0.3, 0.3, 0.0, 0.75, 0.5, 0.75}
)

const k1 = 1.2

// posting is one tool that has a term: which, and its saturated BM25F term weight
// (tf/(k1+tf) of the weighted, length-normalised frequency).
type posting struct {
	tool int32
	w    float32
}

// Index is an immutable search index of tools; it is safe for concurrent use.
type Index struct {
	tools    []Tool
	postings map[string][]posting
	idf      map[string]float64
	names    map[string]int   // exact names, exposed and original (lower-cased), to tools
	nameSets [][]int32        // each tool's name terms (by nameID), for the name boost
	nameIDs  map[string]int32 // the terms of names, numbered
	servers  map[string][]int // tools by server key
	scratch  sync.Pool        // of *scratch
}

// New indexes tools. Their order is the order of the results' Tool field.
func New(tools []Tool) *Index {
	ix := &Index{
		tools:    tools,
		postings: map[string][]posting{},
		idf:      map[string]float64{},
		names:    map[string]int{},
		nameSets: make([][]int32, len(tools)),
		nameIDs:  map[string]int32{},
		servers:  map[string][]int{},
	}
	ix.scratch.New = func() any { return &scratch{} }
	type counts [numFields]float64
	perTool := make([]map[string]*counts, len(tools))
	lengths := make([][numFields]float64, len(tools))
	var avg [numFields]float64
	for i, t := range tools {
		ix.servers[t.Server] = append(ix.servers[t.Server], i)
		for _, n := range []string{t.Name, t.Original} {
			if _, dup := ix.names[strings.ToLower(n)]; !dup && n != "" {
				ix.names[strings.ToLower(n)] = i
			}
		}
		tf := map[string]*counts{}
		addText := func(f int, text string) {
			for _, term := range terms(text) {
				c := tf[term]
				if c == nil {
					c = &counts{}
					tf[term] = c
				}
				c[f]++
				lengths[i][f]++
			}
		}
		addText(fieldName, t.Original)
		addText(fieldTitle, t.Title)
		addText(fieldServer, t.Server)
		addText(fieldDescription, t.Description)
		for _, p := range t.Params {
			addText(fieldParamName, p.Name)
			addText(fieldParamDescription, p.Description)
		}
		for _, w := range uniq(terms(t.Original)) {
			id, ok := ix.nameIDs[w]
			if !ok {
				id = int32(len(ix.nameIDs))
				ix.nameIDs[w] = id
			}
			ix.nameSets[i] = append(ix.nameSets[i], id)
		}
		perTool[i] = tf
		for f := range numFields {
			avg[f] += lengths[i][f]
		}
	}
	for f := range numFields {
		avg[f] = max(avg[f]/float64(max(len(tools), 1)), 1)
	}
	for i, tf := range perTool {
		for term, c := range tf {
			var x float64
			for f := range numFields {
				if c[f] == 0 {
					continue
				}
				norm := 1 - fieldB[f] + fieldB[f]*lengths[i][f]/avg[f]
				x += fieldWeight[f] * c[f] / norm
			}
			ix.postings[term] = append(ix.postings[term], posting{int32(i), float32(x / (k1 + x))})
		}
	}
	n := float64(len(tools))
	for term, ps := range ix.postings {
		df := float64(len(ps))
		ix.idf[term] = math.Log(1 + (n-df+0.5)/(df+0.5))
	}
	return ix
}

func uniq(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// Options narrow a search.
type Options struct {
	// Server, when set, keeps only the tools of the server with this key.
	Server string
	// Limit is the most hits returned; 0 means 5.
	Limit int
}

// Hit is one tool found.
type Hit struct {
	// Tool is its place in the slice the index was made from.
	Tool int
	// Score is its relevance; only the order of scores of one search means anything.
	Score float64
	// Coverage is the share of the (whole) query's weight, by idf, that the tool matches, 0 to 1.
	Coverage float64
}

// nameBoost is how much a tool's score grows when the query covers every word of its name
// (in proportion for part of them): at most by half. On the labelled sets, 0.3 to 1.0 gave
// recall@5 within 0.02 of each other; 1.5 lost more (names crowd out descriptions).
const nameBoost = 0.5

// Search returns the tools that best match query, best first: opts.Limit of them whenever that
// many tools match a word of the query (or one of its synonyms), and none only when nothing
// matches at all. A model given a short list of candidates picks the right one; a model given
// none has nowhere to go. A query that is exactly the name of a tool (as exposed, or as its
// server names it) returns that tool first. A query of several steps (long.go) also finds the
// tools of each step. Hits of equal score come in the order of the index, so the same index
// and query always give the same answer.
func (ix *Index) Search(query string, opts Options) []Hit {
	limit := opts.Limit
	if limit <= 0 {
		limit = 5
	}
	if opts.Server != "" && len(ix.servers[opts.Server]) == 0 {
		return nil
	}
	exact := -1
	if i, found := ix.names[strings.ToLower(strings.TrimSpace(query))]; found && (opts.Server == "" || ix.tools[i].Server == opts.Server) {
		exact = i
	}
	sc := ix.scratch.Get().(*scratch)
	defer ix.scratch.Put(sc)
	// One more than asked for, in case the exact name is among them.
	ranked := ix.rank(sc, queryTerms(query), opts.Server, limit+1)
	if steps := ix.steps(query); len(steps) > 1 {
		lists := [][]Hit{ranked}
		for _, step := range steps {
			lists = append(lists, ix.rank(sc, step, opts.Server, limit+1))
		}
		ranked = fuse(lists, limit+1)
	}
	var out []Hit
	if exact >= 0 {
		out = append(out, Hit{Tool: exact, Score: math.Inf(1), Coverage: 1})
	}
	for _, h := range ranked {
		if len(out) >= limit {
			break
		}
		if h.Tool != exact {
			out = append(out, h)
		}
	}
	return out
}

// rank scores the tools of server (any when "") that match the query terms qts and returns the
// best n, best first.
func (ix *Index) rank(sc *scratch, qts []queryTerm, server string, n int) []Hit {
	if len(qts) == 0 {
		return nil
	}
	sc.reset(len(ix.tools), len(ix.nameIDs))
	// matched is, by name term, the most it counts for the name boost: 1 for a
	// query term, less for its synonyms.
	note := func(term string, w float64) {
		if id, ok := ix.nameIDs[term]; ok {
			if sc.matched[id] == 0 {
				sc.named = append(sc.named, id)
			}
			sc.matched[id] = max(sc.matched[id], float32(w))
		}
	}
	for _, q := range qts {
		note(q.term, q.weight)
		for _, e := range expansions()[q.term] {
			note(e.term, q.weight*e.weight)
		}
		if q.literal != "" {
			note(q.literal, 1)
		}
	}
	// Each query term adds the best of what it matches in a tool: itself or one of its
	// expansions, weighted. A tool that has several synonyms of one word is not counted twice.
	var weightSum float64
	for _, qt := range qts {
		q := qt.term
		// A word that neither the tools nor the synonyms of any know (a file name, a
		// person) cannot tell tools apart: it does not count towards coverage.
		qidf, known := ix.idf[q]
		if !known {
			for _, e := range expansions()[q] {
				if v, ok := ix.idf[e.term]; ok && v > qidf {
					qidf, known = v, true
				}
			}
		}
		if !known {
			continue
		}
		qidf *= qt.weight
		weightSum += qidf
		sc.touched = sc.touched[:0]
		try := func(term string, weight float64) {
			ps := ix.postings[term]
			if len(ps) == 0 {
				return
			}
			idf := float32(weight * ix.idf[term])
			w := float32(weight)
			for _, p := range ps {
				if sc.best[p.tool] == 0 {
					sc.touched = append(sc.touched, p.tool)
				}
				if v := idf * p.w; v > sc.best[p.tool] {
					sc.best[p.tool] = v
				}
				if w > sc.bestW[p.tool] {
					sc.bestW[p.tool] = w
				}
			}
		}
		try(q, qt.weight)
		for _, e := range expansions()[q] {
			try(e.term, qt.weight*e.weight)
		}
		if qt.literal != "" {
			try(qt.literal, 1)
		}
		for _, t := range sc.touched {
			if sc.total[t] == 0 {
				sc.hit = append(sc.hit, t)
			}
			sc.total[t] += sc.best[t]
			sc.cover[t] += sc.bestW[t] * float32(qidf)
			sc.best[t], sc.bestW[t] = 0, 0
		}
	}
	// The best n hits, kept sorted.
	top := make([]Hit, 0, n)
	for _, t := range sc.hit {
		i := int(t)
		if server != "" && ix.tools[i].Server != server {
			continue
		}
		s := float64(sc.total[t])
		// A query that holds every word of a tool's name, or their synonyms (make a new
		// folder: create_directory), is a strong hint.
		if name := ix.nameSets[i]; len(name) > 0 {
			in := 0.0
			for _, w := range name {
				in += float64(sc.matched[w])
			}
			s *= 1 + nameBoost*in/float64(len(name))
		}
		c := 0.0
		if weightSum > 0 {
			c = float64(sc.cover[t]) / weightSum
		}
		h := Hit{Tool: i, Score: s, Coverage: c}
		if len(top) == cap(top) && !better(h, top[len(top)-1]) {
			continue
		}
		at, _ := slices.BinarySearchFunc(top, h, func(a, b Hit) int {
			if better(a, b) {
				return -1
			}
			return 1
		})
		if len(top) == cap(top) {
			top = top[:len(top)-1]
		}
		top = slices.Insert(top, at, h)
	}
	return top
}

// queryTerm is a term of a query, with its weight; an abbreviation is replaced by the terms
// of its long form (pr: pull, request), the first of which also matches the abbreviation as
// written (literal).
type queryTerm struct {
	term    string
	weight  float64
	literal string
}

func queryTerms(query string) []queryTerm {
	var out []queryTerm
	seen := map[string]bool{}
	for _, t := range terms(query) {
		long := longForms()[t]
		if len(long) == 0 {
			if !seen[t] {
				seen[t] = true
				out = append(out, queryTerm{t, 1, ""})
			}
			continue
		}
		for i, w := range long {
			if seen[w] {
				continue
			}
			seen[w] = true
			q := queryTerm{w, abbreviationWeight, ""}
			if i == 0 {
				q.literal = t
			}
			out = append(out, q)
		}
	}
	return out
}

// better orders hits: by score, then by their place in the index.
func better(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.Tool < b.Tool
}

// scratch is the working memory of one search, by tool: kept in a pool, so that a search
// allocates little.
type scratch struct {
	total, cover, best, bestW []float32 // by tool
	touched, hit              []int32
	matched                   []float32 // by name term
	named                     []int32
}

func (sc *scratch) reset(tools, names int) {
	for _, t := range sc.hit {
		sc.total[t], sc.cover[t] = 0, 0
	}
	for _, id := range sc.named {
		sc.matched[id] = 0
	}
	sc.hit, sc.named = sc.hit[:0], sc.named[:0]
	if len(sc.total) != tools {
		sc.total, sc.cover, sc.best, sc.bestW = make([]float32, tools), make([]float32, tools), make([]float32, tools), make([]float32, tools)
	}
	if len(sc.matched) != names {
		sc.matched = make([]float32, names)
	}
}
