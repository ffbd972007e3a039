package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/audit"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/logging"
)

// A call for a name of a server that does not serve names the server and why, in the same
// words on every path (tools/call, call_tool, prompts/get, completion, resources: unknown.go),
// each path keeping the form of its answer (-32602, a result with isError, -32002).

// serveConfig starts the aggregator on cfg and serves it to a new client.
func serveConfig(t *testing.T, cfg *config.Config, opts Options) *client {
	t.Helper()
	log := &lockedLog{}
	opts.Log, opts.Stderr = logging.New(log, slog.LevelDebug), log
	agg, err := Start(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return connectClient(t, agg, log)
}

// errorMessage is the message of an error answer; "" when m is none.
func errorMessage(m msg) (code int, message string) {
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	json.Unmarshal(m.Error, &e)
	return e.Code, e.Message
}

// resultText is the text of a tools/call result that reports an error; "" when m is not one.
func resultText(m msg) string {
	var r struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if json.Unmarshal(m.Result, &r) != nil || !r.IsError || len(r.Content) != 1 {
		return ""
	}
	return r.Content[0].Text
}

// The answer on every path for a server that could not start is check's line for it; for a
// disabled entry, check's note. A name of a serving key is unknown as before.
func TestUnknownFailedToStart(t *testing.T) {
	cfg := &config.Config{File: filepath.Join(t.TempDir(), "config.json"), Servers: []config.Server{
		fx("nocmd"), fx("ok", "-full"), fx("other", "-full", "-scheme", "other"), fx("sqlite", "-exit-at-start", "2"),
	}, Skipped: []config.Skipped{{Key: "off", Pointer: "/mcpServers/off/disabled", Reason: `"disabled": true`}}}
	cfg.Servers[0].Command = filepath.Join(t.TempDir(), "no-such-server")
	opts := Options{ToolSearch: true, StartupTimeout: 10 * time.Second}

	// What check says of each.
	checkOpts := opts
	checkOpts.Log = slog.New(slog.DiscardHandler)
	checkOpts.Stderr = &lockedLog{}
	rep := Check(context.Background(), cfg, checkOpts)
	said := map[string]string{}
	for _, s := range rep.Servers {
		said[s.Key] = s.Error
	}
	if said["sqlite"] == "" || said["nocmd"] == "" || said["ok"] != "" || said["other"] != "" {
		t.Fatalf("check: %+v", rep.Servers)
	}

	c := serveConfig(t, cfg, opts)
	c.initialize(`{}`)
	for _, tc := range []struct {
		method, params string
		code           int // 0: a tools/call result that reports the error
		want           string
	}{
		{"tools/call", `{"name":"sqlite:read_query","arguments":{}}`, -32602, "Unknown tool: sqlite:read_query: " + said["sqlite"]},
		{"tools/call", `{"name":"call_tool","arguments":{"name":"sqlite:read_query","arguments":{}}}`, 0, "Unknown tool: sqlite:read_query: " + said["sqlite"]},
		{"prompts/get", `{"name":"sqlite:greet"}`, -32602, "Unknown prompt: sqlite:greet: " + said["sqlite"]},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"sqlite:greet"},"argument":{"name":"a","value":""}}`, -32602, "Unknown prompt: sqlite:greet: " + said["sqlite"]},
		{"resources/read", `{"uri":"sqlite:///db"}`, -32002, `; servers that do not serve now might: "nocmd", "sqlite" (a call of one of their tools says why)`},
		{"completion/complete", `{"ref":{"type":"ref/resource","uri":"sqlite:///{table}"},"argument":{"name":"table","value":""}}`, -32002, `; servers that do not serve now might: "nocmd", "sqlite" (a call of one of their tools says why)`},
		{"tools/call", `{"name":"nocmd:echo"}`, -32602, "Unknown tool: nocmd:echo: " + said["nocmd"]},
		{"tools/call", `{"name":"off:echo"}`, -32602, `Unknown tool: off:echo: server "off" is not started: "disabled": true`},
	} {
		m := c.call(tc.method, tc.params)
		code, text := errorMessage(m)
		if tc.code == 0 {
			code, text = 0, resultText(m)
		}
		if code != tc.code || !strings.HasSuffix(text, tc.want) {
			t.Errorf("%s %s:\n%s\nwant code %d and %q", tc.method, tc.params, m.Line, tc.code, tc.want)
		}
	}
	// A name its serving server does not list: unknown, as ever.
	if m := c.call("tools/call", `{"name":"ok:nope"}`); string(m.Error) != `{"code":-32602,"message":"Unknown tool: ok:nope"}` {
		t.Errorf("a name of a serving server: %s", m.Line)
	}
}

// A server whose restarts were given up: the call held for its restart and the calls after it
// say so in the words of the log's report.
func TestUnknownGivenUp(t *testing.T) {
	die := filepath.Join(t.TempDir(), "die")
	c := serve(t, Options{MaxRestarts: 1, RestartDelay: time.Hour}, fx("a", "-exit-at-start-if", die), fx("b"))
	c.initialize(`{}`)
	if err := os.WriteFile(die, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, text := errorMessage(c.call("tools/call", `{"name":"a:crash"}`)); !strings.Contains(text, `server "a" exited with status 3`) {
		t.Fatalf("the crash: %s", text)
	}
	c.waitLog(`state server=a from=serving to="waiting to restart"`)
	held := c.send("tools/call", `{"name":"a:echo","arguments":{"text":"x"}}`)
	waitFor(t, "the call held for the restart", func() bool { return c.agg.inflight.heldCount() == 1 })
	c.agg.roster.mu.Lock()
	sl := c.agg.roster.slots["a"]
	c.agg.roster.mu.Unlock()
	c.agg.restart(sl) // the restart's timer, an hour early: the try fails (the fixture exits at start)

	var report string
	for report == "" {
		m := c.note("notifications/message")
		var p struct {
			Data string `json:"data"`
		}
		json.Unmarshal(m.Params, &p)
		if strings.Contains(p.Data, "is given up after 1 restarts in a row") {
			report = p.Data
		}
	}
	if !strings.HasPrefix(report, `server "a" could not be restarted (`) {
		t.Errorf("the report: %s", report)
	}
	code, text := errorMessage(c.wait(held, "the held call"))
	if code != -32603 || text != "Server unavailable: "+report {
		t.Errorf("the held call: %d %s\nwant -32603 Server unavailable: %s", code, text, report)
	}
	code, text = errorMessage(c.call("tools/call", `{"name":"a:echo","arguments":{"text":"x"}}`))
	if code != -32602 || text != "Unknown tool: a:echo: "+report {
		t.Errorf("a call after: %d %s\nwant -32602 Unknown tool: a:echo: %s", code, text, report)
	}
	if m := c.call("tools/call", `{"name":"b:echo","arguments":{"text":"x"}}`); m.Error != nil {
		t.Errorf("the other server: %s", m.Line)
	}
}

// A server that is restarting: a call for it waits for the new process, and one that is not
// back within the start-up timeout is told what the key is doing, in the words of the crash's
// report; a name its last list did not have says so too.
func TestUnknownRestarting(t *testing.T) {
	c := serve(t, Options{MaxRestarts: 5, RestartDelay: time.Hour, StartupTimeout: 2 * time.Second, ToolSearch: true}, fx("a"))
	c.initialize(`{}`)
	c.call("tools/call", `{"name":"a:crash"}`)
	c.waitLog(`state server=a from=serving to="waiting to restart"`)
	direct := c.send("tools/call", `{"name":"a:echo","arguments":{"text":"x"}}`)
	viaSearch := c.send("tools/call", `{"name":"call_tool","arguments":{"name":"a:echo","arguments":{"text":"x"}}}`)
	want := `server "a" exited with status 3; it is restarted in `
	for what, ch := range map[string]<-chan msg{"tools/call": direct, "call_tool": viaSearch} {
		code, text := errorMessage(c.wait(ch, what))
		if code != -32603 || !strings.HasPrefix(text, "Server unavailable: "+want) || !strings.Contains(text, "(try 1 of 5); it did not come back within the start-up timeout (--startup-timeout 2s)") {
			t.Errorf("%s: %d %s\nwant -32603 Server unavailable: %s... (try 1 of 5); it did not come back within the start-up timeout", what, code, text, want)
		}
	}
	if !strings.Contains(c.log.String(), `server "a" exited with status 3; it is restarted in 30s (try 1 of 5)`) {
		t.Errorf("the crash's report is not in the words of the answers")
	}
	_, text := errorMessage(c.call("tools/call", `{"name":"a:nope"}`))
	if !strings.HasPrefix(text, "Unknown tool: a:nope: "+want) || !strings.HasSuffix(text, "(try 1 of 5) (its last list did not have this tool)") {
		t.Errorf("a name its last list did not have: %s", text)
	}
}

// heldCount is how many of the client's calls are held for a key that is not serving.
func (t *table) heldCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.held)
}

// What a key that does not serve says of itself, by its state and how it came there.
func TestUnavailable(t *testing.T) {
	spawnErr := errors.New(`start "nope": not found`)
	for _, tc := range []struct {
		name string
		sl   slot
		max  int
		want string
	}{
		{"a first start that failed (check's words)", slot{state: down, why: failedToStart, startErr: spawnErr, initial: true}, 5,
			`server "k" could not start: start "nope": not found`},
		{"given up after a crash", slot{state: down, why: "exited with status 3", gaveUp: true, tries: 5}, 5,
			`server "k" exited with status 3, and is given up after 5 restarts in a row (--max-restarts 5); its tools, prompts and resources are no longer available; save the configuration file or send SIGHUP to start it again`},
		{"given up after a try that failed", slot{state: down, why: failedToStart, startErr: spawnErr, gaveUp: true, tries: 2}, 2,
			`server "k" could not be restarted (start "nope": not found), and is given up after 2 restarts in a row (--max-restarts 2); its tools, prompts and resources are no longer available; save the configuration file or send SIGHUP to start it again`},
		{"a crash with restarts off", slot{state: down, why: "exited with status 3"}, 0,
			`server "k" exited with status 3; its tools, prompts and resources are no longer available (restarts are off: --max-restarts 0); save the configuration file or send SIGHUP to start it again`},
		{"names that collided", slot{state: down, why: "could not be served: the tool name ..."}, 5,
			`server "k" could not be served: the tool name ...; its tools, prompts and resources are no longer available; save the configuration file or send SIGHUP to start it again`},
		{"waiting to restart", slot{state: waiting, why: "exited with status 3", tries: 2, retryAt: time.Now().Add(time.Hour)}, 5,
			`server "k" exited with status 3; it is restarted in 1h0m0s (try 2 of 5)`},
		{"waiting after a try that failed", slot{state: waiting, why: failedToStart, startErr: spawnErr, tries: 3, retryAt: time.Now().Add(time.Hour)}, 5,
			`server "k" failed to start (start "nope": not found); it is restarted in 1h0m0s (try 3 of 5)`},
		{"a try under way", slot{state: starting, tries: 1}, 5, `server "k" is being restarted (try 1 of 5)`},
		{"removed", slot{state: draining, removing: true, why: "was removed from the configuration"}, 5, `server "k" was removed from the configuration`},
		{"reloaded", slot{state: draining, why: "was restarted because its configuration changed"}, 5, `server "k" was restarted because its configuration changed`},
		{"a start on first use that failed", slot{state: dormant, why: failedToStart, startErr: spawnErr}, 5,
			`server "k" could not be started for a request: start "nope": not found; its next request starts it again`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Aggregator{opts: Options{MaxRestarts: tc.max}}
			tc.sl.key, tc.sl.cfg.Key = "k", "k"
			if got := a.unavailable(&tc.sl); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// A withheld tool is refused with the same reason on tools/call and on call_tool, and both
// refusals are in the audit log (call_tool's as the result that reports it).
func TestUnknownWithheldEveryPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	log, err := audit.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, Options{ToolSearch: true, Audit: log}, fx("raw", "-malformed"))
	c.initialize(`{}`)
	want := `Unknown tool: raw:plain: server "raw" lists this tool, but it is withheld because clients would reject the whole list over its definition: /inputSchema/type is missing`
	if _, text := errorMessage(c.call("tools/call", `{"name":"raw:plain","arguments":{}}`)); !strings.HasPrefix(text, want) {
		t.Errorf("tools/call: %s", text)
	}
	m := c.call("tools/call", `{"name":"call_tool","arguments":{"name":"raw:plain","arguments":{}}}`)
	if text := resultText(m); !strings.HasPrefix(text, want) {
		t.Errorf("call_tool: %s", m.Line)
	}
	c.agg.Close()
	if err := log.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e struct{ Event, Server, Tool, Outcome string }
		if json.Unmarshal([]byte(line), &e) == nil && e.Event == "call" && e.Server == "raw" && e.Tool == "plain" {
			outcomes = append(outcomes, e.Outcome)
		}
	}
	if strings.Join(outcomes, " ") != "error isError" {
		t.Errorf("the refusals audited: %q, want an error and an isError\n%s", outcomes, data)
	}
}
