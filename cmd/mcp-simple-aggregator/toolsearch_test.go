package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The --tool-search tests run the real binary over fixture servers that list real servers'
// recorded tools (testdata/toolsearch/servers, fixture -tools-file).

// recordedServer is a config entry of a fixture that lists the recorded tools of server name.
func recordedServer(t *testing.T, name string, extra string) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "testdata", "toolsearch", "servers", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return `{"command": "$FIXTURE", "args": ["-only-fillers", "-tools-file", ` + jsonString(path) + `]` + extra + `}`
}

// searchResult is the decoded text of a search_tools answer.
type searchResult struct {
	Tools   []json.RawMessage `json:"tools"`
	Hint    string            `json:"hint"`
	Omitted []string          `json:"omitted"`
	Note    string            `json:"note"`
}

// toolResult decodes a tools/call result's text and isError.
func toolResult(t *testing.T, m message) (text string, isError bool) {
	t.Helper()
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("not a tool result: %s", m.Line)
	}
	return r.Content[0].Text, r.IsError
}

func search(t *testing.T, agg *peer, args string) (searchResult, []string) {
	t.Helper()
	m := agg.call("tools/call", `{"name":"search_tools","arguments":`+args+`}`)
	text, isError := toolResult(t, m)
	if isError {
		t.Fatalf("search_tools %s: error %s", args, text)
	}
	var r searchResult
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		t.Fatalf("search_tools %s: the text is not JSON: %v\n%s", args, err, text)
	}
	var names []string
	for _, d := range r.Tools {
		var n struct{ Name string }
		json.Unmarshal(d, &n)
		names = append(names, n.Name)
	}
	return r, names
}

func toolSearchConfig(t *testing.T) string {
	return `{"mcpServers": {
		"fs": ` + recordedServer(t, "filesystem", `, "excludeTools": ["move_file"]`) + `,
		"gh": ` + recordedServer(t, "github", "") + `,
		"fx": {"command": "$FIXTURE", "args": ["-instructions", "Tools to test the aggregator with. Each does one odd thing."], "alwaysLoad": true}
	}}`
}

// tools/list in the mode: the aggregator's three tools, then the tools of the servers with
// "alwaysLoad": true, as without the mode; search finds the others with their definitions as
// the list would give them; the instructions name the servers.
func TestToolSearchListAndSearch(t *testing.T) {
	config := toolSearchConfig(t)
	plain := startAggregator(t, config)
	plain.initialize("test")
	all, _ := tools(t, plain.call("tools/list", ""))

	agg := startAggregator(t, config, "--tool-search")
	init := agg.initialize("test")
	listed, names := tools(t, agg.call("tools/list", ""))
	want := []string{"search_tools", "call_tool", "call_read_only_tool"}
	_, plainNames := tools(t, plain.call("tools/list", ""))
	for _, n := range plainNames {
		if strings.HasPrefix(n, "fx:") {
			want = append(want, n)
			if !bytes.Equal(listed[n], all[n]) {
				t.Errorf("%s (alwaysLoad) listed as %s, want %s", n, listed[n], all[n])
			}
		}
	}
	if !slices.Equal(names, want) {
		t.Errorf("tools/list = %q, want %q", names, want)
	}
	var annotations struct {
		Annotations struct {
			ReadOnlyHint bool `json:"readOnlyHint"`
		} `json:"annotations"`
	}
	for name, readOnly := range map[string]bool{"search_tools": true, "call_tool": false, "call_read_only_tool": true} {
		annotations.Annotations.ReadOnlyHint = !readOnly
		json.Unmarshal(listed[name], &annotations)
		if annotations.Annotations.ReadOnlyHint != readOnly {
			t.Errorf("%s: readOnlyHint %v, want %v: %s", name, !readOnly, readOnly, listed[name])
		}
	}
	// The instructions have a line per server; the search tool's description its key only, so
	// that the list does not grow with each server (internal/aggregator's TestToolSearchListSize).
	for _, s := range []string{"fs (13 tools): tools such as read_file", "gh (26 tools)", "tools, listed in full): Tools to test the aggregator with.", "search_tools"} {
		if !bytes.Contains(init.Result, []byte(s)) {
			t.Errorf("the instructions lack %q:\n%s", s, init.Result)
		}
	}
	if !bytes.Contains(listed["search_tools"], []byte("Servers: fs, fx, gh.")) || bytes.Contains(listed["search_tools"], []byte("tools such as")) {
		t.Errorf("search_tools' description does not name the servers by key alone:\n%s", listed["search_tools"])
	}

	// The servers' own instructions follow.
	if !bytes.Contains(init.Result, []byte(`<instructions server=\"fx\">`)) {
		t.Errorf("the servers' instructions are missing: %s", init.Result)
	}

	r, found := search(t, agg, `{"query":"make a new folder"}`)
	if len(found) == 0 || found[0] != "fs:create_directory" {
		t.Fatalf("make a new folder: found %q, want fs:create_directory first", found)
	}
	if !bytes.Equal(r.Tools[0], all["fs:create_directory"]) {
		t.Errorf("search gave the definition\n%s\nthe list without the mode\n%s", r.Tools[0], all["fs:create_directory"])
	}
	if _, found := search(t, agg, `{"query":"gh:create_issue"}`); len(found) == 0 || found[0] != "gh:create_issue" {
		t.Errorf("the exact name gh:create_issue found %q", found)
	}
	if _, found := search(t, agg, `{"query":"read the contents of a file","server":"gh","limit":3}`); len(found) == 0 || len(found) > 3 {
		t.Errorf("server gh, limit 3: found %q", found)
	} else {
		for _, n := range found {
			if !strings.HasPrefix(n, "gh:") {
				t.Errorf("server gh: found %s", n)
			}
		}
	}
	if r, found := search(t, agg, `{"query":"bake a chocolate cake"}`); len(found) != 0 || !strings.Contains(r.Hint, "other words") {
		t.Errorf("a query that matches nothing: %q, hint %q; want no tools and a hint", found, r.Hint)
	}
	// The filters hide from the search what they hide from the list.
	if _, found := search(t, agg, `{"query":"fs:move_file"}`); slices.Contains(found, "fs:move_file") {
		t.Errorf("the hidden fs:move_file was found")
	}
	for _, args := range []string{`{"query":"x","server":"nope"}`, `{}`, `{"query":7}`} {
		if text, isError := toolResult(t, agg.call("tools/call", `{"name":"search_tools","arguments":`+args+`}`)); !isError {
			t.Errorf("search_tools %s: %s, want an error", args, text)
		}
	}
}

