package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The seed's user stories 2 and 3, and FR-004..FR-008: every tool of every server is listed
// under key + separator + name, and definitions, results and errors are what the child sends
// directly, byte for byte, apart from the name.
func TestPassThroughMatchesDirect(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {
		"alpha": {"command": "$FIXTURE"},
		"b/é x": {"command": "$FIXTURE", "args": ["-prefix", "p_"]}
	}}`)
	agg.initialize("test")
	aggTools, aggNames := tools(t, agg.call("tools/list", ""))

	for _, srv := range []struct{ key, prefix string }{{"alpha", ""}, {"b/é x", "p_"}} {
		direct := startPeer(t, fixtureBin, "-prefix", srv.prefix)
		direct.initialize("test")
		directTools, directNames := tools(t, direct.call("tools/list", ""))

		for _, name := range directNames {
			exposed := srv.key + ":" + name
			oldName, _ := json.Marshal(name)
			newName, _ := json.Marshal(exposed)
			want := bytes.Replace(directTools[name], append([]byte(`"name":`), oldName...), append([]byte(`"name":`), newName...), 1)
			if got := aggTools[exposed]; !bytes.Equal(got, want) {
				t.Errorf("definition of %q:\n got %s\nwant %s", exposed, got, want)
			}
		}

		args := `{"text":"héllo \u2028","n":12345678901234567890123,"f":1.50,"nested":{"z":[],"a":{"k":null}}}`
		for _, tc := range []struct{ tool, args string }{
			{"echo", args},
			{"echo", `{}`},
			// Whitespace and escapes in the arguments reach the child as the client wrote them.
			{"echo", "{ \"spaced\" :\t[ 1 , 2.0 ] , \"esc\": \"\\u00e9\\/\" }"},
			{"odd", `{}`},
			{"fail", `{"x":1}`},
		} {
			params := func(name string) string { return `{"name":` + jsonString(name) + `,"arguments":` + tc.args + `}` }
			d := direct.call("tools/call", params(srv.prefix+tc.tool))
			a := agg.call("tools/call", params(srv.key+":"+srv.prefix+tc.tool))
			if !bytes.Equal(a.Result, d.Result) || !bytes.Equal(a.Error, d.Error) {
				t.Errorf("tools/call %s of %q differs from a direct call:\naggregated %s\n    direct %s", tc.tool, srv.key, a.Line, d.Line)
			}
		}
	}
	// Servers in key order, each server's tools in its own order.
	if want := 26; len(aggNames) != want {
		t.Errorf("aggregated %d tools, want %d: %q", len(aggNames), want, aggNames)
	}
	if !slices.IsSortedFunc(aggNames, func(a, b string) int { return strings.Compare(a[:1], b[:1]) }) {
		t.Errorf("tools are not grouped by server in key order: %q", aggNames)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A tool that does not exist gets the spec's -32602 error naming it; the aggregator serves on.
// A tool's own name is found when exactly one server lists it.
func TestUnknownToolAndBadInput(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {"alpha": {"command": "$FIXTURE"}}}`)
	agg.initialize("test")

	for _, name := range []string{"nope", "alpha:nope", "alpha", ":echo", "alpha::echo"} {
		m := agg.call("tools/call", `{"name":`+jsonString(name)+`}`)
		want := `{"code":-32602,"message":"Unknown tool: ` + name + `"}`
		if string(m.Error) != want {
			t.Errorf("tools/call %q: error %s, want %s", name, m.Error, want)
		}
	}

	// The name the server gives it, which only one server lists (an MCP App's own call).
	if m := agg.call("tools/call", `{"name":"echo","arguments":{"text":"bare"}}`); m.Error != nil {
		t.Errorf("tools/call of echo by its server's name: %s", m.Line)
	}

	// Malformed input: each gets a JSON-RPC error, and the session goes on.
	agg.writeLine(`{"jsonrpc":"2.0","id":1000,"method":`)
	agg.writeLine(`not json at all`)
	for range 2 {
		select {
		case m := <-agg.notes: // answers with a null id arrive as "notes"
			if !strings.Contains(string(m.Error), `"code":-32700`) || string(m.ID) != "null" {
				t.Errorf("invalid JSON answered with %s, want a -32700 error with a null id", m.Line)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("invalid JSON got no answer")
		}
	}
	if m := agg.call("no/such/method", `{}`); !strings.Contains(string(m.Error), `"code":-32601`) {
		t.Errorf("unknown method answered with %s, want -32601", m.Line)
	}
	if m := agg.call("tools/call", `"params as a string"`); m.Error == nil {
		t.Errorf("tools/call with malformed params answered with %s, want an error", m.Line)
	}
	if m := agg.call("tools/list", `{"cursor":"made-up"}`); !strings.Contains(string(m.Error), `"code":-32602`) {
		t.Errorf("tools/list with a cursor never handed out answered with %s, want -32602", m.Line)
	}
	if m := agg.call("tools/call", `{"name":"alpha:echo","arguments":{"still":"serving"}}`); !strings.Contains(string(m.Result), `{"still":"serving"}`) {
		t.Errorf("after bad input, echo answered %s", m.Line)
	}
}

