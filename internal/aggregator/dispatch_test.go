package aggregator

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Each route of the two dispatchers (fromclient.go, fromserver.go), through Serve in this process.

// initialize is answered first even when the client sends requests right behind it, with the
// union of the servers' capabilities (tasks included, which the SDK cannot carry).
func TestDispatchHandshake(t *testing.T) {
	c := serve(t, Options{}, fx("a", "-full"), fx("b", "-tasks"))
	init := c.send("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	list := c.send("tools/list", "")
	m := c.wait(init, "initialize")
	listed := c.wait(list, "tools/list")
	if listed.Seq < m.Seq {
		t.Errorf("tools/list was answered before initialize")
	}
	var res struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
	}
	if err := json.Unmarshal(m.Result, &res); err != nil || res.ProtocolVersion != "2025-06-18" {
		t.Fatalf("initialize answered %s", m.Line)
	}
	for _, want := range []string{"tools", "prompts", "resources", "completions", "logging", "tasks"} {
		if _, ok := res.Capabilities[want]; !ok {
			t.Errorf("capabilities %s lack %q", m.Result, want)
		}
	}
	if got := names(t, listed, "tools"); !slices.Contains(got, "a:echo") || !slices.Contains(got, "b:task_sleep") {
		t.Errorf("tools/list: %v", got)
	}
	// A second initialize is the SDK's to refuse.
	if m := c.call("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`); m.Error == nil {
		t.Errorf("a second initialize: %s", m.Line)
	}
	if m := c.call("ping", ""); string(m.Result) != "{}" {
		t.Errorf("ping: %s", m.Line)
	}
}

// Before initialize, requests are the SDK's to refuse; malformed lines get JSON-RPC errors and
// the session goes on.
func TestDispatchBeforeInitializeAndBadLines(t *testing.T) {
	c := serve(t, Options{}, fx("a"))
	if m := c.call("tools/list", ""); m.Error == nil {
		t.Errorf("tools/list before initialize: %s", m.Line)
	}
	c.write(`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":`) // not JSON
	if m := c.note(""); !strings.Contains(m.Line, `"code":-32700`) {
		t.Errorf("a line that is not JSON: %s", m.Line)
	}
	c.write(`[{"jsonrpc":"2.0","id":9,"method":"ping"}]`)
	if m := c.note(""); !strings.Contains(m.Line, "batch before initialize") {
		t.Errorf("a batch before initialize: %s", m.Line)
	}
	c.initialize(`{}`)
	answer := c.expect("7000")
	c.write(`{"jsonrpc":"1.0","id":7000,"method":"ping"}`)
	if m := c.wait(answer, "a wrong version"); !strings.Contains(m.Line, `-32600`) {
		t.Errorf("a wrong version: %s", m.Line)
	}
	if m := c.call("nonsense/method", "{}"); m.Error == nil {
		t.Errorf("an unknown method: %s", m.Line)
	}
}