// call_tool reaches the child with the tools/call a direct call by name sends (same params
// apart from the name), and the child's result comes back unchanged; call_read_only_tool
// refuses the tools not marked read-only.
func TestToolSearchCall(t *testing.T) {
	agg := startAggregator(t, toolSearchConfig(t), "--tool-search")
	agg.initialize("test")

	args := `{"text":"héllo \u2028","n":12345678901234567890123,"f":1.50,"nested":{"z":[],"a":{"k":null}}}`
	for _, c := range []struct{ tool, args string }{
		{"fx:echo", args}, {"fx:odd", `{}`}, {"fx:fail", `{"x":1}`}, {"fs:read_file", `{ "path" : "/x" }`},
	} {
		direct := agg.call("tools/call", `{"name":"`+c.tool+`","arguments":`+c.args+`,"_meta":{"k":[1,2]}}`)
		for _, via := range []string{"call_tool", "call_read_only_tool"} {
			if via == "call_read_only_tool" && c.tool != "fs:read_file" {
				continue
			}
			m := agg.call("tools/call", `{"name":"`+via+`","arguments":{"name":"`+c.tool+`","arguments":`+c.args+`},"_meta":{"k":[1,2]}}`)
			if !bytes.Equal(m.Result, direct.Result) || !bytes.Equal(m.Error, direct.Error) {
				t.Errorf("%s of %s:\n got %s\nwant %s", via, c.tool, m.Line, direct.Line)
			}
		}
	}
	// Members in any order: the arguments before the name, outside and inside.
	direct := agg.call("tools/call", `{"arguments":{"path":"/y"},"name":"fs:read_file"}`)
	m := agg.call("tools/call", `{"arguments":{"arguments":{"path":"/y"},"name":"fs:read_file"},"name":"call_tool"}`)
	if !bytes.Equal(m.Result, direct.Result) {
		t.Errorf("call_tool with the arguments first:\n got %s\nwant %s", m.Line, direct.Line)
	}
	// Malformed arguments get an error result, and the aggregator serves on.
	for _, params := range []string{
		`{"name":"call_tool"}`, `{"name":"call_tool","arguments":null}`, `{"name":"call_tool","arguments":"fx:echo"}`,
		`{"name":"call_read_only_tool","arguments":{"name":7}}`, `{"name":"search_tools","arguments":[]}`, `{"arguments":{},"name":"search_tools"}`,
	} {
		if text, isError := toolResult(t, agg.call("tools/call", params)); !isError {
			t.Errorf("%s: %s, want an error", params, text)
		}
	}
	// Progress passes through as for a direct call.
	m = agg.call("tools/call", `{"name":"call_tool","arguments":{"name":"fx:progress","arguments":{}},"_meta":{"progressToken":"p-1"}}`)
	if m.Error != nil {
		t.Fatalf("progress: %s", m.Line)
	}
	if !agg.note("notifications/progress", 5*time.Second) {
		t.Errorf("no progress through call_tool")
	}

	// A tool's bare name, when one server lists it, works as with tools/call.
	direct = agg.call("tools/call", `{"name":"read_file","arguments":{"path":"/z"}}`)
	m = agg.call("tools/call", `{"name":"call_read_only_tool","arguments":{"name":"read_file","arguments":{"path":"/z"}}}`)
	if direct.Error != nil || !bytes.Equal(m.Result, direct.Result) {
		t.Errorf("call_read_only_tool by the bare name read_file:\n got %s\nwant %s", m.Line, direct.Line)
	}
	for _, c := range []struct{ via, tool, want string }{
		{"call_read_only_tool", "fs:write_file", "is not marked read-only"},
		{"call_read_only_tool", "fx:echo", "is not marked read-only"},
		{"call_tool", "fs:move_file", "hidden"},
		{"call_tool", "nope:nothing", "Unknown tool: nope:nothing"},
	} {
		text, isError := toolResult(t, agg.call("tools/call", `{"name":"`+c.via+`","arguments":{"name":"`+c.tool+`","arguments":{"path":"/x","content":"y"}}}`))
		if !isError || !strings.Contains(text, c.want) {
			t.Errorf("%s of %s: %q (isError %v), want an error saying %q", c.via, c.tool, text, isError, c.want)
		}
	}
}