// Every page of a child's tool list is followed.
func TestPagination(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {"paged": {"command": "$FIXTURE", "args": ["-tools", "45", "-page", "7"]}}}`)
	agg.initialize("test")
	_, names := tools(t, agg.call("tools/list", ""))
	if len(names) != 58 || names[57] != "paged:filler_0044" {
		t.Errorf("listed %d tools ending with %q, want 58 ending with paged:filler_0044", len(names), names[len(names)-1])
	}
}

// Children speaking older protocol versions are accepted.
func TestOlderChildProtocols(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {
		"old": {"command": "$FIXTURE", "args": ["-protocol", "2024-11-05"]},
		"mid": {"command": "$FIXTURE", "args": ["-protocol", "2025-03-26"]}
	}}`)
	agg.initialize("test")
	for _, name := range []string{"old:echo", "mid:echo"} {
		if m := agg.call("tools/call", `{"name":"`+name+`","arguments":{"v":1}}`); m.Error != nil {
			t.Errorf("%s: %s", name, m.Line)
		}
	}
}

// A slow or hung call blocks neither other calls to the same child nor calls to others; the
// client's cancellation reaches the child.
func TestConcurrencyAndCancellation(t *testing.T) {
	path := writeConfig(t, `{"mcpServers": {"a": {"command": "$FIXTURE"}, "b": {"command": "$FIXTURE"}}}`)
	session := connectSDK(t, path, nil)
	// The SDK's Close waits for the calls in flight: end the hung one first. The SDK sends
	// notifications/cancelled in the background: it has reached the aggregator when b has it.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		waitFor(t, "b's notifications/cancelled for b:hang", func() bool {
			res, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: "b:cancelled"})
			if err != nil {
				t.Fatal(err)
			}
			ids, _ := json.Marshal(res.StructuredContent)
			return string(ids) != `{"ids":[]}`
		})
	})

	hangCtx, cancelHang := context.WithCancel(ctx)
	hung := make(chan error, 1)
	go func() {
		_, err := session.CallTool(hangCtx, &mcp.CallToolParams{Name: "a:sleep", Arguments: map[string]any{"ms": 600000}})
		hung <- err
	}()
	go session.CallTool(ctx, &mcp.CallToolParams{Name: "b:hang"})

	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := []string{"a:echo", "b:echo"}[i%2]
			res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"i": i}})
			if err != nil {
				t.Errorf("%s while other calls hang: %v", name, err)
				return
			}
			if got, _ := json.Marshal(res.StructuredContent); string(got) != fmt.Sprintf(`{"i":%d}`, i) {
				t.Errorf("%s #%d returned %s", name, i, got)
			}
		}()
	}
	wg.Wait()

	cancelHang()
	select {
	case err := <-hung:
		if err == nil {
			t.Error("the cancelled call succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled call did not return")
	}
	// The child saw notifications/cancelled for the call.
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "a:cancelled"})
		if err != nil {
			t.Fatal(err)
		}
		ids, _ := json.Marshal(res.StructuredContent)
		if string(ids) != `{"ids":[]}` {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the child never received notifications/cancelled")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// connectSDK connects the SDK's client to the aggregator over stdio, as real clients do.
func connectSDK(t *testing.T, configPath string, opts *mcp.ClientOptions, flags ...string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-test", Version: "1.0"}, opts)
	cmd := exec.Command(aggBinary, append([]string{"--config", configPath}, flags...)...)
	stderr := new(lockedBuffer)
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connecting to the aggregator: %v\nstderr:\n%s", err, stderr)
	}
	t.Cleanup(func() {
		session.Close()
		if t.Failed() {
			t.Logf("aggregator stderr:\n%s", stderr)
		}
	})
	return session
}

