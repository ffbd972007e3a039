package aggregator

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
)

// The modern envelope of a test client's requests.
const (
	modernCaps = `{"elicitation":{"form":{}},"sampling":{},"roots":{}}`
	modernInfo = `{"name":"modern-test","version":"2.0"}`
)

// meta is a request's _meta for the modern era, with extra members.
func meta(caps string, extra ...string) string {
	m := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps +
		`,"io.modelcontextprotocol/clientInfo":` + modernInfo
	for _, e := range extra {
		m += "," + e
	}
	return m + "}"
}

// modernCall sends a modern request: params (an object's members, may be empty) with the
// envelope.
func (c *client) modernCall(method, members string, extra ...string) msg {
	c.t.Helper()
	p := "{" + meta(modernCaps, extra...)
	if members != "" {
		p += "," + members
	}
	return c.call(method, p+"}")
}

// member decodes the member key of an answer's result.
func member[T any](t *testing.T, m msg, key string) T {
	t.Helper()
	var r map[string]json.RawMessage
	var v T
	if err := json.Unmarshal(m.Result, &r); err != nil || json.Unmarshal(r[key], &v) != nil {
		t.Fatalf("no %q in %s", key, m.Line)
	}
	return v
}

// A client whose first request is server/discover speaks the modern era: it is told every
// version served, what the aggregator offers, its instructions and serverInfo, with the
// result's envelope; the servers are initialized with what the request's _meta says of the
// client.
func TestModernDiscover(t *testing.T) {
	c := serve(t, Options{}, fx("a", "-report-init", "-full", "-instructions", "Use a."))
	m := c.modernCall("server/discover", "")
	if m.Error != nil {
		t.Fatal(m.Line)
	}
	if got := member[[]string](t, m, "supportedVersions"); !slices.Equal(got, []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}) {
		t.Errorf("supportedVersions %v", got)
	}
	for key, want := range map[string]string{"resultType": "complete", "cacheScope": "private"} {
		if got := member[string](t, m, key); got != want {
			t.Errorf("%s %q, want %q", key, got, want)
		}
	}
	if !strings.Contains(member[string](t, m, "instructions"), "Use a.") {
		t.Errorf("instructions missing: %s", m.Line)
	}
	if got := member[map[string]json.RawMessage](t, m, "_meta")[era.MetaServerInfo]; !strings.Contains(string(got), `"mcp-simple-aggregator"`) {
		t.Errorf("serverInfo %s", got)
	}
	caps := member[map[string]json.RawMessage](t, m, "capabilities")
	if caps["tools"] == nil || caps["tasks"] != nil {
		t.Errorf("capabilities %s", m.Line)
	}
	got := c.modernCall("tools/call", `"name":"a:init_params"`)
	want := `{"protocolVersion":"2025-11-25","capabilities":{"roots":{},"sampling":{},"elicitation":{"form":{}}},"clientInfo":` + modernInfo + `}`
	if !strings.Contains(got.Line, `"structuredContent":`+want) {
		t.Errorf("the server was initialized with\n %s\nwant\n %s", got.Line, want)
	}
	if !strings.HasPrefix(string(got.Result), `{"resultType":"complete",`) {
		t.Errorf("a tool's result without resultType: %s", got.Line)
	}
}

