package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A session sees what it would see unshared: a server process is shared by sessions whose
// servers would see the same environment and directory, less the variables that only name a
// session; an entry with its own "cwd" is shared by the sessions of every project; check says
// what kept two processes of one entry apart (by the variable's name, never its value).
func TestFaultShareEnvironment(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	project := t.TempDir()
	path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag)+`}}`)
	ownCwd := writeConfig(t, `{"mcpServers": {"b": `+strings.Replace(tagged(tag), `{`, `{"cwd": "`+project+`", `, 1)+`}}`)
	count := func() int { return len(taggedProcs(tag)) }
	token := func(p *peer, key string) string {
		m := p.call("tools/call", `{"name":"`+key+`:getenv","arguments":{"name":"PROJECT_TOKEN","cwd":true}}`)
		return string(m.Result)
	}
	session := func(path, cwd string, env map[string]string, flags ...string) *peer {
		t.Helper()
		t.Chdir(cwd)
		for k, v := range env {
			t.Setenv(k, v)
		}
		return shareSession(t, path, flags...)
	}

	// Two sessions with another token in their environment, which no entry sets: each its own
	// process, each seeing its own token.
	cwd1, cwd2 := t.TempDir(), t.TempDir()
	alpha := session(path, cwd1, map[string]string{"PROJECT_TOKEN": "alpha", "CLAUDE_CODE_SESSION_ID": "one", "SHLVL": "1"})
	beta := session(path, cwd1, map[string]string{"PROJECT_TOKEN": "beta", "CLAUDE_CODE_SESSION_ID": "two", "SHLVL": "2"}, "--debug")
	if n := count(); n != 2 {
		t.Errorf("%d processes for two sessions with another PROJECT_TOKEN, want 2", n)
	}
	if got := token(alpha, "a"); !strings.Contains(got, `"alpha"`) {
		t.Errorf("the first session's server sees %s, want alpha", got)
	}
	if got := token(beta, "a"); !strings.Contains(got, `"beta"`) {
		t.Errorf("the second session's server sees %s, want beta", got)
	}
	// --debug and check name what kept them apart, without its value.
	if !strings.Contains(beta.stderr.String(), `why="the variable PROJECT_TOKEN differs"`) || strings.Contains(beta.stderr.String(), "alpha") {
		t.Errorf("--debug does not say, or says too much of, what kept the sessions apart:\n%s", beta.stderr)
	}
	out, err := exec.Command(aggBinary, "check", "--config", path).CombinedOutput()
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "not shared with the other process of its entry: the variable PROJECT_TOKEN differs") || strings.Contains(string(out), "beta") {
		t.Errorf("check does not say, or says too much of, what kept the sessions apart:\n%s", out)
	}

	// A third session that differs from the first only in what names a session shares its
	// process.
	third := session(path, cwd1, map[string]string{"PROJECT_TOKEN": "alpha", "CLAUDE_CODE_SESSION_ID": "three", "SHLVL": "5", "TERM_SESSION_ID": "w1"})
	if n := count(); n != 2 {
		t.Errorf("%d processes after a session that differs only in its session's names, want 2", n)
	}
	if got := token(third, "a"); !strings.Contains(got, `"alpha"`) {
		t.Errorf("the third session's server sees %s, want alpha", got)
	}

	// An entry with its own cwd: sessions of two projects (their directories, PWD and
	// CLAUDE_PROJECT_DIR differ) share its process, which runs in the entry's directory.
	p1 := session(ownCwd, cwd1, map[string]string{"PROJECT_TOKEN": "alpha", "CLAUDE_PROJECT_DIR": cwd1})
	p2 := session(ownCwd, cwd2, map[string]string{"PROJECT_TOKEN": "alpha", "CLAUDE_PROJECT_DIR": cwd2})
	if n := count(); n != 3 {
		t.Errorf("%d processes after two sessions of two projects with an entry of its own cwd, want 3", n)
	}
	for _, p := range []*peer{p1, p2} {
		if got := token(p, "b"); !strings.Contains(got, `"cwd":"`+project+`"`) {
			t.Errorf("the server of an entry with its own cwd runs in: %s", got)
		}
	}
	for _, p := range []*peer{alpha, beta, third, p1, p2} {
		p.in.Close()
	}
	nothingShared(t, dir, tag)
}