// The index follows the catalog: a server's list change and a reload that adds and removes
// servers change what the search finds.
func TestToolSearchFollowsCatalog(t *testing.T) {
	config := func(keys ...string) string {
		entries := map[string]string{
			"fx":  `{"command": "$FIXTURE"}`,
			"gh":  recordedServer(t, "github", ""),
			"mem": recordedServer(t, "memory", ""),
		}
		var parts []string
		for _, k := range keys {
			parts = append(parts, `"`+k+`": `+entries[k])
		}
		return `{"mcpServers": {` + strings.Join(parts, ", ") + `}}`
	}
	path := writeConfig(t, config("fx", "gh"))
	agg := startPeer(t, aggBinary, "--config", path, "--tool-search")
	agg.initialize("test")

	if _, found := search(t, agg, `{"query":"fx:grown_1"}`); slices.Contains(found, "fx:grown_1") {
		t.Fatalf("fx:grown_1 found before it exists")
	}
	agg.call("tools/call", `{"name":"call_tool","arguments":{"name":"fx:grow","arguments":{}}}`)
	if !agg.note("notifications/tools/list_changed", 5*time.Second) {
		t.Fatal("no list_changed after the child's list changed")
	}
	if _, found := search(t, agg, `{"query":"fx:grown_1"}`); len(found) == 0 || found[0] != "fx:grown_1" {
		t.Errorf("after the list change, fx:grown_1 is not found: %q", found)
	}

	data := writeConfig(t, config("fx", "mem"))
	content, _ := os.ReadFile(data)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, mem := search(t, agg, `{"query":"forget everything about Bob"}`)
		_, gh := search(t, agg, `{"query":"gh:create_issue"}`)
		if slices.Contains(mem, "mem:delete_entities") && !slices.Contains(gh, "gh:create_issue") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the reload: found %q and %q, want mem:delete_entities and no gh:create_issue; stderr:\n%s", mem, gh, agg.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// "alwaysLoad" alone changed: the same process, its tools now listed in full.
	fxPID := func() string {
		return string(agg.call("tools/call", `{"name":"call_tool","arguments":{"name":"fx:pid","arguments":{}}}`).Result)
	}
	before := fxPID()
	always := strings.Replace(config("fx", "mem"), `"fx": {"command": "$FIXTURE"}`, `"fx": {"command": "$FIXTURE", "alwaysLoad": true}`, 1)
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(always, `"$FIXTURE"`, strconv.Quote(fixtureBin))), 0o600); err != nil {
		t.Fatal(err)
	}
	waitTool(t, agg, "fx:echo", true)
	if after := fxPID(); after != before {
		t.Errorf("a change of alwaysLoad restarted the server: %s, then %s", before, after)
	}
}