// Tools, prompts, resources, templates and completions reach their server, byte for byte apart
// from the name; unknown names and URIs get the errors the specification gives.
func TestDispatchRouting(t *testing.T) {
	c := serve(t, Options{Separator: "__"}, fx("a", "-full"), fx("b", "-full", "-scheme", "other"))
	c.initialize(`{}`)
	if m := c.call("tools/call", `{"name":"a__echo","arguments":{"z": 1, "a":[1.50]}}`); !strings.Contains(m.Line, `"structuredContent":{"z": 1, "a":[1.50]}`) {
		t.Errorf("tools/call: %s", m.Line)
	}
	if m := c.call("tools/call", `{"name":"a__fail"}`); !strings.Contains(m.Line, `"error":{"code":-32042,"message":"the fixture fails as asked","data":{"why":["asked",1.50,12345678901234567890],"nested":{"b":null,"a":{}}}}`) {
		t.Errorf("a server's error: %s", m.Line)
	}
	wantError(t, c.call("tools/call", `{"name":"a__nope"}`), -32602, "Unknown tool: a__nope")
	if m := c.call("tools/call", `{"name":"a\u005f_echo","arguments":{}}`); m.Error != nil { // escaped: decoded, found
		t.Errorf("an escaped name: %s", m.Line)
	}
	wantError(t, c.call("tools/call", `{"arguments":{}}`), -32602, "needs params with the tool's name")
	wantError(t, c.call("tools/call", `{"name":5}`), -32602, "not a string")
	if m := c.call("prompts/get", `{"name":"b__greet","arguments":{"who":"x"}}`); !strings.Contains(m.Line, `"x-big":12345678901234567890123`) {
		t.Errorf("prompts/get: %s", m.Line)
	}
	wantError(t, c.call("prompts/get", `{"name":"greet"}`), -32602, "Unknown prompt: greet")
	if m := c.call("resources/read", `{"uri":"other://static/a"}`); !strings.Contains(m.Line, `"uri":"other://static/a"`) {
		t.Errorf("resources/read: %s", m.Line)
	}
	if m := c.call("resources/read", `{"uri":"fixture://items/42"}`); m.Error != nil {
		t.Errorf("resources/read by template: %s", m.Line)
	}
	wantError(t, c.call("resources/read", `{"uri":"nowhere://x"}`), -32002, "Resource not found: nowhere://x")
	wantError(t, c.call("resources/read", `{}`), -32602, "needs params with a uri")
	if m := c.call("resources/subscribe", `{"uri":"fixture://static/a"}`); m.Error != nil {
		t.Errorf("resources/subscribe: %s", m.Line)
	}
	if m := c.call("completion/complete", `{"ref":{"type":"ref/prompt","name":"a__greet"},"argument":{"name":"who","value":""}}`); m.Error != nil {
		t.Errorf("completion/complete of a prompt: %s", m.Line)
	}
	if m := c.call("completion/complete", `{"ref":{"type":"ref/resource","uri":"other://items/{id}"},"argument":{"name":"id","value":""}}`); m.Error != nil {
		t.Errorf("completion/complete of a template: %s", m.Line)
	}
	wantError(t, c.call("completion/complete", `{"ref":{"type":"ref/prompt","name":"nope"},"argument":{}}`), -32602, "Unknown prompt")
	wantError(t, c.call("completion/complete", `{"ref":{"type":"ref/what"}}`), -32602, "unknown ref type")
	wantError(t, c.call("completion/complete", `{}`), -32602, "needs params with a ref")
	for method, field := range map[string]string{"prompts/list": "prompts", "resources/list": "resources", "resources/templates/list": "resourceTemplates"} {
		var list map[string][]json.RawMessage
		if m := c.call(method, `{}`); json.Unmarshal(m.Result, &list) != nil || len(list[field]) == 0 {
			t.Errorf("%s: %s", method, m.Line)
		}
	}
	wantError(t, c.call("tools/list", `{"cursor":"next"}`), -32602, "invalid cursor")
	wantError(t, c.call("tools/list", `[1]`), -32602, "params must be an object")
	if m := c.call("logging/setLevel", `{"level":"debug"}`); string(m.Result) != "{}" {
		t.Errorf("logging/setLevel: %s", m.Line)
	}
}

// A server's log messages, progress and resource updates reach the client; list changes are
// re-read and announced.
func TestDispatchServerNotifications(t *testing.T) {
	c := serve(t, Options{}, fx("a", "-full"))
	c.initialize(`{}`)
	done := c.send("tools/call", `{"name":"a:progress","_meta":{"progressToken":"tok"}}`)
	for range 3 {
		if m := c.note("notifications/progress"); !strings.Contains(string(m.Params), `"progressToken":"tok"`) {
			t.Errorf("progress: %s", m.Line)
		}
	}
	c.wait(done, "the progress call")
	c.call("tools/call", `{"name":"a:log"}`)
	if m := c.note("notifications/message"); !strings.Contains(string(m.Params), `"logger":"a"`) && !strings.Contains(string(m.Params), `"logger"`) {
		t.Errorf("log message: %s", m.Line)
	}
	c.call("resources/subscribe", `{"uri":"fixture://static/a"}`)
	c.call("tools/call", `{"name":"a:touch","arguments":{"uri":"fixture://static/a"}}`)
	c.note("notifications/resources/updated")
	c.call("tools/call", `{"name":"a:grow"}`)
	c.note("notifications/tools/list_changed")
	if got := names(t, c.call("tools/list", ""), "tools"); !slices.Contains(got, "a:grown_1") {
		t.Errorf("after a list change: %v", got)
	}
	c.call("tools/call", `{"name":"a:grow_prompt"}`)
	c.note("notifications/prompts/list_changed")
	c.call("tools/call", `{"name":"a:grow_resource"}`)
	c.note("notifications/resources/list_changed")
}