// US2-5, FR-009, SC-007: a child that crashes mid-call fails that call at once with an error
// naming the server, its tools leave the list, the client is told, and the rest serves on.
func TestChildCrashAtRunTime(t *testing.T) {
	for _, tc := range []struct{ tool, why string }{
		{"crash", `server "victim" exited with status 3 while calling tool "crash"`},
		{"close_stdout", `server "victim" closed its standard output while calling tool "close_stdout"`},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			// Restarts off: what a crash does before any restart (restart_linux_test.go has the rest).
			agg := startAggregator(t, `{"mcpServers": {"victim": {"command": "$FIXTURE"}, "survivor": {"command": "$FIXTURE"}}}`, "--max-restarts", "0")
			agg.initialize("test")
			inflight := agg.send("tools/call", `{"name":"victim:sleep","arguments":{"ms":600000}}`)

			start := time.Now()
			m := agg.call("tools/call", `{"name":"victim:`+tc.tool+`"}`)
			var e struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			}
			json.Unmarshal(m.Error, &e)
			if !strings.Contains(e.Message, tc.why) {
				t.Errorf("the call that killed the child: %s, want an error saying %q", m.Line, tc.why)
			}
			if other := agg.wait(inflight, "the in-flight call"); !strings.Contains(string(other.Error), `server \"victim\"`) {
				t.Errorf("the in-flight call: %s, want an error naming the server", other.Line)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("the failure took %v to notice", d)
			}
			if !agg.note("notifications/tools/list_changed", 5*time.Second) {
				t.Error("no notifications/tools/list_changed after the crash")
			}
			_, names := tools(t, agg.call("tools/list", ""))
			for _, n := range names {
				if strings.HasPrefix(n, "victim:") {
					t.Errorf("tools/list still has %q", n)
				}
			}
			if len(names) != 13 {
				t.Errorf("tools/list has %d tools, want the survivor's 13", len(names))
			}
			if m := agg.call("tools/call", `{"name":"victim:echo"}`); !strings.Contains(string(m.Error), "Unknown tool: victim:echo") {
				t.Errorf("calling a tool of the crashed server: %s", m.Line)
			}
			if m := agg.call("tools/call", `{"name":"survivor:echo","arguments":{"ok":true}}`); m.Error != nil {
				t.Errorf("the survivor fails: %s", m.Line)
			}
			if !strings.Contains(agg.stderr.String(), `server "victim"`) {
				t.Errorf("stderr does not report the failure:\n%s", agg.stderr)
			}
		})
	}
}

