package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/toolsearch"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/toolsearch/evaluation"
)

// The tool search's benchmark (-only toolsearch; also part of the full run): retrieval quality
// against plain BM25 on the labelled sets of testdata/toolsearch, the search's latency on
// 10,000 tools, and the size of tools/list with and without --tool-search on the catalog of the
// recorded servers, served by the real binary. It writes the toolsearch section of the report.

// toolSearchReport measures and renders the section.
func (b *bench) toolSearchReport(dir string) string {
	sets, err := evaluation.LoadAll(dir)
	if err != nil {
		log.Fatal(err)
	}
	servers := sets[0] // ours, for the latency and the list
	var r strings.Builder
	r.WriteString("### Tool search (--tool-search)\n\n")
	r.WriteString("Retrieval on each labelled set of testdata/toolsearch (README.md there has their sources and licences). A question has one answer (any of its tools); " +
		"a task (LiveMCPBench, MetaTool multi-tool) has one answer per tool it needs, and its recall@k is the share of them among the first k results. " +
		"MRR counts the first relevant tool within the first ten. Plain BM25 is Okapi BM25 (k1 1.2, b 0.75) over the same fields as the search " +
		"(exposed name, title, description, parameter names and descriptions) in one, split at punctuation and lower-cased, computed in the same run. " +
		"Each search asks for ten results.\n\n")
	r.WriteString("| set | tools | servers | queries | ranking | recall@1 | recall@5 | MRR@10 |\n|---|---|---|---|---|---|---|---|\n")
	for _, s := range sets {
		ours, base := evaluation.Evaluate(s, evaluation.Search(s)), evaluation.Evaluate(s, evaluation.BM25(s))
		kind := ""
		if s.Tasks {
			kind = " (tasks)"
		}
		fmt.Fprintf(&r, "| %s%s | %d | %d | %d | toolsearch | %.3f | %.3f | %.3f |\n", s.Name, kind, len(s.Tools), s.Servers, len(s.Queries), ours.RecallAt1, ours.RecallAt5, ours.MRR)
		fmt.Fprintf(&r, "| | | | | plain BM25 | %.3f | %.3f | %.3f |\n", base.RecallAt1, base.RecallAt5, base.MRR)
		fmt.Fprintf(&r, "| | | | | difference | %+.3f | %+.3f | %+.3f |\n", ours.RecallAt1-base.RecallAt1, ours.RecallAt5-base.RecallAt5, ours.MRR-base.MRR)
		fmt.Fprintf(os.Stderr, "%s: recall@5 %.3f (BM25 %.3f), recall@1 %.3f (%.3f), MRR %.3f (%.3f)\n", s.Name, ours.RecallAt5, base.RecallAt5, ours.RecallAt1, base.RecallAt1, ours.MRR, base.MRR)
	}

	// Latency: every query of the set in turn, over the set's tools copied to 10,000.
	tools := evaluation.Scale(servers, 10000)
	start := time.Now()
	ix := toolsearch.New(tools)
	build := time.Since(start)
	var lat []time.Duration
	for range 20 {
		for _, q := range servers.Queries {
			t := time.Now()
			ix.Search(q.Text, toolsearch.Options{})
			lat = append(lat, time.Since(t))
		}
	}
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	fmt.Fprintf(&r, "\nSearch over 10,000 tools (the recorded definitions under %d copies of each server key), %d searches: p50 %s, p90 %s, p99 %s; the index builds in %s (at the first search of each catalog).\n",
		(len(tools)+len(servers.Tools)-1)/len(servers.Tools), len(lat), us(p(0.5)), us(p(0.9)), us(p(0.99)), build.Round(time.Millisecond))
	fmt.Fprintf(os.Stderr, "search of 10,000 tools: p50 %s, p99 %s\n", us(p(0.5)), us(p(0.99)))

	// tools/list through the real binary, with each recorded server served by a fixture.
	plain, search := b.listSize(dir, false), b.listSize(dir, true)
	fmt.Fprintf(&r, "\ntools/list of the %d recorded servers (%d tools) through the aggregator: %s without the mode (about %s tokens), %s with --tool-search (about %s tokens); "+
		"tokens estimated as bytes / 4, the usual rate for English (JSON takes more tokens per byte: at bytes / 3 the mode's list is %s tokens).\n",
		servers.Servers, len(servers.Tools), kb(plain), thousands(plain/4), kb(search), thousands(search/4), thousands(search/3))
	fmt.Fprintf(os.Stderr, "tools/list: %d bytes, with --tool-search %d bytes\n", plain, search)
	return r.String()
}

// listSize starts the aggregator over the recorded servers of dir (fixtures with -tools-file)
// and returns the size of its answer to tools/list, in bytes.
func (b *bench) listSize(dir string, toolSearch bool) int {
	files, _ := filepath.Glob(filepath.Join(dir, "servers", "*.json"))
	servers := map[string]any{}
	for _, f := range files {
		abs, _ := filepath.Abs(f)
		servers[strings.TrimSuffix(filepath.Base(f), ".json")] = map[string]any{"command": *fixtureBin, "args": []string{"-only-fillers", "-tools-file", abs}}
	}
	data, _ := json.Marshal(map[string]any{"mcpServers": servers})
	b.seq++
	path := filepath.Join(b.dir, fmt.Sprintf("config-%d.json", b.seq))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		log.Fatal(err)
	}
	args := []string{"--config", path, "--separator", "__"}
	if toolSearch {
		args = append(args, "--tool-search")
	}
	cmd := exec.Command(*aggBin, args...)
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	in := bufio.NewReaderSize(stdout, 1<<20)
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	if _, err := in.ReadBytes('\n'); err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			log.Fatal(err)
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(line, &m) == nil && string(m.ID) == "2" {
			return len(m.Result)
		}
	}
}

func kb(n int) string { return fmt.Sprintf("%.1f KB", float64(n)/1000) }

// thousands writes n with thousands separated by commas.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
