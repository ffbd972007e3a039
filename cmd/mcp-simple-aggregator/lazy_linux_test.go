package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Servers by use (issue #28), with the real binary and real processes: --lazy answers from the
// catalog cache and starts a server on its first request; --idle-stop stops a server nobody
// uses; the cache is private, holds no secret, and is never the reason a server is missing.

// lazyCache points the user's cache directory at a directory of the test's own, and returns
// the catalog cache's directory in it.
func lazyCache(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", dir)
	return filepath.Join(dir, "mcp-simple-aggregator", "catalogs")
}

// A second run with --lazy answers initialize and tools/list from the cache the first filled,
// with no server process running, in well under the start of one slow server, byte for byte
// what the servers listed; a call starts exactly its server.
func TestFaultLazyFromCache(t *testing.T) {
	cacheDir := lazyCache(t)
	tag := newTag(t)
	config := `{"mcpServers": {"slow": ` + tagged(tag, "-start-delay", "2s") + `, "slower": ` + tagged(tag, "-start-delay", "2100ms") + `}}`
	path := writeConfig(t, config)

	first := startPeer(t, aggBinary, "--config", path, "--lazy")
	first.initialize("test")
	listed := first.call("tools/list", "")
	endSession(t, first, tag)

	start := time.Now()
	agg := startPeer(t, aggBinary, "--config", path, "--lazy", "--debug")
	agg.initialize("test")
	m := agg.call("tools/list", "")
	if took := time.Since(start); took > time.Second {
		t.Errorf("initialize and tools/list took %v from the cache; a server alone takes 2s to start", took)
	}
	if string(m.Result) != string(listed.Result) {
		t.Errorf("tools/list from the cache:\n%s\nas the servers listed it:\n%s", m.Result, listed.Result)
	}
	if procs := taggedProcs(tag); len(procs) != 0 {
		t.Errorf("%d server processes run before any request", len(procs))
	}
	if m := agg.call("tools/call", `{"name":"slow:echo","arguments":{"x":1}}`); m.Error != nil || !strings.Contains(string(m.Result), `"structuredContent":{"x":1}`) {
		t.Errorf("the first call: %s", m.Line)
	}
	if procs := taggedProcs(tag); len(procs) != 1 {
		t.Errorf("%d server processes run after a call for one server, want 1", len(procs))
	}
	stderr := agg.stderr.String()
	for _, want := range []string{
		`debug: not started: its catalog is in the cache server=slow`,
		`debug: starting on first use server=slow`,
		`debug: state server=slow from="not started" to=starting why="a request needs it (its catalog came from the cache, written `,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr has no %q:\n%s", want, stderr)
		}
	}
	endSession(t, agg, tag)

	// The cache is the user's alone and holds no value of env.
	files, _ := os.ReadDir(cacheDir)
	if len(files) < 3 { // the key, and an entry per server
		t.Fatalf("the cache holds %d files", len(files))
	}
	for _, f := range files {
		info, _ := f.Info()
		data, _ := os.ReadFile(filepath.Join(cacheDir, f.Name()))
		if info.Mode().Perm() != 0o600 || strings.Contains(string(data), tag) {
			t.Errorf("%s: mode %v, or it holds the env value %s", f.Name(), info.Mode().Perm(), tag)
		}
	}
	if info, _ := os.Stat(cacheDir); info.Mode().Perm() != 0o700 {
		t.Errorf("the cache directory has mode %v", info.Mode().Perm())
	}
}

