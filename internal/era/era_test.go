package era

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestVersions(t *testing.T) {
	for v, want := range map[string]Era{"2024-11-05": Legacy, "2025-06-18": Legacy, "2025-11-25": Legacy, "2026-07-28": Modern, "2099-01-01": Modern, "": Legacy, "2026-07-28x": Legacy} {
		if got := Of(v); got != want {
			t.Errorf("Of(%q) = %v, want %v", v, got, want)
		}
	}
	if Latest(Legacy) != "2025-11-25" || Latest(Modern) != "2026-07-28" {
		t.Errorf("latest: %s, %s", Latest(Legacy), Latest(Modern))
	}
	if got := append(VersionsOf(Modern), VersionsOf(Legacy)...); !slices.Equal(got, Versions) {
		t.Errorf("the versions of each era, newest first, are not the list: %v", got)
	}
}

const goodMeta = `{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"roots":{}},"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/logLevel":"info"}`

func TestReadEnvelope(t *testing.T) {
	env, errObj := ReadEnvelope(json.RawMessage(goodMeta))
	if errObj != nil || env.Version != "2026-07-28" || env.LogLevel != "info" || string(env.Info) != `{"name":"c","version":"1"}` || string(env.Caps["roots"]) != "{}" {
		t.Fatalf("ReadEnvelope = %+v, %s", env, errObj)
	}
	for meta, want := range map[string]string{
		``:   `"key":"io.modelcontextprotocol/protocolVersion","problem":"missing"`,
		`[]`: `"key":"_meta"`,
		`{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}`:                                                                                                   `"code":-32022`,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`:                                                                                                   `"key":"io.modelcontextprotocol/clientCapabilities","problem":"missing"`,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[]}`:                                                   `"problem":"not an object"`,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"loud"}`:         `"key":"io.modelcontextprotocol/logLevel"`,
		`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"x"}}`: `"key":"io.modelcontextprotocol/clientInfo"`,
	} {
		var raw json.RawMessage
		if meta != "" {
			raw = json.RawMessage(meta)
		}
		_, errObj := ReadEnvelope(raw)
		if !strings.Contains(string(errObj), want) {
			t.Errorf("ReadEnvelope(%s) = %s, want it to contain %s", meta, errObj, want)
		}
	}
}

// An envelope goes into params that have none, and params that carry one pass as they are;
// Unenvelop takes it out again, the rest as written.
func TestEnvelop(t *testing.T) {
	env := BuildEnvelope("2026-07-28", json.RawMessage(`{"roots":{}}`), json.RawMessage(`{"name":"c","version":"1"}`))
	for in, want := range map[string]string{
		``:             `{"_meta":{` + env + `}}`,
		`{"name":"x"}`: `{"_meta":{` + env + `},"name":"x"}`,
		`{"name":"x","_meta":{"progressToken":1}}`: `{"name":"x","_meta":{` + env + `,"progressToken":1}}`,
		`{"_meta":` + goodMeta + `}`:               `{"_meta":` + goodMeta + `}`,
	} {
		if got := string(Envelop(json.RawMessage(in), env)); got != want {
			t.Errorf("Envelop(%s) = %s, want %s", in, got, want)
		}
	}
	got := Unenvelop("tools/call", json.RawMessage(`{"name":"x","_meta":`+strings.TrimSuffix(goodMeta, "}")+`,"progressToken":"p"},"requestState":"s","inputResponses":{}}`))
	if string(got) != `{"name":"x","_meta":{"progressToken":"p"}}` {
		t.Errorf("Unenvelop = %s", got)
	}
	if LogLevelOf(json.RawMessage(`{"_meta":`+goodMeta+`}`)) != "info" {
		t.Error("LogLevelOf")
	}
}

func TestTranslate(t *testing.T) {
	modern := json.RawMessage(`{"resultType":"complete","ttlMs":5,"cacheScope":"public","tools":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}`)
	if r, _ := Translate("tools/list", Modern, Legacy, modern, nil); string(r) != `{"tools":[]}` {
		t.Errorf("modern to legacy: %s", r)
	}
	if r, _ := Translate("tools/list", Modern, Modern, modern, nil); string(r) != string(modern) {
		t.Errorf("modern to modern: %s", r)
	}
	if r, _ := Translate("tools/call", Legacy, Modern, json.RawMessage(`{"content":[]}`), nil); string(r) != `{"resultType":"complete","content":[]}` {
		t.Errorf("legacy to modern: %s", r)
	}
	if r, _ := Translate("resources/read", Legacy, Modern, json.RawMessage(`{"contents":[]}`), nil); string(r) != `{"resultType":"complete","ttlMs":0,"cacheScope":"private","contents":[]}` {
		t.Errorf("legacy read to modern: %s", r)
	}
	if _, e := Translate("resources/read", Legacy, Modern, nil, json.RawMessage(`{"code":-32002,"message":"m"}`)); string(e) != `{"code":-32602,"message":"m"}` {
		t.Errorf("legacy not found to modern: %s", e)
	}
	if r, e := Translate("x", Legacy, Legacy, json.RawMessage(`{"x":1}`), nil); string(r) != `{"x":1}` || e != nil {
		t.Errorf("legacy to legacy: %s %s", r, e)
	}
	if got := List(Modern, json.RawMessage(`{"tools":[]}`), CacheHint{TTLMs: 3, Public: true}); string(got) != `{"resultType":"complete","ttlMs":3,"cacheScope":"public","tools":[]}` {
		t.Errorf("List = %s", got)
	}
	if got := List(Legacy, json.RawMessage(`{"tools":[]}`), CacheHint{TTLMs: 3}); string(got) != `{"tools":[]}` {
		t.Errorf("List, legacy = %s", got)
	}
	tool := json.RawMessage(`{"name":"t","execution":{"taskSupport":"optional"},"inputSchema":{"type":"object"}}`)
	if got, hidden := Tool(Legacy, Modern, tool); hidden != "" || string(got) != `{"name":"t","inputSchema":{"type":"object"}}` {
		t.Errorf("Tool = %s %q", got, hidden)
	}
	if got, _ := Tool(Legacy, Legacy, tool); string(got) != string(tool) {
		t.Errorf("Tool, legacy = %s", got)
	}
	if _, hidden := Tool(Legacy, Modern, json.RawMessage(`{"name":"t","execution":{"taskSupport":"required"}}`)); hidden == "" {
		t.Error("a tool that runs only as a legacy task was given to a modern client")
	}
	h := PageHint(map[string]json.RawMessage{"ttlMs": json.RawMessage("200"), "cacheScope": json.RawMessage(`"public"`)}).Merge(PageHint(nil))
	if h != (CacheHint{}) {
		t.Errorf("merged hint = %+v, want the smallest ttl and private", h)
	}
}

func TestInputRequired(t *testing.T) {
	got := InputRequired(map[string]InputRequest{"b": {Method: "roots/list"}, "a": {Method: "elicitation/create", Params: json.RawMessage(`{"message": "x <y>"}`)}}, "st")
	want := `{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{"message": "x <y>"}},"b":{"method":"roots/list"}},"requestState":"st"}`
	if string(got) != want {
		t.Errorf("InputRequired = %s\nwant %s", got, want)
	}
	reqs, state, err := ReadInputRequired(got)
	if err != nil || len(reqs) != 2 || *state != "st" {
		t.Errorf("ReadInputRequired: %v %v %v", reqs, state, err)
	}
	state2 := "s2"
	retry := RetryParams(json.RawMessage(`{"name":"t","inputResponses":{"old":1},"requestState":"old"}`), map[string]json.RawMessage{"a": json.RawMessage(`{}`)}, &state2)
	if string(retry) != `{"inputResponses":{"a":{}},"name":"t","requestState":"s2"}` {
		t.Errorf("RetryParams = %s", retry)
	}
	env, _ := ReadEnvelope(json.RawMessage(goodMeta))
	if MissingCapability(env, "roots/list", nil) != nil {
		t.Error("roots are declared")
	}
	if e := MissingCapability(env, "elicitation/create", nil); !strings.Contains(string(e), `"code":-32021`) || !strings.Contains(string(e), `{"elicitation":{}}`) {
		t.Errorf("MissingCapability = %s", e)
	}
	els := URLElicitations(json.RawMessage(`{"code":-32042,"message":"m","data":{"elicitations":[{"mode":"url","url":"https://x","elicitationId":"e","message":"go"}]}}`))
	if len(els) != 1 || strings.Contains(string(els[0]), "elicitationId") {
		t.Errorf("URLElicitations = %s", els)
	}
}

func TestState(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Now()
	st := State{ID: "x", Method: "tools/call", Digest: ParamsDigest("tools/call", json.RawMessage(`{"name":"a","arguments":{"b":1,"a":2}}`)), Expires: now.Add(time.Minute).UnixMilli()}
	minted := Mint(key, st)
	if !Ours(minted) {
		t.Fatal("not ours")
	}
	if got, err := Verify(key, minted, now); err != nil || got != st {
		t.Fatalf("Verify = %+v, %v", got, err)
	}
	if _, err := Verify(key, minted, now.Add(2*time.Minute)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("an expired state: %v", err)
	}
	if _, err := Verify([]byte("another key, another process....."), minted, now); err == nil {
		t.Error("a state of another key verified")
	}
	if ParamsDigest("tools/call", json.RawMessage(`{"arguments":{"a":2,"b":1},"name":"a","_meta":{"x":1}}`)) != st.Digest {
		t.Error("the digest depends on the encoding or on _meta")
	}
}

func TestFilter(t *testing.T) {
	f, ok := ReadFilter(json.RawMessage(`{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["file:///a/"]}}`))
	if !ok || !f.Wants("notifications/tools/list_changed") || f.Wants("notifications/prompts/list_changed") {
		t.Fatalf("ReadFilter = %+v %v", f, ok)
	}
	if !f.Covers("file:///a/b") || f.Covers("file:///ab") {
		t.Error("Covers")
	}
	id, rest, ok := Untag(json.RawMessage(`{"uri":"u","_meta":{"io.modelcontextprotocol/subscriptionId":"agg-3"}}`))
	if !ok || string(id) != `"agg-3"` || string(rest) != `{"uri":"u"}` {
		t.Errorf("Untag = %s %s %v", id, rest, ok)
	}
	if got := Tagged(json.RawMessage(`{"uri":"u"}`), Tag(json.RawMessage(`7`))); string(got) != `{"_meta":{"io.modelcontextprotocol/subscriptionId":7},"uri":"u"}` {
		t.Errorf("Tagged = %s", got)
	}
	lf := ListenFilter(map[string]json.RawMessage{"tools": json.RawMessage(`{"listChanged":true}`), "prompts": json.RawMessage(`{}`)}, []string{"u"})
	if string(ListenParams(lf)) != `{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["u"]}}` {
		t.Errorf("ListenParams = %s", ListenParams(lf))
	}
}

func TestProbe(t *testing.T) {
	d, why := ReadDiscover(json.RawMessage(`{"supportedVersions":["2025-11-25","2026-07-28"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}`))
	if why != "" || d.Version != "2026-07-28" || d.Name != "s" {
		t.Errorf("ReadDiscover = %+v %q", d, why)
	}
	if _, why := ReadDiscover(json.RawMessage(`{"supportedVersions":["2025-11-25"]}`)); why == "" {
		t.Error("a DiscoverResult without a modern version made the server modern")
	}
	for data, want := range map[string]string{
		`{"supported":["2026-07-28"]}`: "retry", `{"supported":["2025-11-25"]}`: "legacy", `{"supported":["2099-01-01"]}`: "fail", ``: "legacy",
	} {
		retry, fail := ProbeError(&jsonrpc.Error{Code: CodeUnsupportedVersion, Data: json.RawMessage(data)})
		got := "legacy"
		if retry != "" {
			got = "retry"
		} else if fail != nil {
			got = "fail"
		}
		if got != want {
			t.Errorf("ProbeError(%s) = %s, want %s", data, got, want)
		}
	}
	if retry, fail := ProbeError(&jsonrpc.Error{Code: -32601}); retry != "" || fail != nil {
		t.Error("Method not found is legacy")
	}
}

// LogLevel names each rank LogRank gives, and nothing else.
func TestLogLevel(t *testing.T) {
	for _, l := range []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"} {
		if got := LogLevel(LogRank(l)); got != l {
			t.Errorf("LogLevel(LogRank(%q)) = %q", l, got)
		}
	}
	for _, rank := range []int{0, -1, 9} {
		if got := LogLevel(rank); got != "" {
			t.Errorf("LogLevel(%d) = %q, want none", rank, got)
		}
	}
}

// TaskID finds the task a tools/call result created, in either shape, and none elsewhere.
func TestTaskID(t *testing.T) {
	for result, want := range map[string]string{
		`{"task":{"taskId":"t1","status":"working"}}`: "t1", // 2025-11-25 CreateTaskResult
		`{"resultType":"task","taskId":"t2"}`:         "t2", // the tasks extension's, flat
		`{"content":[],"taskId":"not-a-task"}`:        "",
		`{"resultType":"complete","content":[]}`:      "",
		`{"taskId":"t3","resultType":"t\u0061sk"}`:    "t3",
		`{"task":{"status":"working"},"taskId":"t4"}`: "",
	} {
		if got := TaskID(json.RawMessage(result)); got != want {
			t.Errorf("TaskID(%s) = %q, want %q", result, got, want)
		}
	}
}

// Batches are of the versions before 2025-06-18, which removed them.
func TestBatches(t *testing.T) {
	for v, want := range map[string]bool{"2024-11-05": true, "2025-03-26": true, "2025-06-18": false, "2025-11-25": false, "2026-07-28": false} {
		if got := Batches(v); got != want {
			t.Errorf("Batches(%s) = %v, want %v", v, got, want)
		}
	}
}