// A shared session reloads its own configuration: on a change of its file, and on SIGHUP to the
// process its client started (the forwarder), which the shared process hosting the session
// hears; another session of the shared process is not touched.
func TestFaultShareReload(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(reloadConfig(tag, "a")), 0o600); err != nil {
		t.Fatal(err)
	}
	other := writeConfig(t, reloadConfig(tag, "a"))
	s := shareSession(t, path, "--no-watch", "--debug")
	o := shareSession(t, other, "--no-watch")
	reloads := func() int { return strings.Count(s.stderr.String(), "mcp-simple-aggregator: reload: ") }

	if err := os.WriteFile(path, []byte(reloadConfig(tag, "a", "b")), 0o600); err != nil {
		t.Fatal(err)
	}
	s.cmd.Process.Signal(syscall.SIGHUP)
	waitFor(t, "the reload on SIGHUP", func() bool { return reloads() == 1 })
	waitTool(t, s, "b:echo", true)
	if m := s.call("tools/call", `{"name":"b:echo","arguments":{"x":1}}`); !strings.Contains(string(m.Result), `{"x":1}`) {
		t.Errorf("a call of the server the reload added: %s", m.Line)
	}
	if _, names := tools(t, o.call("tools/list", `{}`)); slices.Contains(names, "b:echo") {
		t.Errorf("the other session's tools changed with the first's reload: %v", names)
	}
	s.in.Close()
	o.in.Close()
	nothingShared(t, dir, tag)
}

// One session's fault ends that session at most, never the shared process or another session:
// a panic in the handling of its client's message or of a server's (injected), a malformed
// message and one over --max-message-size.
func TestFaultShareSessionFault(t *testing.T) {
	dir := shareDir(t)
	tag := newTag(t)
	// -full: its log tool. The entry sets the fault's variable, so that its server is the same
	// process for every session, whatever the session's variable says.
	path := writeConfig(t, `{"mcpServers": {"a": {"command": "$FIXTURE", "args": ["-full"], "env": {"FAULT_TAG": "`+tag+`", "MCP_SIMPLE_AGGREGATOR_FAULT_PANIC": ""}}}}`)
	t.Setenv("MCP_SIMPLE_AGGREGATOR_FAULT_PANIC", "")
	other := shareSession(t, path, "--max-message-size", "1048576")
	daemons := sharedProcs(dir)
	if len(daemons) != 1 {
		t.Fatalf("%d shared processes", len(daemons))
	}
	serving := func(what string) {
		t.Helper()
		if m := other.call("tools/call", `{"name":"a:echo","arguments":{"still":1}}`); !strings.Contains(string(m.Result), `{"still":1}`) {
			t.Fatalf("the other session, after %s: %s", what, m.Line)
		}
		if now := sharedProcs(dir); !slices.Equal(now, daemons) {
			t.Fatalf("the shared processes after %s: %v, before %v", what, now, daemons)
		}
	}

	// A malformed message and an oversized one: the session answers as unshared; the other
	// goes on.
	bad := shareSession(t, path, "--max-message-size", "1048576")
	bad.writeLine(`{"jsonrpc":"2.0","id":7,"method":`)
	m := bad.wait(bad.send("tools/call", `{"name":"a:echo","arguments":{"x":"`+strings.Repeat("x", 2<<20)+`"}}`), "an oversized call")
	if !strings.Contains(string(m.Error), "message larger than 1048576 bytes") {
		t.Errorf("an oversized call: %s", m.Line)
	}
	serving("a malformed and an oversized message of another session")
	if m := bad.call("tools/call", `{"name":"a:echo","arguments":{"after":1}}`); !strings.Contains(string(m.Result), `{"after":1}`) {
		t.Errorf("the session of the malformed and oversized messages, after them: %s", m.Line)
	}

	// A panic in the handling of a session's message ends that session, with a message and
	// status 1, as unshared.
	t.Setenv("MCP_SIMPLE_AGGREGATOR_FAULT_PANIC", "x/boom")
	faulty := shareSession(t, path)
	faulty.send("x/boom", `{}`)
	faulty.waitExit()
	if code := faulty.cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("the session whose handling panicked exited with %d, want 1", code)
	}
	if !strings.Contains(faulty.stderr.String(), "the session failed in the reading of the client's messages: a fault injected for x/boom") {
		t.Errorf("the session's stderr does not say it failed:\n%s", faulty.stderr)
	}
	serving("another session's panic")

	// A panic in the handling of a server's message ends that session alone too: the shared
	// process reads the server for every session that uses it, and goes on reading for the
	// others.
	t.Setenv("MCP_SIMPLE_AGGREGATOR_FAULT_PANIC", "notifications/message")
	listening := shareSession(t, path)
	listening.call("tools/list", `{}`)
	if procs := taggedProcs(tag); len(procs) != 1 {
		t.Fatalf("%d processes of the server, want the one every session shares", len(procs))
	}
	if m := other.call("tools/call", `{"name":"a:log","arguments":{}}`); m.Error != nil {
		t.Fatalf("the other session's call that logs: %s", m.Line)
	}
	listening.waitExit()
	if code := listening.cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("the session whose handling of a server's message panicked exited with %d, want 1", code)
	}
	if !strings.Contains(listening.stderr.String(), `the session failed in the handling of server "a"'s messages: a fault injected for notifications/message`) {
		t.Errorf("the session's stderr does not say it failed:\n%s", listening.stderr)
	}
	serving("another session's panic in the handling of a server's message")

	// One in the handling of a server's request (a question asked during the session's call):
	// the server is answered with an error, and does not wait for good.
	t.Setenv("MCP_SIMPLE_AGGREGATOR_FAULT_PANIC", "roots/list")
	asking := shareSession(t, path)
	asking.send("tools/call", `{"name":"a:ask","arguments":{"method":"roots/list"}}`)
	asking.waitExit()
	if code := asking.cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("the session whose handling of a server's request panicked exited with %d, want 1", code)
	}
	waitSaid(t, other, `[a] fixture: the question "ask-1" was answered with the error {"code":-32603,"message":"Internal error: the session that was asked stopped using the server`, 1)
	serving("another session's panic in the handling of a server's request")

	bad.in.Close()
	other.in.Close()
	nothingShared(t, dir, tag)
}