// A server started on first use that lists something else than its cache: the client is told
// (list_changed) and gets the new list; a call for a tool it no longer lists names it and the
// server. An entry that cannot be used costs one warning, and its server starts with the
// session.
func TestFaultLazyChanged(t *testing.T) {
	cacheDir := lazyCache(t)
	tag := newTag(t)
	toolsFile := filepath.Join(t.TempDir(), "tools.json")
	os.WriteFile(toolsFile, []byte(`{"tools":[{"name":"old_tool","inputSchema":{"type":"object"}}]}`), 0o600)
	path := writeConfig(t, `{"mcpServers": {"s": `+tagged(tag, "-tools-file", toolsFile)+`}}`)

	first := startPeer(t, aggBinary, "--config", path, "--lazy")
	first.initialize("test")
	endSession(t, first, tag)

	os.WriteFile(toolsFile, []byte(`{"tools":[{"name":"new_tool","inputSchema":{"type":"object"}}]}`), 0o600)
	agg := startPeer(t, aggBinary, "--config", path, "--lazy")
	agg.initialize("test")
	byName, _ := tools(t, agg.call("tools/list", ""))
	if byName["s:old_tool"] == nil || byName["s:new_tool"] != nil {
		t.Fatalf("the list is not the cache's")
	}
	m := agg.call("tools/call", `{"name":"s:old_tool","arguments":{}}`)
	wantErrorText(t, m, `Unknown tool: s:old_tool: server "s" lists it no more`)
	if !agg.note("notifications/tools/list_changed", 10*time.Second) {
		t.Errorf("no list_changed after the server listed another list than its cache")
	}
	byName, _ = tools(t, agg.call("tools/list", ""))
	if byName["s:new_tool"] == nil || byName["s:old_tool"] != nil {
		t.Errorf("the list after the start is not the server's")
	}
	endSession(t, agg, tag)

	// A corrupt entry: one warning, and the server starts with the session.
	entries, _ := filepath.Glob(filepath.Join(cacheDir, "*-*.json"))
	for _, e := range entries {
		os.WriteFile(e, []byte(`{"format":1,"lists":`), 0o600)
	}
	agg = startPeer(t, aggBinary, "--config", path, "--lazy")
	agg.initialize("test")
	if n := len(taggedProcs(tag)); n != 1 {
		t.Errorf("%d processes run after a corrupt entry, want the server started with the session", n)
	}
	if n := strings.Count(agg.stderr.String(), `its cached catalog is not used, and it is started`); n != 1 {
		t.Errorf("%d warnings for a corrupt entry, want 1:\n%s", n, agg.stderr)
	}
	endSession(t, agg, tag)
}

// --idle-stop stops a server nobody uses: its process ends, its tools stay listed, and the next
// call brings it back. A server with a call in flight, or a resource subscription of the
// client's, is never stopped.
func TestFaultIdleStop(t *testing.T) {
	tag := newTag(t)
	agg := startAggregator(t, `{"mcpServers": {"idle": `+tagged(tag)+`, "busy": `+tagged(tag)+`, "subscribed": `+tagged(tag, "-full")+`}}`,
		"--idle-stop", "300ms", "--debug")
	agg.initialize("test")
	idle := pidOf(agg, "idle:pid")
	if m := agg.call("resources/subscribe", `{"uri":"fixture://static/a"}`); m.Error != nil {
		t.Fatalf("subscribe: %s", m.Line)
	}
	subscribed := pidOf(agg, "subscribed:pid")
	busy := pidOf(agg, "busy:pid")
	call := agg.send("tools/call", `{"name":"busy:sleep","arguments":{"ms":1500}}`)
	if !exits(idle, 10*time.Second) {
		t.Fatalf("the idle server %d was not stopped; stderr:\n%s", idle, agg.stderr)
	}
	if m := agg.wait(call, "the long call"); m.Error != nil {
		t.Errorf("the call in flight while its server would have been idle: %s", m.Line)
	}
	if !alive(busy) || !alive(subscribed) {
		t.Errorf("a server with a call in flight (%v) or a subscription (%v) was stopped", alive(busy), alive(subscribed))
	}
	byName, _ := tools(t, agg.call("tools/list", ""))
	if byName["idle:echo"] == nil {
		t.Errorf("the stopped server's tools left the list")
	}
	if pid := pidOf(agg, "idle:pid"); pid == 0 || pid == idle {
		t.Errorf("the next call: pid %d (before %d)", pid, idle)
	}
	stderr := agg.stderr.String()
	if !strings.Contains(stderr, "debug: stopped when idle server=idle") || !strings.Contains(stderr, "debug: starting on first use server=idle") {
		t.Errorf("stderr:\n%s", stderr)
	}
	endSession(t, agg, tag)
}

// A process that is only probed (server/discover, then the end of its input: the TypeScript SDK
// v2 client and Claude Code start one to probe) starts no server when the cache holds their
// catalogs for the client.
func TestFaultLazyProbeOnly(t *testing.T) {
	lazyCache(t)
	tag := newTag(t)
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag, "-start-delay", "1s")+`, "b": `+tagged(tag, "-full")+`}}`)
	first := startPeer(t, aggBinary, "--config", path, "--lazy")
	first.call("server/discover", `{`+envelope+`}`)
	endSession(t, first, tag)

	agg := startPeer(t, aggBinary, "--config", path, "--lazy", "--debug")
	m := agg.call("server/discover", `{`+envelope+`}`)
	if !strings.Contains(string(m.Result), `"supportedVersions":["2026-07-28"`) {
		t.Fatalf("discover: %s", m.Line)
	}
	endSessionWithin(t, agg, tag, time.Second, "a probe answered from the cache starts nothing")
	if strings.Contains(agg.stderr.String(), "debug: started server=") {
		t.Errorf("a server was started for a probe:\n%s", agg.stderr)
	}
}
