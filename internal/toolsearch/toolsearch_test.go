package toolsearch

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWords(t *testing.T) {
	for in, want := range map[string]string{
		"create_pull_request":          "create pull request",
		"getHTTPResponse":              "get http response",
		"API-retrieve-a-page":          "api retrieve a page",
		"github:search_code":           "github search code",
		"utf8Decode v2.1":              "utf 8 decode v 2 1",
		"resolve-library-id":           "resolve library id",
		"browser_take_screenshot":      "browser take screenshot",
		"Café straße":                  "café straße",
		"sequentialthinking":           "sequentialthinking",
		"kubectl.get/pods (namespace)": "kubectl get pods namespace",
	} {
		var got []string
		words(in, func(w string) { got = append(got, w) })
		if diff := cmp.Diff(strings.Fields(want), got); diff != "" {
			t.Errorf("words(%q) (-want +got):\n%s", in, diff)
		}
	}
}

func TestStemMergesInflections(t *testing.T) {
	for _, group := range [][]string{
		{"create", "creates", "created", "creating", "creation"},
		{"file", "files"},
		{"directory", "directories"},
		{"run", "running", "runs"},
		{"search", "searches", "searching"},
		{"message", "messages"},
		{"process", "processes"},
	} {
		for _, w := range group[1:] {
			if stem(w) != stem(group[0]) {
				t.Errorf("stem(%q) = %q, stem(%q) = %q: want the same", w, stem(w), group[0], stem(group[0]))
			}
		}
	}
	if stem("status") == stem("stat") || stem("bus") == stem("bu") {
		t.Errorf("stem strips the s of -us words")
	}
}

func index(t *testing.T) *Index {
	t.Helper()
	defs := []struct{ server, def string }{
		{"files", `{"name":"create_directory","description":"Create a new directory or ensure it exists.","inputSchema":{"type":"object","properties":{"path":{"type":"string","description":"Where to create it"}}}}`},
		{"files", `{"name":"read_file","description":"Read the complete contents of a file as text.","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`},
		{"files", `{"name":"move_file","description":"Move or rename files and directories.","inputSchema":{"type":"object","properties":{"source":{"type":"string"},"destination":{"type":"string"}}}}`},
		{"github", `{"name":"create_issue","title":"Open an issue","description":"Create a new issue in a GitHub repository.","inputSchema":{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"title":{"type":"string"}}}}`},
		{"github", `{"name":"create_pull_request","description":"Create a new pull request in a GitHub repository.","inputSchema":{"type":"object"}}`},
		{"github", `{"name":"read_file","description":"Get the contents of a file from a GitHub repository.","inputSchema":{"type":"object"}}`},
		{"chat", `{"name":"post_message","description":"Post a new message to a channel.","inputSchema":{"type":"object","properties":{"channel_id":{"type":"string","description":"The channel to post to"}}}}`},
	}
	var tools []Tool
	for _, d := range defs {
		var n struct{ Name string }
		json.Unmarshal([]byte(d.def), &n)
		tools = append(tools, FromDefinition(d.server+":"+n.Name, d.server, n.Name, json.RawMessage(d.def)))
	}
	return New(tools)
}

func names(ix *Index, hits []Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, ix.tools[h.Tool].Name)
	}
	return out
}

func TestSearch(t *testing.T) {
	ix := index(t)
	for _, c := range []struct {
		query string
		opts  Options
		first string
	}{
		{"make a new folder", Options{}, "files:create_directory"},
		{"rename a document", Options{}, "files:move_file"},
		{"open a PR", Options{}, "github:create_pull_request"},
		{"report a bug in my repo", Options{}, "github:create_issue"},
		{"send a note to the team room", Options{}, "chat:post_message"},
		{"CreateDirectory", Options{}, "files:create_directory"},
		// The exact name, as exposed or as its server names it, comes first.
		{"github:read_file", Options{}, "github:read_file"},
		{"read_file", Options{Server: "github"}, "github:read_file"},
		{"contents of a file", Options{Server: "github"}, "github:read_file"},
	} {
		hits := ix.Search(c.query, c.opts)
		got := names(ix, hits)
		if len(got) == 0 || got[0] != c.first {
			t.Errorf("Search(%q, %+v) = %v, want %s first", c.query, c.opts, got, c.first)
		}
		if c.opts.Server != "" {
			for _, n := range got {
				if !strings.HasPrefix(n, c.opts.Server+":") {
					t.Errorf("Search(%q, %+v) found %s of another server", c.query, c.opts, n)
				}
			}
		}
	}
}