// A configuration error of a shared session reaches its client exactly as unshared, with the
// configuration's warnings: the same text on stderr (the file named as its command line names it), the same exit status, nothing
// on stdout; nothing of it is shared, and no process of it is left.
func TestFaultShareConfigError(t *testing.T) {
	dir := shareDir(t)
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "c.json"), []byte(`{"mcpServers": {"a": {"command": "$FIXTURE", "env": {"T": "${AGG_TEST_UNSET_A}"}}, "b": {"command": "$FIXTURE", "args": ["$AGG_TEST_UNSET_B"]}, "web": {"type": "http", "url": "https://example.com/mcp"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FIXTURE", fixtureBin)
	run := func(args ...string) (stdout, stderr string, code int) {
		cmd := exec.Command(aggBinary, args...)
		cmd.Dir = work
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if err != nil {
			code = cmd.ProcessState.ExitCode()
		}
		return out.String(), errb.String(), code
	}
	wantOut, wantErr, wantCode := run("--config", "c.json")
	gotOut, gotErr, gotCode := run("--config", "c.json", "--share")
	if wantCode != 1 || !strings.Contains(wantErr, "AGG_TEST_UNSET_A is not set") || !strings.Contains(wantErr, "AGG_TEST_UNSET_B is not set") ||
		!strings.Contains(wantErr, "c.json: /mcpServers/web/type") {
		t.Fatalf("unshared: status %d, stderr:\n%s", wantCode, wantErr)
	}
	if gotCode != wantCode || gotErr != wantErr || gotOut != wantOut {
		t.Errorf("shared: status %d, stdout %q, stderr:\n%s\nwant status %d, stdout %q, stderr:\n%s", gotCode, gotOut, gotErr, wantCode, wantOut, wantErr)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(sharedProcs(dir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := len(sharedProcs(dir)); n > 0 {
		t.Errorf("%d shared processes left after a session whose configuration failed", n)
	}
}
