package toolsearch_test

import (
	"fmt"
	"testing"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/toolsearch"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/toolsearch/evaluation"
)

// BenchmarkSearch10000 searches 10,000 tools: the labelled set's real definitions, copied
// under as many server keys as it takes, with the set's queries in turn.
func BenchmarkSearch10000(b *testing.B) {
	set, err := evaluation.LoadServers("../../testdata/toolsearch")
	if err != nil {
		b.Fatal(err)
	}
	ix := toolsearch.New(evaluation.Scale(set, 10000))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ix.Search(set.Queries[i%len(set.Queries)].Text, toolsearch.Options{})
	}
}

func ExampleIndex_Search() {
	tools := []toolsearch.Tool{
		{Name: "files:create_directory", Server: "files", Original: "create_directory", Description: "Create a new directory."},
		{Name: "files:read_file", Server: "files", Original: "read_file", Description: "Read the contents of a file."},
		{Name: "chat:post_message", Server: "chat", Original: "post_message", Description: "Post a message to a channel."},
	}
	ix := toolsearch.New(tools)
	for _, h := range ix.Search("make a new folder", toolsearch.Options{}) {
		fmt.Println(tools[h.Tool].Name)
	}
	// Output:
	// files:create_directory
}

// BenchmarkNew builds the index of the labelled set's 313 tools, as the first search of a
// catalog does.
func BenchmarkNew(b *testing.B) {
	set, err := evaluation.LoadServers("../../testdata/toolsearch")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		toolsearch.New(set.Tools)
	}
}

// BenchmarkSearchTasks10000 searches 10,000 tools (LiveMCPBench's suite, copied) with its
// tasks: long requests of several steps, each searched whole and step by step.
func BenchmarkSearchTasks10000(b *testing.B) {
	sets, err := evaluation.LoadAll("../../testdata/toolsearch")
	if err != nil {
		b.Fatal(err)
	}
	var set *evaluation.Set
	for _, s := range sets {
		if s.Name == "LiveMCPBench" {
			set = s
		}
	}
	ix := toolsearch.New(evaluation.Scale(set, 10000))
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ix.Search(set.Queries[i%len(set.Queries)].Text, toolsearch.Options{})
	}
}