// A child writing lines that are not JSON-RPC on stdout gets a warning; its session goes on.
func TestGarbageOnChildStdout(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {"noisy": {"command": "$FIXTURE", "args": ["-garbage"]}}}`)
	agg.initialize("test")
	for range 10 {
		if m := agg.call("tools/call", `{"name":"noisy:echo","arguments":{"a":1}}`); m.Error != nil {
			t.Fatalf("call through a noisy child: %s", m.Line)
		}
	}
	// The last of the warnings may reach stderr after the last answer: wait for it.
	waitFor(t, "the warning that the rest is ignored", func() bool {
		return strings.Contains(agg.stderr.String(), "are ignored without warning")
	})
	stderr := agg.stderr.String()
	if n := strings.Count(stderr, "not a JSON-RPC message"); n != 5 {
		t.Errorf("%d warnings about stdout garbage, want 5 and then one saying the rest is ignored:\n%s", n, stderr)
	}
	if !strings.Contains(stderr, `server=noisy`) || !strings.Contains(stderr, "are ignored without warning") {
		t.Errorf("warnings do not name the server or do not stop:\n%s", stderr)
	}
}

// A child flooding its stderr does not stall its protocol traffic, even when nobody reads the
// aggregator's stderr.
func TestStderrFlood(t *testing.T) {
	path := writeConfig(t, `{"mcpServers": {"flood": {"command": "$FIXTURE", "args": ["-flood-stderr"]}}}`)
	cmd := exec.Command(aggBinary, "--config", path)
	// stderr is a pipe that is never read: it is full after 64 KiB.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	cmd.Stderr = w
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	for i := range 50 {
		if _, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "flood:echo", Arguments: map[string]any{"i": i}}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}

// Messages of 64 MiB pass in both directions.
func TestLargeMessages(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("moves 256 MiB: too slow for -short and the race detector (it runs in the plain suite)")
	}
	agg := startAggregator(t, `{"mcpServers": {"big": {"command": "$FIXTURE"}}}`)
	agg.initialize("test")
	const size = 64 << 20
	m := agg.waitLarge(agg.send("tools/call", fmt.Sprintf(`{"name":"big:big","arguments":{"bytes":%d}}`, size)), "big")
	if len(m.Result) < size || m.Error != nil {
		t.Fatalf("64 MiB result: got %d bytes, error %s", len(m.Result), m.Error)
	}
	text := strings.Repeat("y", size)
	m = agg.waitRunning(agg.send("tools/call", `{"name":"big:echo","arguments":{"text":"`+text+`"}}`), "big:echo", func() string { return "" })
	if !bytes.Contains(m.Result, []byte(text)) {
		t.Fatalf("64 MiB argument: result of %d bytes, error %s", len(m.Result), m.Error)
	}
}

// The client's progress token reaches the child and the child's progress notifications come
// back with it, in order; a child's list_changed makes the aggregator re-read its tools and
// tell the client.
func TestProgressAndListChanged(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {"fx": {"command": "$FIXTURE"}}}`)
	agg.initialize("test")
	for _, token := range []string{`"tok-1"`, `42`} {
		m := agg.call("tools/call", `{"name":"fx:progress","arguments":{},"_meta":{"progressToken":`+token+`}}`)
		if m.Error != nil {
			t.Fatalf("progress: %s", m.Line)
		}
		for i := 1; i <= 3; i++ {
			select {
			case n := <-agg.notes:
				var p struct {
					Params struct {
						ProgressToken json.RawMessage `json:"progressToken"`
						Progress      float64         `json:"progress"`
					} `json:"params"`
				}
				json.Unmarshal(n.Line, &p)
				if n.Method != "notifications/progress" || string(p.Params.ProgressToken) != token || p.Params.Progress != float64(i) {
					t.Errorf("notification %d: %s, want progress %d with token %s", i, n.Line, i, token)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("progress notification %d never came", i)
			}
		}
	}

	if m := agg.call("tools/call", `{"name":"fx:grow","arguments":{}}`); m.Error != nil {
		t.Fatalf("grow: %s", m.Line)
	}
	if !agg.note("notifications/tools/list_changed", 5*time.Second) {
		t.Fatal("no list_changed after the child's list changed")
	}
	byName, _ := tools(t, agg.call("tools/list", ""))
	if _, ok := byName["fx:grown_1"]; !ok {
		t.Errorf("the new tool fx:grown_1 is not listed")
	}
	if m := agg.call("tools/call", `{"name":"fx:grown_1","arguments":{}}`); !strings.Contains(string(m.Error), "Unknown tool: grown_1") {
		t.Errorf("fx:grown_1 did not reach the child: %s", m.Line)
	}
}

// FR-002, FR-011: a child gets the aggregator's environment plus its config "env", expanded,
// and its config wins over an inherited variable of the same name.
func TestChildEnvironment(t *testing.T) {
	t.Setenv("AGG_TEST_INHERITED", "from the aggregator")
	t.Setenv("AGG_TEST_OVERRIDDEN", "from the aggregator")
	t.Setenv("AGG_TEST_SOURCE", "expanded")
	agg := startAggregator(t, `{"mcpServers": {"fx": {"command": "$FIXTURE", "env": {
		"AGG_TEST_OVERRIDDEN": "from the config",
		"AGG_TEST_EXPANDED": "value ${AGG_TEST_SOURCE} and ${AGG_TEST_UNSET:-a default}"
	}}}}`)
	agg.initialize("test")
	for name, want := range map[string]string{
		"AGG_TEST_INHERITED":  `{"set":true,"value":"from the aggregator"}`,
		"AGG_TEST_OVERRIDDEN": `{"set":true,"value":"from the config"}`,
		"AGG_TEST_EXPANDED":   `{"set":true,"value":"value expanded and a default"}`,
		"AGG_TEST_UNSET":      `{"set":false,"value":""}`,
	} {
		m := agg.call("tools/call", `{"name":"fx:getenv","arguments":{"name":"`+name+`"}}`)
		var r struct {
			StructuredContent json.RawMessage `json:"structuredContent"`
		}
		json.Unmarshal(m.Result, &r)
		if string(r.StructuredContent) != want {
			t.Errorf("%s in the child: %s, want %s", name, r.StructuredContent, want)
		}
	}
}

