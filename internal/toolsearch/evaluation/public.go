package evaluation

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/toolsearch"
)

// The public sets other people wrote, copied into testdata/toolsearch under their licences
// (README.md there names each source, commit and licence): their files are read as published.

// LoadAll reads every labelled set of dir (testdata/toolsearch): ours, mcpproxy-go's,
// LiveMCPBench's and MetaTool's two.
func LoadAll(dir string) ([]*Set, error) {
	servers, err := LoadServers(dir)
	if err != nil {
		return nil, err
	}
	mcpproxy, err := LoadMCPProxy(filepath.Join(dir, "mcpproxy"))
	if err != nil {
		return nil, err
	}
	live, err := LoadLiveMCPBench(filepath.Join(dir, "livemcpbench"))
	if err != nil {
		return nil, err
	}
	single, multi, err := LoadMetaTool(filepath.Join(dir, "metatool"))
	if err != nil {
		return nil, err
	}
	return []*Set{servers, mcpproxy, live, single, multi}, nil
}

// LoadLiveMCPBench reads LiveMCPBench's tool suite (tools.json: 70 servers and their tools/list
// results) and its 95 annotated tasks (all_annotations.json), whole requests of several steps
// each with the tools an annotator used. A task's answers are the tools it lists, each found
// under any server that has a tool of that name; a tool that no server of the suite has is left
// out, and so is a task left with none.
func LoadLiveMCPBench(dir string) (*Set, error) {
	var suite []struct {
		Tools map[string]struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"tools"`
	}
	var tasks []struct {
		Question string `json:"Question"`
		Meta     struct {
			Tools string `json:"Tools"`
		} `json:"Annotator Metadata"`
	}
	for file, v := range map[string]any{"tools.json": &suite, "all_annotations.json": &tasks} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, v); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	set := &Set{Name: "LiveMCPBench", Tasks: true}
	byName := map[string][]string{} // bare tool name: exposed names
	for _, entry := range suite {
		keys := make([]string, 0, len(entry.Tools))
		for k := range entry.Tools {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, key := range keys {
			set.Servers++
			for _, def := range entry.Tools[key].Tools {
				var d struct {
					Name string `json:"name"`
				}
				if err := json.Unmarshal(def, &d); err != nil {
					return nil, fmt.Errorf("tools.json: server %q: %w", key, err)
				}
				exposed := key + Separator + d.Name
				set.Tools = append(set.Tools, toolsearch.FromDefinition(exposed, key, d.Name, def))
				set.Defs = append(set.Defs, def)
				byName[d.Name] = append(byName[d.Name], exposed)
			}
		}
	}
	for _, t := range tasks {
		var answers [][]string
		seen := map[string]bool{}
		// "1. geocode_address\n2. find_parking_facilities"
		for _, line := range strings.Split(t.Meta.Tools, "\n") {
			line = strings.TrimSpace(line)
			if _, rest, numbered := strings.Cut(line, ". "); numbered {
				line = strings.TrimSpace(rest)
			}
			if line == "" || seen[line] || len(byName[line]) == 0 {
				continue
			}
			seen[line] = true
			answers = append(answers, byName[line])
		}
		if len(answers) > 0 {
			set.Queries = append(set.Queries, Query{Text: t.Question, Answers: answers})
		}
	}
	return set, set.check()
}

// LoadMetaTool reads MetaTool's tools (plugin_des.json: 199 ChatGPT plugins, a name and a
// description each) and two sets of queries over them: a sample of its single-tool queries
// (all_clean_data.sample.csv, one in twenty of all_clean_data.csv) and its multi-tool queries
// (multi_tool_query_golden.json, two tools each). Each plugin is a server of one tool named
// after it.
func LoadMetaTool(dir string) (single, multi *Set, err error) {
	data, err := os.ReadFile(filepath.Join(dir, "plugin_des.json"))
	if err != nil {
		return nil, nil, err
	}
	var plugins map[string]string
	if err := json.Unmarshal(data, &plugins); err != nil {
		return nil, nil, fmt.Errorf("plugin_des.json: %w", err)
	}
	names := make([]string, 0, len(plugins))
	for n := range plugins {
		names = append(names, n)
	}
	slices.Sort(names)
	var tools []toolsearch.Tool
	for _, n := range names {
		tools = append(tools, toolsearch.Tool{Name: n + Separator + n, Server: n, Original: n, Description: plugins[n]})
	}
	exposed := func(n string) string { return n + Separator + n }

	single = &Set{Name: "MetaTool single-tool", Tools: tools, Servers: len(tools)}
	f, err := os.Open(filepath.Join(dir, "all_clean_data.sample.csv"))
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	r := csv.NewReader(f)
	for first := true; ; first = false {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("all_clean_data.sample.csv: %w", err)
		}
		if first || len(rec) != 2 {
			continue // the header: Query,Tool
		}
		single.Queries = append(single.Queries, Query{Text: rec[0], Answers: [][]string{{exposed(rec[1])}}})
	}

	data, err = os.ReadFile(filepath.Join(dir, "multi_tool_query_golden.json"))
	if err != nil {
		return nil, nil, err
	}
	var golden []struct {
		Query string   `json:"query"`
		Tool  []string `json:"tool"`
	}
	if err := json.Unmarshal(data, &golden); err != nil {
		return nil, nil, fmt.Errorf("multi_tool_query_golden.json: %w", err)
	}
	multi = &Set{Name: "MetaTool multi-tool", Tools: tools, Servers: len(tools), Tasks: true}
	for _, q := range golden {
		var answers [][]string
		for _, t := range q.Tool {
			answers = append(answers, []string{exposed(t)})
		}
		multi.Queries = append(multi.Queries, Query{Text: q.Query, Answers: answers})
	}
	if err := single.check(); err != nil {
		return nil, nil, err
	}
	return single, multi, multi.check()
}
