package toolsearch

import (
	"maps"
	"slices"
	"strings"
	"sync"
)

// Users ask for tools in their own words, and tool descriptions use others: "remove" for
// delete, "folder" for directory, "PR" for pull request. The groups below are general
// vocabulary of software tools (verbs of the usual operations, the objects they act on, common
// abbreviations), not the wording of any one server. A query word also matches the other words
// of its groups, at a lower weight than itself (synonymWeight), so that a tool that uses the
// query's own word still ranks first.
var synonymGroups = []string{
	// operations
	"delete remove erase drop destroy discard purge forget uninstall",
	"create new add make generate produce build open",
	"add append insert attach",
	"find search lookup locate discover query look seek",
	"get fetch retrieve read obtain load download grab show view open see display",
	"list enumerate show all browse",
	"update modify change edit patch alter set replace rewrite",
	"write save store persist record put",
	"run execute launch start invoke trigger spawn",
	"stop cancel halt end kill terminate abort close shut quit",
	"send post publish share",
	"reply respond answer",
	"move rename relocate transfer",
	"copy duplicate clone fork",
	"compress zip gzip archive pack",
	"merge land integrate combine",
	"approve review accept",
	"resolve fix close solve",
	"describe explain detail inspect",
	"scale replicas resize",
	"deploy apply install rollout release ship",
	"switch select choose pick change",
	"upload attach",
	"wait pause until sleep",
	"compare comparison versus",
	"analyze analyse analysis diagnose investigate examine",
	"summarize summary overview",
	"convert transform translate",
	"scrape extract crawl spider harvest",
	"plot draw chart graph diagram visualize visualise visualization",
	"count number how many total sum statistics stats",
	// things
	"folder directory dir",
	"file document doc",
	"repository repo project codebase",
	"issue bug ticket problem defect",
	"error exception crash failure bug fault",
	"image picture photo pic png jpg graphic illustration logo",
	"screenshot capture screen",
	"snapshot capture dump",
	"page webpage site website url link web",
	"browser web tab window",
	"click press tap",
	"type enter input fill",
	"key keyboard keystroke",
	"message chat post note conversation",
	"channel room",
	"thread conversation replies discussion",
	"user account person member people profile coworker colleague",
	"comment remark note feedback annotation",
	"reaction emoji",
	"entity node record item object",
	"relation relationship link connection edge",
	"observation fact note detail",
	"memory knowledge remember",
	"log logs output stdout stderr print",
	"container pod",
	"cluster k8s kubernetes kubectl",
	"process program task pid job",
	"terminal shell console command cli repl session",
	"usage statistics stats metrics analytics",
	"history recent previous past last earlier",
	"config configuration setting settings preference option options",
	"directions route itinerary drive driving travel trip navigate",
	"geocode coordinates latitude longitude location",
	"address street place",
	"elevation altitude height sea level",
	"distance far travel time",
	"table spreadsheet grid rows pivot",
	"trend time line over",
	"proportion share percentage slice part",
	"hierarchy tree nested structure org",
	"research investigation study report deep",
	"markdown md",
	"javascript js script code",
	"dialog alert popup prompt modal confirm",
	"dropdown select option combobox",
	"hover mouseover mouse",
	"drag drop move",
	"resize size dimension width height viewport",
	"emulate simulate mode",
	"audit score lighthouse accessibility seo",
	"performance speed fast slow trace profile bottleneck latency",
	"heap memory leak",
	"video screencast recording record",
	"css style stylesheet",
	"network http request call traffic",
	"release version",
	"dsn key credential token secret",
	"organization org",
	"team group",
	"environment env variable",
	"echo repeat",
	"reasoning thinking think reason step",
	"sql query select database table postgres mysql sqlite",
	"library package framework module dependency sdk",
	"documentation docs reference manual guide",
	"news online internet web",
	"namespace project",
	"commit push",
	"branch ref",
	"pull request pr",
	"merge request mr",
	"monitor monitoring observe",
	"cause root why",
	"permission access allowed permitted",
	"metadata info information detail",
}

// abbreviations expand a short form into the words it stands for, at nearly full weight.
var abbreviations = map[string]string{
	"pr":     "pull request",
	"prs":    "pull request",
	"mr":     "merge request",
	"repo":   "repository",
	"repos":  "repository",
	"k8s":    "kubernetes",
	"db":     "database",
	"js":     "javascript",
	"ts":     "typescript",
	"md":     "markdown",
	"env":    "environment",
	"dir":    "directory",
	"pic":    "picture",
	"msg":    "message",
	"info":   "information",
	"id":     "identifier",
	"org":    "organization",
	"orgs":   "organization",
	"docs":   "documentation",
	"doc":    "document",
	"config": "configuration",
	"url":    "link",
}

// longForms are the abbreviations by stemmed term, each with the stemmed terms of its long form.
// Two abbreviations can stem alike (doc, docs): the first in alphabetical order wins, whatever
// the order of the map, so that every process ranks alike. Built on first use, not at init,
// like expansions.
var longForms = sync.OnceValue(func() map[string][]string {
	m := map[string][]string{}
	for _, short := range slices.Sorted(maps.Keys(abbreviations)) {
		if _, taken := m[stem(short)]; !taken {
			m[stem(short)] = terms(abbreviations[short])
		}
	}
	return m
})

const (
	synonymWeight      = 0.5
	abbreviationWeight = 0.9
)

// expansion is a term a query term also matches, and at what weight.
type expansion struct {
	term   string
	weight float64
}

// expansions are, by stemmed term, the other terms it matches. Built on first use, not at
// package init: every process of the program pays what init does (about 0.2 MB here), also one
// that never searches tools (a --share forwarder, `stop`).
var expansions = sync.OnceValue(func() map[string][]expansion {
	m := map[string][]expansion{}
	add := func(from, to string, w float64) {
		if from == to {
			return
		}
		for i, e := range m[from] {
			if e.term == to {
				if w > e.weight {
					m[from][i].weight = w
				}
				return
			}
		}
		m[from] = append(m[from], expansion{to, w})
	}
	for _, g := range synonymGroups {
		var ts []string
		for _, w := range strings.Fields(g) {
			ts = append(ts, stem(w))
		}
		for _, a := range ts {
			for _, b := range ts {
				add(a, b, synonymWeight)
			}
		}
	}
	for _, short := range slices.Sorted(maps.Keys(abbreviations)) {
		for _, w := range strings.Fields(abbreviations[short]) {
			add(stem(short), stem(w), abbreviationWeight)
			add(stem(w), stem(short), abbreviationWeight)
		}
	}
	return m
})