// Every modern request is checked: the version must be one served (else -32022 with the
// versions), the capabilities present; a malformed request is answered and the session goes on.
func TestModernEnvelope(t *testing.T) {
	c := serve(t, Options{}, fx("a"))
	wantError(t, c.call("server/discover", `{}`), -32602, `"io.modelcontextprotocol/protocolVersion" is missing`)
	m := c.call("tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}}`)
	wantError(t, m, -32022, "Unsupported protocol version: 2099-01-01")
	if !strings.Contains(m.Line, `"data":{"supported":["2026-07-28","2025-11-25"`) || !strings.Contains(m.Line, `"requested":"2099-01-01"`) {
		t.Errorf("-32022 data: %s", m.Line)
	}
	wantError(t, c.call("tools/list", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`), -32602, `clientCapabilities" is missing`)
	if m := c.modernCall("tools/list", ""); m.Error != nil || !strings.Contains(m.Line, `"a:echo"`) {
		t.Fatalf("tools/list: %s", m.Line)
	}
	wantError(t, c.modernCall("tools/list", "", `"io.modelcontextprotocol/logLevel":"loud"`), -32602, "not a logging level")
	wantError(t, c.modernCall("tools/list", "", `"io.modelcontextprotocol/clientInfo":{"name":1}`), -32602, "clientInfo")
	wantError(t, c.call("tools/list", `{}`), -32602, "protocolVersion")
	for _, method := range []string{"ping", "logging/setLevel", "resources/subscribe", "tasks/list"} {
		wantError(t, c.modernCall(method, ""), -32601, "2026-07-28")
	}
	wantError(t, c.modernCall("no/such", ""), -32601, "no/such is not a method")
}

// The lists and resources/read carry resultType and cache hints (a legacy server's: stale
// at once, private); a legacy server's resource-not-found -32002 reaches a modern client as
// -32602; the results are otherwise as the server wrote them.
func TestModernResults(t *testing.T) {
	c := serve(t, Options{}, fx("a", "-full"))
	for _, method := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
		m := c.modernCall(method, "")
		if !strings.HasPrefix(string(m.Result), `{"resultType":"complete","ttlMs":0,"cacheScope":"private",`) {
			t.Errorf("%s: %.200s", method, m.Line)
		}
	}
	m := c.modernCall("resources/read", `"uri":"fixture://static/a"`)
	want := `{"resultType":"complete","ttlMs":0,"cacheScope":"private","contents":[{"uri":"fixture://static/a","mimeType":"text/plain","text":"contents of fixture://static/a","_meta":{"b":1,"a":0}}]}`
	if string(m.Result) != want {
		t.Errorf("resources/read\n %s\nwant\n %s", m.Result, want)
	}
	m = c.modernCall("resources/read", `"uri":"fixture://missing"`)
	wantError(t, m, -32602, "Resource not found")
	if !strings.Contains(m.Line, `"data":{"uri":"fixture://missing"}`) {
		t.Errorf("the error's data: %s", m.Line)
	}
	wantError(t, c.modernCall("resources/read", `"uri":"nowhere://x"`), -32602, "Resource not found")
}

// A server's log messages reach a modern client only while a request of its that asked for
// them (logLevel) is in flight to that server, at or above that level; the aggregator's own
// never.
func TestModernLogging(t *testing.T) {
	c := serve(t, Options{}, fx("a", "-full"))
	c.modernCall("tools/call", `"name":"a:log"`) // no logLevel: no message
	m := c.modernCall("tools/call", `"name":"a:log"`, `"io.modelcontextprotocol/logLevel":"error"`)
	if m.Error != nil {
		t.Fatal(m.Line)
	}
	var levels []string
	for {
		select {
		case n := <-c.notes:
			if n.Method == "notifications/message" {
				var p struct{ Level string }
				json.Unmarshal(n.Params, &p)
				levels = append(levels, p.Level)
			}
			continue
		default:
		}
		break
	}
	if !slices.Equal(levels, []string{"error", "critical", "alert", "emergency"}) {
		t.Errorf("log messages at %v; want those of the call that asked for error and above", levels)
	}
}

// A modern client's request with a logLevel, to a legacy server that takes its requests at
// once (the go-sdk's) and is slow to set its level: the request goes once the level is set, so
// that it logs what was asked for.
func TestModernLoggingSlowLevel(t *testing.T) {
	c := serve(t, Options{}, gs("g", "-era", "legacy", "-set-level-delay", "300ms"))
	m := c.modernCall("tools/call", `"name":"g:log"`, `"io.modelcontextprotocol/logLevel":"warning"`)
	if m.Error != nil {
		t.Fatal(m.Line)
	}
	var got []string
	for {
		select {
		case n := <-c.notes:
			if n.Method == "notifications/message" {
				got = append(got, string(n.Params))
			}
			continue
		default:
		}
		break
	}
	if len(got) != 2 { // warning and error
		t.Errorf("log messages %v; want the call's warning and error", got)
	}
}

// subscriptions/listen: acknowledged first with what was agreed, then the list changes and
// resource updates asked for, each tagged with the listen's ID.
func TestModernListen(t *testing.T) {
	c := serve(t, Options{}, fx("a", "-full"), fx("b", "-full", "-scheme", "other"))
	c.write(`{"jsonrpc":"2.0","id":"listen-1","method":"subscriptions/listen","params":{` + meta(modernCaps) +
		`,"notifications":{"toolsListChanged":true,"resourceSubscriptions":["fixture://static/a","nowhere://x"]}}}`)
	ack := c.note("notifications/subscriptions/acknowledged")
	if want := `{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["fixture://static/a"]},"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}`; string(ack.Params) != want {
		t.Errorf("ack %s\nwant %s", ack.Params, want)
	}
	c.modernCall("tools/call", `"name":"a:grow"`)
	if n := c.note("notifications/tools/list_changed"); string(n.Params) != `{"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}` {
		t.Errorf("list_changed %s", n.Line)
	}
	if m := c.modernCall("tools/call", `"name":"a:touch","arguments":{"uri":"fixture://static/a"}`); !strings.Contains(m.Line, `"subscribed":true`) {
		t.Fatalf("the server was not subscribed: %s", m.Line)
	}
	if n := c.note("notifications/resources/updated"); string(n.Params) != `{"uri":"fixture://static/a","_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1","b":1,"a":2}}` {
		t.Errorf("resources/updated %s", n.Line)
	}
	c.write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"listen-1"}}`)
	deadline := time.Now().Add(5 * time.Second)
	for {
		m := c.modernCall("tools/call", `"name":"a:touch","arguments":{"uri":"fixture://static/a"}`)
		if strings.Contains(m.Line, `"subscribed":false`) {
			break // unsubscribed at the server with the last stream that wanted it
		}
		if time.Now().After(deadline) {
			t.Fatalf("still subscribed after the listen ended: %s", m.Line)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A legacy server's request for input during a modern client's call reaches the client as an
// InputRequiredResult; the retry with inputResponses and the requestState delivers the answer,
// and the server's result answers the retry.
func TestModernInputRequired(t *testing.T) {
	c := serve(t, Options{}, fx("a", "-full"))
	call := `"name":"a:ask","arguments":{"method":"elicitation/create","params":{"message":"Name?","requestedSchema":{"type":"object"}}}`
	m := c.modernCall("tools/call", call)
	if got := member[string](t, m, "resultType"); got != "input_required" {
		t.Fatalf("first answer %s", m.Line)
	}
	requests := member[map[string]json.RawMessage](t, m, "inputRequests")
	if len(requests) != 1 || string(requests["elicitation-1"]) != `{"method":"elicitation/create","params":{"message":"Name?","requestedSchema":{"type":"object"}}}` {
		t.Fatalf("inputRequests %s", m.Line)
	}
	state := member[string](t, m, "requestState")
	quoted, _ := json.Marshal(state)

	// Refused: forged, for other arguments.
	forged := strings.Replace(state, state[len(era.StatePrefix):len(era.StatePrefix)+4], "AAAA", 1)
	fq, _ := json.Marshal(forged)
	wantError(t, c.modernCall("tools/call", call+`,"inputResponses":{},"requestState":`+string(fq)), -32602, "")
	other := strings.Replace(call, "Name?", "Age?", 1)
	wantError(t, c.modernCall("tools/call", other+`,"inputResponses":{},"requestState":`+string(quoted)), -32602, "belongs to another request")

	answer := `{"action":"accept","content":{"name":"Ada"}}`
	m = c.modernCall("tools/call", call+`,"inputResponses":{"elicitation-1":`+answer+`},"requestState":`+string(quoted))
	if !strings.Contains(m.Line, `"structuredContent":{"result":`+answer+`}`) || member[string](t, m, "resultType") != "complete" {
		t.Fatalf("retry answered %s", m.Line)
	}
	wantError(t, c.modernCall("tools/call", call+`,"inputResponses":{"elicitation-1":`+answer+`},"requestState":`+string(quoted)), -32602, "is gone")
}

// Input a request did not declare it can give: -32021 naming the capability; a request that
// is never retried: the server's request gets an error when its state expires, and the
// state is refused.
func TestModernInputRefused(t *testing.T) {
	const ttl = 300 * time.Millisecond
	c := serve(t, Options{InputTTL: ttl}, fx("a", "-full"))
	call := `"name":"a:ask","arguments":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}`
	p := "{" + meta(`{"elicitation":{}}`) + "," + call + "}"
	m := c.call("tools/call", p)
	wantError(t, m, -32021, `does not declare "sampling"`)
	if !strings.Contains(m.Line, `"data":{"requiredCapabilities":{"sampling":{}}}`) {
		t.Errorf("data %s", m.Line)
	}

	m = c.modernCall("tools/call", call)
	answered := time.Now()
	state, _ := json.Marshal(member[string](t, m, "requestState"))
	// The requestState holds its expiry, in milliseconds, set before the answer left: a
	// millisecond after the TTL from the answer's arrival, it is over.
	time.Sleep(time.Until(answered.Add(ttl + time.Millisecond)))
	wantError(t, c.modernCall("tools/call", call+`,"inputResponses":{"sampling-1":{}},"requestState":`+string(state)), -32602, "expired")
	c.waitLog("input asked for expired") // the expiry's timer, which fails the server's request
}

// MCP Apps: the servers' extensions are offered (merged), the client's reach the servers as
// declared, and a tool is callable by the name its server declared when only one server lists
// it (an app's own calls use it).
func TestExtensionsAndBareNames(t *testing.T) {
	ui := `{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}}`
	c := serve(t, Options{},
		fx("a", "-report-init", "-caps", `{"tools":{},"extensions":{"io.modelcontextprotocol/ui":{}}}`),
		fx("b", "-caps", `{"tools":{},"extensions":{"com.example/x":{"n":1}}}`))
	m := c.initialize(`{"extensions":` + ui + `}`)
	if !strings.Contains(m.Line, `"extensions":{"com.example/x":{"n":1},"io.modelcontextprotocol/ui":{}}`) {
		t.Errorf("capabilities offered: %s", m.Line)
	}
	if got := c.call("tools/call", `{"name":"a:init_params"}`); !strings.Contains(got.Line, `"extensions":`+ui) {
		t.Errorf("the server was not told the client's extensions: %s", got.Line)
	}
	if got := c.call("tools/call", `{"name":"init_params"}`); got.Error != nil || !strings.Contains(got.Line, `"clientInfo"`) {
		t.Errorf("a bare name one server lists: %s", got.Line)
	}
	wantError(t, c.call("tools/call", `{"name":"echo"}`), -32602, "Unknown tool: echo")
}

// A legacy server's URLElicitationRequiredError (-32042) reaches a modern client as an
// InputRequiredResult with the URL elicitation; the retry goes to the server again. One with
// no URL in it is an internal error: a modern client never gets -32042.
func TestModernURLElicitation(t *testing.T) {
	c := serve(t, Options{}, fx("a", "-full"))
	call := `"name":"a:fail","arguments":{"url":"https://example.com/auth"}`
	m := c.modernCall("tools/call", call)
	want := `"inputRequests":{"elicitation-1":{"method":"elicitation/create","params":{"message":"Sign in","mode":"url","url":"https://example.com/auth"}}}`
	if !strings.Contains(m.Line, `"resultType":"input_required",`+want) {
		t.Fatalf("-32042 became %s", m.Line)
	}
	state, _ := json.Marshal(member[string](t, m, "requestState"))
	m = c.modernCall("tools/call", call+`,"inputResponses":{"elicitation-1":{"action":"accept"}},"requestState":`+string(state))
	if !strings.Contains(m.Line, `"signed in"`) {
		t.Errorf("the retry: %s", m.Line)
	}
	wantError(t, c.modernCall("tools/call", `"name":"a:fail"`), -32603, "the fixture fails as asked")
}

// A legacy server's tools reach a modern client without the legacy tasks' "execution"; one
// that runs only as a legacy task is not listed, and a call to it says why.
func TestModernToolsWithoutLegacyTasks(t *testing.T) {
	defs := filepath.Join(t.TempDir(), "defs.json")
	os.WriteFile(defs, []byte(`{"tools":[{"name":"must_task","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}]}`), 0o600)
	c := serve(t, Options{}, fx("a", "-tasks", "-defs", defs))
	m := c.modernCall("tools/list", "")
	if strings.Contains(m.Line, `"execution"`) {
		t.Errorf("a legacy task member reached a modern client: %.300s", m.Line)
	}
	if !strings.Contains(m.Line, `"a:odd"`) {
		t.Errorf("a:odd (taskSupport optional) is not listed: %.300s", m.Line)
	}
	if !strings.Contains(m.Line, `"a:task_sleep"`) || strings.Contains(m.Line, `"a:must_task"`) {
		t.Errorf("a:task_sleep (taskSupport optional) not listed, or a:must_task (required) listed: %.300s", m.Line)
	}
	wantError(t, c.modernCall("tools/call", `"name":"a:must_task"`), -32602, "run only as a task of protocol 2025-11-25")
	c2 := serve(t, Options{}, fx("a", "-tasks", "-defs", defs))
	c2.initialize(`{}`)
	if m := c2.call("tools/list", `{}`); !strings.Contains(m.Line, `"a:must_task"`) || !strings.Contains(m.Line, `"execution"`) {
		t.Errorf("a legacy client's list changed: %.300s", m.Line)
	}
}

// A retry that is not one of the aggregator's (no requestState, or another's) is the request
// again to a legacy server: without inputResponses, which a go-sdk server would otherwise take
// as the answers, so it asks afresh.
func TestModernRetryWithoutState(t *testing.T) {
	c := serve(t, Options{}, gs("old", "-era", "legacy"))
	for _, extra := range []string{`,"inputResponses":{"elicit-1":{"action":"accept","content":{"name":"Eve"}}}`,
		`,"inputResponses":{"elicit-1":{"action":"accept","content":{"name":"Eve"}}},"requestState":"[]"`} {
		m := c.modernCall("tools/call", `"name":"old:elicit","arguments":{}`+extra)
		if got := member[string](t, m, "resultType"); got != "input_required" || strings.Contains(m.Line, "Eve") {
			t.Errorf("a retry with %s was answered %s; want a new input_required", extra, m.Line)
		}
	}
}

// A legacy server's request outside any request of the client's (roots/list as soon as it is
// initialized, as the filesystem and everything servers do) waits for the client's next
// request that can carry input: that request is answered with an InputRequiredResult for it
// first, the retry delivers the answer, and the request then goes on as it was. A request that
// does not declare the capability cannot carry it: the server is told the client does not
// support it, and the request goes on.
func TestModernParkedRequest(t *testing.T) {
	c := serve(t, Options{}, fx("fs", "-full", "-roots-at-start"))
	if m := c.modernCall("tools/list", ""); m.Error != nil {
		t.Fatal(m.Line)
	}
	call := `"name":"fs:roots","arguments":{}`
	var m msg
	// The server asks once it is initialized: the first list may come before.
	waitFor(t, "a call that carries the server's roots/list", func() bool {
		m = c.modernCall("tools/call", call)
		return member[string](t, m, "resultType") == "input_required"
	})
	requests := member[map[string]json.RawMessage](t, m, "inputRequests")
	if len(requests) != 1 || string(requests["roots-1"]) != `{"method":"roots/list"}` {
		t.Fatalf("the request did not carry the server's roots/list: %s", m.Line)
	}
	state, _ := json.Marshal(member[string](t, m, "requestState"))
	roots := `{"roots":[{"uri":"file:///work","name":"work"}]}`
	m = c.modernCall("tools/call", call+`,"inputResponses":{"roots-1":`+roots+`},"requestState":`+string(state))
	if member[string](t, m, "resultType") != "complete" || !strings.Contains(m.Line, `"structuredContent":{"result":`+roots+`}`) {
		t.Fatalf("the retry went on as the request, and the server had the client's roots: %s", m.Line)
	}

	c = serve(t, Options{}, fx("fs", "-full", "-roots-at-start"))
	c.modernCall("tools/list", "")
	c.waitLog("a request of the server waits for the client's next request that can carry it")
	p := "{" + meta(`{"sampling":{}}`) + "," + call + "}"
	m = c.call("tools/call", p)
	if m.Error != nil || !strings.Contains(m.Line, `does not support roots/list`) {
		t.Fatalf("a request without the roots capability: %s", m.Line)
	}
}

// A request waiting for its legacy server to set the log level it asked for waits in the
// in-flight table, not in the client's reader: the client's other requests are answered
// meanwhile, and its cancellation finds it.
func TestModernLevelWaitsInTable(t *testing.T) {
	c := serve(t, Options{ProbeTimeout: time.Hour}, gs("g", "-era", "legacy", "-set-level-delay", "1h"), fx("a"))
	waiting := c.send("tools/call", "{"+meta(modernCaps, `"io.modelcontextprotocol/logLevel":"warning"`)+`,"name":"g:log"}`)
	id := c.lastID()
	if m := c.modernCall("tools/call", `"name":"a:echo","arguments":{"x":1}`); !strings.Contains(string(m.Result), `{"x":1}`) {
		t.Fatalf("a call behind one waiting for its server's log level: %s", m.Line)
	}
	c.write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + id + `,"reason":"enough"}}`)
	if m := c.modernCall("tools/call", `"name":"a:echo","arguments":{"x":2}`); !strings.Contains(string(m.Result), `{"x":2}`) {
		t.Fatalf("a call after the cancellation: %s", m.Line)
	}
	select {
	case m := <-waiting:
		t.Errorf("the cancelled call was answered: %s", m.Line)
	default:
	}
}

// A subscriptions/listen is in the table from the start: cancelled while its resources are
// being subscribed (a server that does not answer resources/subscribe), it is never
// acknowledged and leaves nothing behind.
func TestModernListenCancelledOpening(t *testing.T) {
	c := serve(t, Options{StartupTimeout: 300 * time.Millisecond}, fx("a", "-full", "-hold", "resources/subscribe"))
	c.write(`{"jsonrpc":"2.0","id":"listen-1","method":"subscriptions/listen","params":{` + meta(modernCaps) +
		`,"notifications":{"toolsListChanged":true,"resourceSubscriptions":["fixture://static/a"]}}}`)
	c.write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"listen-1"}}`)
	c.waitLog("the server refused a resource subscription of the client") // its subscription gave up
	waitFor(t, "the cancelled listen out of the table", func() bool { return c.agg.inflight.pending() == "nothing" })
	c.modernCall("tools/call", `"name":"a:grow"`) // a list change it would have been told of
	c.modernCall("tools/call", `"name":"a:echo","arguments":{"text":"after"}`)
	for {
		select {
		case m := <-c.notes:
			if m.Method == "notifications/subscriptions/acknowledged" || m.Method == "notifications/tools/list_changed" {
				t.Fatalf("the cancelled listen got %s", m.Line)
			}
			continue
		default:
		}
		break
	}
}