// A server's requests reach the client under IDs of ours and the answers go back; what the
// client did not declare is refused; cancellation and progress go both ways.
func TestDispatchServerRequests(t *testing.T) {
	record := filepath.Join(t.TempDir(), "calls")
	c := serve(t, Options{}, fx("a", "-full", "-record", record), fx("b", "-full"))
	c.initialize(`{"sampling":{},"elicitation":{}}`)
	done := c.send("tools/call", `{"name":"a:ask","arguments":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1,"_meta":{"progressToken":7}}}}`)
	req := c.note("sampling/createMessage")
	if !strings.HasPrefix(string(req.ID), `"agg-`) {
		t.Errorf("the request reached the client as %s", req.Line)
	}
	c.write(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1}}`)
	c.write(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"role":"assistant","content":{"type":"text","text":"hi"},"model":"m","x":[1.50]}}`)
	if m := c.wait(done, "ask"); !strings.Contains(m.Line, `"x":[1.50]`) {
		t.Errorf("the client's answer did not reach the server as it was: %s", m.Line)
	}
	if m := c.call("tools/call", `{"name":"a:notes"}`); !strings.Contains(m.Line, `notifications/progress`) {
		t.Errorf("the client's progress did not reach the server: %s", m.Line)
	}

	wantRefused := func(method, params, text string) {
		t.Helper()
		m := c.call("tools/call", `{"name":"b:ask","arguments":{"method":"`+method+`","params":`+params+`}}`)
		if !strings.Contains(m.Line, text) {
			t.Errorf("%s: %s, want %q", method, m.Line, text)
		}
	}
	wantRefused("roots/list", `{}`, `does not support roots/list`)
	wantRefused("elicitation/create", `{"mode":"url","url":"https://x","message":"m","elicitationId":"e"}`, `does not support URL elicitation`)

	// A server cancels its request: the client is told under our ID.
	done = c.send("tools/call", `{"name":"b:ask","arguments":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":1},"cancel_after_ms":50}}`)
	req = c.note("sampling/createMessage")
	if m := c.note("notifications/cancelled"); !strings.Contains(string(m.Params), string(req.ID)) {
		t.Errorf("the cancellation: %s, want the ID %s", m.Line, req.ID)
	}
	c.wait(done, "the cancelled ask")

	// The client cancels a call: the server gets the cancellation under our ID.
	sleep := c.send("tools/call", `{"name":"a:sleep","arguments":{"ms":60000}}`)
	waitFor(t, "a:sleep at the server (its -record file)", func() bool {
		calls, _ := os.ReadFile(record)
		return strings.Contains(string(calls), "sleep ")
	})
	c.write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + c.lastID() + `}}`)
	deadline := time.Now().Add(5 * time.Second)
	for {
		m := c.call("tools/call", `{"name":"a:cancelled"}`)
		if strings.Contains(m.Line, `"agg-`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server never saw the cancellation: %s", m.Line)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case m := <-sleep:
		t.Errorf("a cancelled call was answered: %s", m.Line)
	default:
	}
}

// expect returns where the answer to the request id, written by hand, arrives.
func (c *client) expect(id string) <-chan msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan msg, 1)
	c.waiting[id] = ch
	return ch
}