// A message over --max-message-size fails its own request, in either direction, and the
// session goes on.
func TestMessageOverLimit(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {"big": {"command": "$FIXTURE"}, "ts": {"command": "$FIXTURE", "args": ["-id-last"]}}}`, "--max-message-size", "1048576")
	agg.initialize("test")
	answersOverLimit(t, agg)
	m := agg.call("tools/call", `{"name":"big:echo","arguments":{"text":"`+strings.Repeat("z", 2000000)+`"}}`)
	if !strings.Contains(string(m.Error), `"code":-32600`) || !strings.Contains(string(m.Error), "larger than 1048576 bytes") {
		t.Errorf("too large a request: %.300s", m.Line)
	}
	if m := agg.call("tools/call", `{"name":"big:big","arguments":{"bytes":1000}}`); m.Error != nil {
		t.Errorf("after messages over the limit: %s", m.Line)
	}
}

// answersOverLimit has p's servers "big" and "ts" (which writes the id after the result, as the
// TypeScript SDK does) answer over a --max-message-size of 1 MiB: each call fails with an error
// that names its server.
func answersOverLimit(t *testing.T, p *peer) {
	t.Helper()
	for _, key := range []string{"big", "ts"} {
		m := p.call("tools/call", `{"name":"`+key+`:big","arguments":{"bytes":2000000}}`)
		if !strings.Contains(string(m.Error), `the answer of server \"`+key+`\" is larger than 1048576 bytes`) {
			t.Errorf("too large an answer of %s: %.300s", key, m.Line)
		}
	}
}

// The SDK's own client sees the same catalog and gets list_changed.
func TestSDKClient(t *testing.T) {
	changed := make(chan struct{}, 10)
	path := writeConfig(t, `{"mcpServers": {"fs": {"command": "$FIXTURE"}, "other": {"command": "$FIXTURE", "args": ["-prefix", "o_"]}}}`)
	session := connectSDK(t, path, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}, "--separator", "__", "--max-restarts", "0")
	ctx := context.Background()
	res, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	want := []string{"fs__echo", "fs__odd", "fs__fail", "fs__sleep", "fs__cancelled", "fs__hang", "fs__crash", "fs__big", "fs__close_stdout", "fs__pid", "fs__progress", "fs__grow", "fs__getenv",
		"other__o_echo", "other__o_odd", "other__o_fail", "other__o_sleep", "other__o_cancelled", "other__o_hang", "other__o_crash", "other__o_big", "other__o_close_stdout", "other__o_pid", "other__o_progress", "other__o_grow", "other__o_getenv"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("tool names (-want +got):\n%s", diff)
	}
	r, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "fs__echo", Arguments: map[string]any{"q": "x"}})
	if err != nil || r.IsError {
		t.Fatalf("fs__echo: %v %+v", err, r)
	}
	_, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "fs__fail"})
	if err == nil || !strings.Contains(err.Error(), "the fixture fails as asked") {
		t.Errorf("fs__fail: error %v, want the child's error", err)
	}
	session.CallTool(ctx, &mcp.CallToolParams{Name: "other__o_crash"})
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Error("the SDK client got no list_changed after a crash")
	}
}

// A child that stops reading its stdin holds up neither the client's other calls nor the
// aggregator's own answers: calls to it wait in the aggregator, not in the client's reader.
func TestChildThatStopsReading(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {"deaf": {"command": "$FIXTURE", "args": ["-deaf"]}, "ok": {"command": "$FIXTURE"}}}`)
	agg.initialize("test")
	if m := agg.call("tools/call", `{"name":"deaf:echo","arguments":{}}`); m.Error != nil {
		t.Fatalf("first call: %s", m.Line)
	}
	// Far more than a pipe holds: a write that waited for the child would stall the reader.
	arg := strings.Repeat("x", 16<<10)
	for range 64 {
		agg.send("tools/call", `{"name":"deaf:echo","arguments":{"text":"`+arg+`"}}`)
	}
	if m := agg.call("tools/call", `{"name":"ok:echo","arguments":{"still":"served"}}`); !strings.Contains(string(m.Result), `"still":"served"`) {
		t.Errorf("a call to another server while one does not read: %s", m.Line)
	}
	if m := agg.call("ping", `{}`); m.Error != nil {
		t.Errorf("ping while a server does not read: %s", m.Line)
	}
	if strings.Contains(agg.stderr.String(), "exited") {
		t.Errorf("the server that does not read was meant to stay up:\n%s", agg.stderr)
	}
}
