package aggregator

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
)

// The lines that name the definitions the fixture's -malformed adds (with -full).
var malformedLines = []string{
	`server "raw": tool "plain" is withheld: /inputSchema/type is missing; the MCP schema requires "object"`,
	`server "raw": prompt "unnamed_args" is withheld: /arguments/0/name is missing; the MCP schema requires a string`,
	`server "raw": resource "raw://static/late" is withheld: /annotations/lastModified is "yesterday"; the TypeScript clients require an ISO 8601 date-time with seconds and a time zone ("2025-01-12T15:00:58Z")`,
	`server "raw": resource template "raw://drafts/{id}" is withheld: /name is missing; the MCP schema requires a string`,
}

// directLists lists what the fixture with args offers, talking to it directly: each list
// field's definitions as the server wrote them.
func directLists(t *testing.T, args ...string) map[string][]json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, fixtureBin, args...)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer in.Close()
	r := bufio.NewReader(out)
	lists := map[string][]json.RawMessage{}
	for i, req := range []string{"initialize", "tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
		fmt.Fprintf(in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`+"\n", i, req)
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatalf("%s: %v", req, err)
		}
		var answer struct {
			Result map[string]json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(line, &answer); err != nil {
			t.Fatalf("%s: %s", req, line)
		}
		for field, v := range answer.Result {
			var defs []json.RawMessage
			if json.Unmarshal(v, &defs) == nil {
				lists[field] = defs
			}
		}
	}
	return lists
}

// listed returns the definitions of an aggregated list answer.
func listed(t *testing.T, m msg, field string) []json.RawMessage {
	t.Helper()
	var res map[string][]json.RawMessage
	if err := json.Unmarshal(m.Result, &res); err != nil {
		t.Fatalf("%s: %v", m.Line, err)
	}
	return res[field]
}

// A definition that breaks the MCP schema is withheld: every other definition of its server
// and of the others is listed byte for byte (apart from the name); each withheld one is named
// once on stderr and to the client at warning level; a request for it says why.
func TestWithheldDefinitions(t *testing.T) {
	rawArgs := []string{"-full", "-malformed", "-scheme", "raw"}
	c := serve(t, Options{}, fx("raw", rawArgs...), fx("good", "-full", "-scheme", "good"))
	c.initialize(`{}`)

	for _, l := range []struct{ field, method, member string }{
		{"tools", "tools/list", "name"},
		{"prompts", "prompts/list", "name"},
		{"resources", "resources/list", "uri"},
		{"resourceTemplates", "resources/templates/list", "uriTemplate"},
	} {
		got := listed(t, c.call(l.method, ""), l.field)
		var want []string
		for _, key := range []string{"good", "raw"} {
			args := rawArgs
			if key == "good" {
				args = []string{"-full", "-scheme", "good"}
			}
			for _, def := range directLists(t, args...)[l.field] {
				if slices.ContainsFunc(malformedLines, func(line string) bool { return strings.Contains(line, `"`+mustString(t, def, l.member)+`"`) }) {
					continue // withheld
				}
				if l.member == "name" {
					def, _, _ = renameTool(def, key+":"+mustString(t, def, "name"))
				}
				want = append(want, string(def))
			}
		}
		var gotText []string
		for _, def := range got {
			if !strings.Contains(string(def), instructionsPrefix) {
				gotText = append(gotText, string(def))
			}
		}
		if !slices.Equal(gotText, want) {
			t.Errorf("%s:\n got %s\nwant %s", l.method, strings.Join(gotText, "\n     "), strings.Join(want, "\n     "))
		}
	}

	var logged []string
	for range malformedLines {
		m := c.note("notifications/message")
		var p struct{ Level, Data string }
		json.Unmarshal(m.Params, &p)
		if p.Level != "warning" {
			t.Errorf("a log message of level %q: %s", p.Level, m.Line)
		}
		logged = append(logged, p.Data)
	}
	if !slices.Equal(logged, malformedLines) {
		t.Errorf("the client was told:\n%s\nwant:\n%s", strings.Join(logged, "\n"), strings.Join(malformedLines, "\n"))
	}
	for _, line := range malformedLines {
		if n := strings.Count(c.log.String(), line); n != 1 {
			t.Errorf("stderr names it %d times, want once: %s\n%s", n, line, c.log)
		}
	}

	why := `it is withheld because clients would reject the whole list over its definition: `
	wantError(t, c.call("tools/call", `{"name":"raw:plain","arguments":{}}`), -32602,
		`Unknown tool: raw:plain: server "raw" lists this tool, but `+why+`/inputSchema/type is missing; the MCP schema requires "object"`)
	wantError(t, c.call("prompts/get", `{"name":"raw:unnamed_args"}`), -32602,
		`Unknown prompt: raw:unnamed_args: server "raw" lists this prompt, but `+why+`/arguments/0/name is missing`)
	wantError(t, c.call("completion/complete", `{"ref":{"type":"ref/prompt","name":"raw:unnamed_args"},"argument":{"name":"a","value":""}}`), -32602,
		`Unknown prompt: raw:unnamed_args: server "raw" lists this prompt, but `+why)
	wantError(t, c.call("resources/read", `{"uri":"raw://static/late"}`), era.CodeResourceNotFound,
		`Resource not found: raw://static/late: server "raw" lists this resource, but `+why+`/annotations/lastModified is "yesterday"`)
	// The rest of the server serves as before.
	if m := c.call("tools/call", `{"name":"raw:echo","arguments":{"x":1}}`); m.Error != nil {
		t.Errorf("raw:echo: %s", m.Line)
	}
	if m := c.call("resources/read", `{"uri":"raw://static/a"}`); m.Error != nil {
		t.Errorf("reading raw://static/a: %s", m.Line)
	}

	// A list change that brings a malformed tool: it is named, once; those named before are
	// not named again. (What the client sees did not change: it gets no list_changed.)
	c.call("tools/call", `{"name":"raw:grow"}`)
	grown := `server "raw": tool "grown_1" is withheld: /inputSchema/type is "array"; the MCP schema requires "object"`
	if m := c.note("notifications/message"); !strings.Contains(m.Line, `"level":"warning"`) || !strings.Contains(m.Line, "grown_1") {
		t.Errorf("after the list change the client was told %s; want %s", m.Line, grown)
	}
	if got := names(t, c.call("tools/list", ""), "tools"); slices.Contains(got, "raw:grown_1") || !slices.Contains(got, "raw:grow") {
		t.Errorf("tools after the list change: %v", got)
	}
	wantError(t, c.call("tools/call", `{"name":"raw:grown_1"}`), -32602, `/inputSchema/type is "array"`)
	for _, line := range append(malformedLines, grown) {
		if n := strings.Count(c.log.String(), line); n != 1 {
			t.Errorf("stderr names it %d times, want once: %s\n%s", n, line, c.log)
		}
	}
}

func mustString(t *testing.T, def json.RawMessage, member string) string {
	t.Helper()
	s, err := stringMember(def, member)
	if err != nil {
		// A definition without it (a withheld template): its place in the list names it.
		return "\x00"
	}
	return s
}

// The tool filters see the same rule: a withheld tool is not listed even when includeTools
// names it, and a tool the filters hide is not checked (nor named) at all.
func TestWithheldAndFilters(t *testing.T) {
	include := fx("in", "-malformed")
	include.Tools = config.NewFilter("c.json", "mcpServers", "in", config.FilterField{Name: "includeTools", Patterns: []string{"plain", "echo"}})
	exclude := fx("out", "-malformed")
	exclude.Tools = config.NewFilter("c.json", "mcpServers", "out", config.FilterField{Name: "excludeTools", Patterns: []string{"plain"}})
	c := serve(t, Options{}, include, exclude)
	c.initialize(`{}`)
	got := names(t, c.call("tools/list", ""), "tools")
	if slices.Contains(got, "in:plain") || slices.Contains(got, "out:plain") || !slices.Contains(got, "in:echo") {
		t.Errorf("tools: %v", got)
	}
	m := c.note("notifications/message")
	if !strings.Contains(m.Line, `server \"in\": tool \"plain\" is withheld`) {
		t.Errorf("the client was told %s", m.Line)
	}
	if strings.Contains(c.log.String(), `server "out": tool "plain"`) {
		t.Errorf("a tool the filters hide was named as withheld:\n%s", c.log)
	}
	wantError(t, c.call("tools/call", `{"name":"out:plain"}`), -32602, `"excludeTools"`)
}

// A reload that adds a server with a malformed definition names it, once.
func TestWithheldAfterReload(t *testing.T) {
	c, path := serveFile(t, `{"mcpServers": {"a": {"command": "$FIXTURE"}}}`)
	c.initialize(`{}`)
	writeFile(t, path, `{"mcpServers": {"a": {"command": "$FIXTURE"}, "b": {"command": "$FIXTURE", "args": ["-malformed"]}}}`)
	c.agg.Reload()
	line := `server "b": tool "plain" is withheld: /inputSchema/type is missing; the MCP schema requires "object"`
	// The warning and the list change, in either order.
	var told, changed bool
	for deadline := time.After(10 * time.Second); !told || !changed; {
		select {
		case m := <-c.notes:
			switch m.Method {
			case "notifications/message":
				told = true
				if !strings.Contains(m.Line, `tool \"plain\" is withheld`) {
					t.Errorf("after the reload the client was told %s; want %s", m.Line, line)
				}
			case "notifications/tools/list_changed":
				changed = true
			}
		case <-deadline:
			t.Fatalf("after the reload: a warning %v, a list change %v", told, changed)
		}
	}
	got := names(t, c.call("tools/list", ""), "tools")
	if slices.Contains(got, "b:plain") || !slices.Contains(got, "b:echo") {
		t.Errorf("tools after the reload: %v", got)
	}
	if n := strings.Count(c.log.String(), line); n != 1 {
		t.Errorf("stderr names it %d times, want once:\n%s", n, c.log)
	}
}

// check names the withheld definitions of each server; the server is healthy, and its counts
// are of what is served.
func TestCheckWithheld(t *testing.T) {
	cfg := &config.Config{File: filepath.Join(t.TempDir(), "c.json"), Servers: []config.Server{fx("raw", "-full", "-malformed", "-scheme", "raw")}}
	rep := Check(context.Background(), cfg, Options{})
	if !rep.OK || len(rep.Servers) != 1 || rep.Servers[0].Status != "ok" {
		t.Fatalf("the report: %+v", rep)
	}
	s := rep.Servers[0]
	var lines []string
	for _, w := range s.Withheld {
		lines = append(lines, w.Line)
		if len(w.Violations) == 0 || w.Violations[0].Pointer == "" {
			t.Errorf("a withheld definition without its violations: %+v", w)
		}
	}
	if !slices.Equal(lines, malformedLines) {
		t.Errorf("withheld:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(malformedLines, "\n"))
	}
	direct := directLists(t, "-full", "-malformed", "-scheme", "raw")
	if s.Tools != len(direct["tools"])-1 || s.Prompts != len(direct["prompts"])-1 || s.Resources != len(direct["resources"])-1 {
		t.Errorf("counts: %d tools, %d prompts, %d resources; want what is served: %d, %d, %d",
			s.Tools, s.Prompts, s.Resources, len(direct["tools"])-1, len(direct["prompts"])-1, len(direct["resources"])-1)
	}
	for _, tool := range rep.Tools {
		if tool.Name == "raw:plain" {
			t.Errorf("check lists the withheld tool among the tools")
		}
	}
}

// BenchmarkBuildCatalog2000 builds the catalog of 10 servers of 200 tools each, every tool
// checked against the MCP schema, as the start-up does (the check is most of it).
func BenchmarkBuildCatalog2000(b *testing.B) {
	var servers []*server
	for i := range 10 {
		s := &server{key: fmt.Sprintf("s%02d", i), log: slog.New(slog.DiscardHandler)}
		for j := range 200 {
			s.lists[kindTools] = append(s.lists[kindTools], json.RawMessage(fmt.Sprintf(
				`{"name":"filler_%04d","description":"Filler tool number %d, here to make the list long.","inputSchema":{"type":"object","properties":{"q":{"type":"string","description":"a query"}},"required":["q"]}}`, j, j)))
		}
		servers = append(servers, s)
	}
	for b.Loop() {
		c, err := buildCatalog(servers, "__")
		if err != nil || len(c.order) != 2000 || len(c.withheld) != 0 {
			b.Fatalf("%v: %d tools, %d withheld", err, len(c.order), len(c.withheld))
		}
	}
}