// lastID is the ID of the last request sent.
func (c *client) lastID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return itoa(c.next)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// What servers send before the client is ready waits for it, in order.
func TestDispatchBeforeReady(t *testing.T) {
	c := serve(t, Options{}, fx("a", "-full", "-log-at-start", "3", "-roots-at-start"))
	c.initialize(`{"roots":{}}`)
	for i := range 3 {
		if m := c.note("notifications/message"); !strings.Contains(string(m.Params), `"started `+itoa(i)) && !strings.Contains(string(m.Params), "started") {
			t.Errorf("log %d: %s", i, m.Line)
		}
	}
	req := c.note("roots/list")
	c.write(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"roots":[{"uri":"file:///x"}]}}`)
	if m := c.call("tools/call", `{"name":"a:roots"}`); !strings.Contains(m.Line, "file:///x") {
		t.Errorf("the roots answer: %s", m.Line)
	}
}

// A server that crashes fails its calls at once, leaves the lists, and the client is told.
func TestDispatchServerDown(t *testing.T) {
	c := serve(t, Options{}, fx("a"), fx("b"))
	c.initialize(`{}`)
	hung := c.send("tools/call", `{"name":"a:hang"}`)
	wantError(t, c.call("tools/call", `{"name":"a:crash"}`), -32603, `server "a" exited with status 3 while calling tool "crash"`)
	wantError(t, c.wait(hung, "the hung call"), -32603, `server "a"`)
	c.note("notifications/tools/list_changed")
	wantError(t, c.call("tools/call", `{"name":"a:echo"}`), -32602, "Unknown tool: a:echo")
	if m := c.call("tools/call", `{"name":"b:echo"}`); m.Error != nil {
		t.Errorf("the other server: %s", m.Line)
	}
	if n := c.agg.inflight.inFlight(); n != 0 {
		t.Errorf("%d calls left in the table", n)
	}
}

// Tasks go to the server that owns them; tasks/list gathers them.
func TestDispatchTasks(t *testing.T) {
	c := serve(t, Options{}, fx("a", "-tasks"), fx("plain"))
	c.initialize(`{}`)
	m := c.call("tools/call", `{"name":"a:task_sleep","arguments":{"ms":10},"task":{"ttl":60000}}`)
	var created struct {
		Task struct {
			TaskID string `json:"taskId"`
		} `json:"task"`
	}
	if json.Unmarshal(m.Result, &created) != nil || created.Task.TaskID == "" {
		t.Fatalf("the task call: %s", m.Line)
	}
	if m := c.call("tasks/get", `{"taskId":"`+created.Task.TaskID+`"}`); m.Error != nil {
		t.Errorf("tasks/get: %s", m.Line)
	}
	if m := c.call("tasks/list", ""); !strings.Contains(m.Line, created.Task.TaskID) {
		t.Errorf("tasks/list: %s", m.Line)
	}
	wantError(t, c.call("tasks/get", `{"taskId":"nope"}`), -32602, "Task not found: nope")
}

// Tools, prompts, resources and logging are always offered, with list changes (a reload may
// add servers that serve them): without servers that serve them, the lists are empty and
// logging/setLevel is answered here. Tasks are offered only as the servers offer them.
func TestDispatchAlwaysOffered(t *testing.T) {
	c := serve(t, Options{}, fx("a"))
	init := c.initialize(`{}`)
	want := `"capabilities":{"logging":{},"prompts":{"listChanged":true},"resources":{"listChanged":true},"tools":{"listChanged":true}}`
	if !strings.Contains(init.Line, want) {
		t.Errorf("initialize: %s, want %s", init.Line, want)
	}
	for method, field := range map[string]string{"prompts/list": "prompts", "resources/list": "resources", "resources/templates/list": "resourceTemplates"} {
		if m := c.call(method, ""); string(m.Result) != `{"`+field+`":[]}` {
			t.Errorf("%s: %s", method, m.Line)
		}
	}
	if m := c.call("logging/setLevel", `{"level":"info"}`); string(m.Result) != "{}" {
		t.Errorf("logging/setLevel: %s", m.Line)
	}
	for _, method := range []string{"tasks/list", "tasks/get"} {
		wantError(t, c.call(method, `{"taskId":"x"}`), -32601, "Method not found")
	}
}

// A client speaking 2025-03-26 may send batches.
func TestDispatchBatch(t *testing.T) {
	c := serve(t, Options{}, fx("a"))
	m := c.call("initialize", `{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	if m.Error != nil {
		t.Fatal(m.Line)
	}
	c.write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	c.write(`[{"jsonrpc":"2.0","id":"b1","method":"tools/call","params":{"name":"a:echo","arguments":{"n":1}}},{"jsonrpc":"2.0","id":"b2","method":"tools/list"}]`)
	b := c.note("")
	if !strings.HasPrefix(b.Line, `[{"jsonrpc":"2.0","id":"b1"`) || !strings.Contains(b.Line, `"id":"b2"`) {
		t.Errorf("the batch's answer: %s", b.Line)
	}
}