// A query that matches nothing, not a word nor a synonym, finds nothing; one that matches
// anything at all finds as many tools as asked for, when that many match: a model given
// candidates picks, a model given none has nowhere to go.
func TestSearchFindsAllThatMatchesAndNothingElse(t *testing.T) {
	ix := index(t)
	for _, q := range []string{"", "read_file", "x"} {
		hits := ix.Search(q, Options{Server: "nosuchserver"})
		if len(hits) != 0 {
			t.Errorf("Search(%q) of an unknown server = %v, want none", q, names(ix, hits))
		}
	}
	for _, q := range []string{"", "the of and", "bake a chocolate cake", "zzz qqq"} {
		if hits := ix.Search(q, Options{}); len(hits) != 0 {
			t.Errorf("Search(%q) = %v, want none", q, names(ix, hits))
		}
	}
	// Six tools match a word of the first query (all but create_pull_request), one the third.
	for _, c := range []struct {
		query string
		limit int
		want  int
	}{
		{"read the file in the channel", 5, 5},
		{"read the file in the channel", 10, 6},
		{"channel", 5, 1},
		{"a new thing", 3, 3},
	} {
		if hits := ix.Search(c.query, Options{Limit: c.limit}); len(hits) != c.want {
			t.Errorf("Search(%q, limit %d) = %v, want %d tools", c.query, c.limit, names(ix, hits), c.want)
		}
	}
}

// A request of several steps finds a tool for each: here a step with one word of its own
// (the channel) among steps that many tools match.
func TestSearchFindsEachStep(t *testing.T) {
	ix := index(t)
	hits := names(ix, ix.Search("create a new folder for the project, read the contents of the file there, and then post a short message to the channel", Options{Limit: 4}))
	for _, want := range []string{"files:create_directory", "chat:post_message"} {
		if !slices.Contains(hits, want) {
			t.Errorf("found %v, want %s among them", hits, want)
		}
	}
	if got := splitSteps("Read sales.xlsx, plot it by month and then save it to /root/figs/sale.png. Done? yes; ok\nnext"); !slices.Equal(got,
		[]string{"Read sales.xlsx", "plot it by month", "save it to /root/figs/sale.png", "Done", "yes", "ok", "next"}) {
		t.Errorf("splitSteps = %q", got)
	}
}

func TestSearchLimit(t *testing.T) {
	ix := index(t)
	all := ix.Search("create a new file directory issue pull request", Options{Limit: 10})
	if len(all) < 3 {
		t.Fatalf("want at least 3 hits, got %v", names(ix, all))
	}
	two := ix.Search("create a new file directory issue pull request", Options{Limit: 2})
	if diff := cmp.Diff(names(ix, all[:2]), names(ix, two)); diff != "" {
		t.Errorf("Limit 2 is not the first two of the full ranking (-want +got):\n%s", diff)
	}
	if !slices.IsSortedFunc(all, func(a, b Hit) int {
		if better(a, b) {
			return -1
		}
		return 1
	}) {
		t.Errorf("hits not sorted: %+v", all)
	}
}

func TestFromDefinition(t *testing.T) {
	got := FromDefinition("k:t", "k", "t", json.RawMessage(`{"name":"t","annotations":{"title":"Annotated"},"description":"D","inputSchema":{"type":"object","properties":{"b":{"type":"string","description":"bee"},"a":true}}}`))
	want := Tool{Name: "k:t", Server: "k", Original: "t", Title: "Annotated", Description: "D", Params: []Param{{"a", ""}, {"b", "bee"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := FromDefinition("k:t", "k", "t", json.RawMessage(`[1]`)); got.Name != "k:t" || got.Description != "" {
		t.Errorf("a definition that is not an object: %+v", got)
	}
}