// A search's answer is bounded: definitions that do not fit are named, not given.
func TestToolSearchBoundedAnswer(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {"fc": `+recordedServer(t, "firecrawl", "")+`}}`, "--tool-search")
	agg.initialize("test")
	m := agg.call("tools/call", `{"name":"search_tools","arguments":{"query":"search crawl scrape extract web pages sites","limit":50}}`)
	text, _ := toolResult(t, m)
	r, found := search(t, agg, `{"query":"search crawl scrape extract web pages sites","limit":50}`)
	if len(text) > 40<<10 || len(r.Omitted) == 0 || !strings.Contains(r.Note, "exact name") {
		t.Errorf("answer of %d bytes with %d tools, omitted %q, note %q: want at most 40 KB with the rest named", len(text), len(found), r.Omitted, r.Note)
	}
	if len(found)+len(r.Omitted) > 20 {
		t.Errorf("%d tools found or named, want at most 20", len(found)+len(r.Omitted))
	}
	// The omitted tool, asked for by name, comes whole.
	if _, again := search(t, agg, `{"query":"`+r.Omitted[0]+`"}`); len(again) == 0 || again[0] != r.Omitted[0] {
		t.Errorf("%s asked for by name: %q", r.Omitted[0], again)
	}
}

// Claude Code cuts instructions at 2,048 characters: in the mode, the search's part comes first
// and the whole stays within the limit.
func TestToolSearchInstructionsLimit(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {
		"fs": `+recordedServer(t, "filesystem", "")+`,
		"fx": {"command": "$FIXTURE", "args": ["-instructions-size", "5000"]}
	}}`, "--tool-search")
	m := agg.initialize("claude-code")
	var r struct {
		Instructions string `json:"instructions"`
	}
	json.Unmarshal(m.Result, &r)
	if n := len([]rune(r.Instructions)); n > 2048 || !strings.HasPrefix(r.Instructions, "This aggregator serves") || !strings.Contains(r.Instructions, "search_tools") {
		t.Errorf("instructions of %d characters for claude-code:\n%s", n, r.Instructions)
	}
}

// A definition withheld for breaking the MCP schema gets, through call_tool, the message a
// tools/call of it gets.
func TestToolSearchCallWithheld(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {"fx": {"command": "$FIXTURE", "args": ["-malformed"]}}}`, "--tool-search")
	agg.initialize("test")
	direct := agg.call("tools/call", `{"name":"fx:plain","arguments":{}}`)
	var e struct{ Message string }
	if err := json.Unmarshal(direct.Error, &e); err != nil || !strings.Contains(e.Message, "withheld") {
		t.Fatalf("tools/call of the withheld fx:plain: %s", direct.Line)
	}
	text, isError := toolResult(t, agg.call("tools/call", `{"name":"call_tool","arguments":{"name":"fx:plain","arguments":{}}}`))
	if !isError || text != e.Message {
		t.Errorf("call_tool of the withheld fx:plain: %q (isError %v), want %q", text, isError, e.Message)
	}
}

// With --separator _, a server "search" with a tool "tools" is exposed as search_tools, the
// name of the aggregator's own tool. The aggregator's keeps the name (the list has it once, a
// direct call gets it); the server's is named on stderr, found with a note, and called through
// call_tool.
func TestToolSearchShadowedName(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tools.json")
	if err := os.WriteFile(file, []byte(`{"tools":[{"name":"tools","description":"Lists the saved searches of the search engine.","inputSchema":{"type":"object"}},`+
		`{"name":"run","description":"Runs a saved search.","inputSchema":{"type":"object"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, always := range []string{"", `, "alwaysLoad": true`} {
		agg := startAggregator(t, `{"mcpServers": {"search": {"command": "$FIXTURE", "args": ["-only-fillers", "-tools-file", `+jsonString(file)+`]`+always+`}}}`,
			"--tool-search", "--separator", "_")
		agg.initialize("test")
		_, names := tools(t, agg.call("tools/list", ""))
		if n := strings.Count(strings.Join(names, " ")+" ", "search_tools "); n != 1 {
			t.Errorf("alwaysLoad %q: tools/list has search_tools %d times: %q", always, n, names)
		}
		r, found := search(t, agg, `{"query":"saved searches of the search engine"}`)
		if !slices.Contains(found, "search_tools") || !strings.Contains(r.Note, `call it with call_tool {"name": "search_tools"`) {
			t.Errorf("alwaysLoad %q: the server's search_tools found %q, note %q", always, found, r.Note)
		}
		m := agg.call("tools/call", `{"name":"call_tool","arguments":{"name":"search_tools","arguments":{"x":1}}}`)
		if text, isError := toolResult(t, m); isError || !bytes.Contains(m.Result, []byte(`"x":1`)) {
			t.Errorf("alwaysLoad %q: call_tool of the server's search_tools: %s (%s)", always, m.Line, text)
		}
		if !strings.Contains(agg.stderr.String(), `tool "tools" is exposed as "search_tools", the name of the aggregator's own tool`) {
			t.Errorf("alwaysLoad %q: stderr does not name the shadowed tool:\n%s", always, agg.stderr)
		}
	}
}