// The client's cancellation of a request the aggregator answers from several servers
// (logging/setLevel, tasks/list) finds it in the in-flight table: the server still at it gets
// the cancellation, and the request is never answered.
func TestDispatchFanOutCancelled(t *testing.T) {
	for _, tc := range []struct {
		method, params string
		args           []string
	}{
		{"logging/setLevel", `{"level":"debug"}`, []string{"-full"}},
		{"tasks/list", `{}`, []string{"-tasks"}},
	} {
		t.Run(tc.method, func(t *testing.T) {
			c := serve(t, Options{}, fx("a", append(tc.args, "-hold", tc.method)...), fx("b", tc.args...))
			c.initialize(`{}`)
			answer := c.send(tc.method, tc.params)
			c.write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + c.lastID() + `,"reason":"not needed"}}`)
			waitFor(t, "the cancellation at the server that holds "+tc.method, func() bool {
				return strings.Contains(c.call("tools/call", `{"name":"a:cancelled"}`).Line, `"agg-`)
			})
			// Each leg leaves the table on its own goroutine once cancelled: the other
			// server's a moment after.
			waitFor(t, "nothing in the table after the cancellation", func() bool { return c.agg.inflight.pending() == "nothing" })
			select {
			case m := <-answer:
				t.Errorf("the cancelled %s was answered: %s", tc.method, m.Line)
			default:
			}
		})
	}
}

// A request that cannot be written to its server (its process closed its stdin) waits in the
// table for a moment, to see whether the process ended: there the client's cancellation finds
// it, and it is never sent, not even to the server's next process (which it would reach, held
// for the restart, had the process ended). One not cancelled, to a process that runs on,
// fails saying why.
func TestDispatchUnwrittenCancelled(t *testing.T) {
	record := filepath.Join(t.TempDir(), "calls")
	c := serve(t, Options{MaxRestarts: 1, RestartDelay: 10 * time.Millisecond},
		fx("a", "-close-stdin", "-exit-after-close", "500ms", "-record", record), fx("b", "-close-stdin"))
	c.initialize(`{}`)
	c.call("tools/call", `{"name":"a:echo","arguments":{"text":"first"}}`)
	c.call("tools/call", `{"name":"b:echo","arguments":{"text":"first"}}`)
	waitFor(t, "both servers' stdin closed", func() bool { return strings.Count(c.log.String(), "fixture: stdin closed") == 2 })

	c.send("tools/call", `{"name":"a:echo","arguments":{"text":"cancelled"}}`)
	c.waitLog("a request could not be written to its server")
	c.write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + c.lastID() + `}}`)
	// a's process exits, and its next one serves the next call.
	c.waitLog(`server "a" was restarted (try 1) and serves again`)
	if m := c.call("tools/call", `{"name":"a:echo","arguments":{"text":"next"}}`); m.Error != nil || !strings.Contains(m.Line, "next") {
		t.Fatalf("the call after a's restart: %s", m.Line)
	}
	if calls, _ := os.ReadFile(record); strings.Contains(string(calls), "cancelled") {
		t.Errorf("a cancelled request reached the server's next process; it was asked:\n%s", calls)
	}
	if m := c.call("tools/call", `{"name":"b:echo","arguments":{"text":"unwritten"}}`); !strings.Contains(m.Line, "cannot be written to") {
		t.Errorf("a request that cannot be written to a process that runs on: %s", m.Line)
	}
}
