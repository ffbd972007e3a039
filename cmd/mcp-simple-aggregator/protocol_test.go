package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The rest of the protocol (issue 4): prompts, resources, templates, completions, logging,
// subscriptions, progress, reverse requests and health, each compared with a direct
// connection to the same fixture where the child answers.

const twoFull = `{"mcpServers": {
	"alpha": {"command": "$FIXTURE", "args": ["-full", "-scheme", "alpha", "-page", "1"]},
	"beta": {"command": "$FIXTURE", "args": ["-full", "-scheme", "beta", "-page", "1"]},
	"plain": {"command": "$FIXTURE"}
}}`

// items returns the raw entries of member field of a list answer.
func items(t *testing.T, m message, field string) []json.RawMessage {
	t.Helper()
	if m.Error != nil {
		t.Fatalf("list answered with an error: %s", m.Line)
	}
	var page map[string]json.RawMessage
	var out []json.RawMessage
	if err := json.Unmarshal(m.Result, &page); err != nil {
		t.Fatalf("list answer %s: %v", m.Line, err)
	}
	if err := json.Unmarshal(page[field], &out); err != nil {
		t.Fatalf("list answer %s: %v", m.Line, err)
	}
	if _, more := page["nextCursor"]; more {
		t.Errorf("the aggregated list has a nextCursor: %s", m.Line)
	}
	return out
}

// listDirect reads every page of a list from a direct connection.
func listDirect(t *testing.T, p *peer, method, field string) []json.RawMessage {
	t.Helper()
	var all []json.RawMessage
	cursor := ""
	for {
		params := ""
		if cursor != "" {
			params = `{"cursor":` + jsonString(cursor) + `}`
		}
		m := p.call(method, params)
		var page struct {
			NextCursor string `json:"nextCursor"`
		}
		json.Unmarshal(m.Result, &page)
		var list map[string]json.RawMessage
		var defs []json.RawMessage
		json.Unmarshal(m.Result, &list)
		json.Unmarshal(list[field], &defs)
		all = append(all, defs...)
		if page.NextCursor == "" {
			return all
		}
		cursor = page.NextCursor
	}
}

// renamed is def with its name replaced, as the aggregator exposes it.
func renamed(def json.RawMessage, key string) []byte {
	var d struct {
		Name string `json:"name"`
	}
	json.Unmarshal(def, &d)
	old, _ := json.Marshal(d.Name)
	exposed, _ := json.Marshal(key + ":" + d.Name)
	return bytes.Replace(def, append([]byte(`"name":`), old...), append([]byte(`"name":`), exposed...), 1)
}

func sameAnswer(t *testing.T, what string, agg, direct message) {
	t.Helper()
	if !bytes.Equal(agg.Result, direct.Result) || !bytes.Equal(agg.Error, direct.Error) {
		t.Errorf("%s differs from a direct connection:\naggregated %s\n    direct %s", what, agg.Line, direct.Line)
	}
}

// nextNote returns the next notification or request from the aggregator.
func nextNote(t *testing.T, p *peer, what string) message {
	t.Helper()
	select {
	case m := <-p.notes:
		return m
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
		return message{}
	}
}

func TestPromptsResourcesCompletionsMatchDirect(t *testing.T) {
	agg := startAggregator(t, twoFull)
	init := agg.initialize("test")
	var res struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	json.Unmarshal(init.Result, &res)
	wantCaps := map[string]string{
		"tools": `{"listChanged":true}`, "prompts": `{"listChanged":true}`, "resources": `{"listChanged":true,"subscribe":true}`,
		"completions": `{}`, "logging": `{}`,
	}
	for k, want := range wantCaps {
		if got := string(res.Capabilities[k]); got != want {
			t.Errorf("capability %s = %s, want %s (the union of the children's)", k, got, want)
		}
	}

	aggPrompts := items(t, agg.call("prompts/list", `{}`), "prompts")
	aggResources := items(t, agg.call("resources/list", ""), "resources")
	aggTemplates := items(t, agg.call("resources/templates/list", `{}`), "resourceTemplates")
	var wantPrompts, wantResources, wantTemplates [][]byte
	for _, key := range []string{"alpha", "beta"} {
		direct := startPeer(t, fixtureBin, "-full", "-scheme", key, "-page", "1")
		direct.initialize("test")
		// Every page of each child is read (the fixtures give one entry per page).
		for _, def := range listDirect(t, direct, "prompts/list", "prompts") {
			wantPrompts = append(wantPrompts, renamed(def, key))
		}
		for _, def := range listDirect(t, direct, "resources/list", "resources") {
			wantResources = append(wantResources, def)
		}
		for _, def := range listDirect(t, direct, "resources/templates/list", "resourceTemplates") {
			wantTemplates = append(wantTemplates, def)
		}

		for _, tc := range []struct{ method, params, exposed string }{
			{"prompts/get", `{"name":"greet","arguments":{"who":"Ada"}}`, `{"name":"` + key + `:greet","arguments":{"who":"Ada"}}`},
			{"prompts/get", `{"name":"odd_prompt"}`, `{"name":"` + key + `:odd_prompt"}`},
			{"resources/read", `{"uri":"` + key + `://static/a"}`, ""},                    // listed
			{"resources/read", `{"uri":"` + key + `://static/b"}`, ""},                    // listed, blob
			{"resources/read", `{"uri":"` + key + `://items/42"}`, ""},                    // matches the template
			{"resources/read", `{"uri":"` + key + `://elsewhere/x","_meta":{"k":1}}`, ""}, // only this child uses the scheme
			{"resources/read", `{"uri":"` + key + `://missing"}`, ""},                     // the child's own error
			{"completion/complete", `{"ref":{"type":"ref/prompt","name":"greet"},"argument":{"name":"who","value":"al"}}`,
				`{"ref":{"type":"ref/prompt","name":"` + key + `:greet"},"argument":{"name":"who","value":"al"}}`},
			{"completion/complete", `{"ref":{"type":"ref/resource","uri":"` + key + `://items/{id}"},"argument":{"name":"id","value":"1"}}`, ""},
		} {
			exposed := tc.exposed
			if exposed == "" {
				exposed = tc.params
			}
			sameAnswer(t, tc.method+" "+tc.params, agg.call(tc.method, exposed), direct.call(tc.method, tc.params))
		}
		// A prompt the child does not have: the child's error for a name it knows, the
		// aggregator's for a name no child has.
		if m := agg.call("prompts/get", `{"name":"`+key+`:nope"}`); !strings.Contains(string(m.Error), "Unknown prompt") {
			t.Errorf("an unknown prompt answered %s", m.Line)
		}
	}
	for _, c := range []struct {
		what      string
		got       []json.RawMessage
		want      [][]byte
		wantCount int
	}{{"prompts", aggPrompts, wantPrompts, 4}, {"resources", aggResources, wantResources, 4}, {"templates", aggTemplates, wantTemplates, 2}} {
		if len(c.got) != c.wantCount || len(c.want) != c.wantCount {
			t.Errorf("%s: aggregated %d, direct %d, want %d of each", c.what, len(c.got), len(c.want), c.wantCount)
			continue
		}
		for i := range c.got {
			if !bytes.Equal(c.got[i], c.want[i]) {
				t.Errorf("%s #%d:\n got %s\nwant %s", c.what, i, c.got[i], c.want[i])
			}
		}
	}

	// URIs no server can own, and refs to nothing.
	for _, tc := range []struct{ method, params, want string }{
		{"resources/read", `{"uri":"gamma://x"}`, `"code":-32002`},
		{"resources/read", `{"uri":"gamma://x"}`, `"data":{"uri":"gamma://x"}`},
		{"resources/read", `{}`, `"code":-32602`},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"plain:greet"},"argument":{"name":"a","value":""}}`, "Unknown prompt"},
		{"completion/complete", `{"ref":{"type":"ref/other"},"argument":{"name":"a","value":""}}`, `"code":-32602`},
		{"prompts/list", `{"cursor":"x"}`, "invalid cursor"},
	} {
		if m := agg.call(tc.method, tc.params); !strings.Contains(string(m.Error), tc.want) {
			t.Errorf("%s %s answered %s, want an error with %s", tc.method, tc.params, m.Line, tc.want)
		}
	}
}

// Servers that offer only tools: tools, prompts, resources and logging are offered all the same,
// with list changes (a reload may add servers that serve them: a client is told only of changes
// to what it was offered at initialize); the lists are empty and logging/setLevel is answered.
func TestCapabilitiesOfToolsOnlyServers(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {"plain": {"command": "$FIXTURE"}}}`)
	init := agg.initialize("test")
	var res struct {
		Capabilities json.RawMessage `json:"capabilities"`
	}
	json.Unmarshal(init.Result, &res)
	if want := `{"logging":{},"prompts":{"listChanged":true},"resources":{"listChanged":true},"tools":{"listChanged":true}}`; string(res.Capabilities) != want {
		t.Errorf("capabilities = %s, want %s", res.Capabilities, want)
	}
	for method, want := range map[string]string{"prompts/list": `{"prompts":[]}`, "resources/list": `{"resources":[]}`, "resources/templates/list": `{"resourceTemplates":[]}`, "logging/setLevel": `{}`} {
		if m := agg.call(method, `{"level":"info"}`); string(m.Result) != want {
			t.Errorf("%s answered %s, want %s", method, m.Line, want)
		}
	}
}

// Subscriptions go to the owner of the URI; its updates reach the client as the child sent
// them; unsubscribe goes to the owner too.
func TestSubscriptions(t *testing.T) {
	agg := startAggregator(t, twoFull)
	agg.initialize("test")
	uri := "beta://static/a"
	if m := agg.call("resources/subscribe", `{"uri":"`+uri+`"}`); m.Error != nil || string(m.Result) != `{}` {
		t.Fatalf("subscribe: %s", m.Line)
	}
	m := agg.call("tools/call", `{"name":"beta:touch","arguments":{"uri":"`+uri+`"}}`)
	if !strings.Contains(string(m.Result), `"subscribed":true`) {
		t.Fatalf("the subscription did not reach beta: %s", m.Line)
	}
	n := nextNote(t, agg, "resources/updated")
	if want := `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"beta://static/a","_meta":{"b":1,"a":2}}}`; string(n.Line) != want {
		t.Errorf("update:\n got %s\nwant %s", n.Line, want)
	}
	if m := agg.call("resources/unsubscribe", `{"uri":"`+uri+`"}`); m.Error != nil {
		t.Fatalf("unsubscribe: %s", m.Line)
	}
	if m := agg.call("tools/call", `{"name":"beta:touch","arguments":{"uri":"`+uri+`"}}`); !strings.Contains(string(m.Result), `"subscribed":false`) {
		t.Errorf("the unsubscription did not reach beta: %s", m.Line)
	}
	// alpha was never asked.
	if m := agg.call("tools/call", `{"name":"alpha:touch","arguments":{"uri":"`+uri+`"}}`); !strings.Contains(string(m.Result), `"subscribed":false`) {
		t.Errorf("alpha got beta's subscription: %s", m.Line)
	}
}

// logging/setLevel reaches every server with logging; their messages reach the client, with
// the server's key as the logger when the child gave none.
func TestLogging(t *testing.T) {
	agg := startAggregator(t, twoFull)
	agg.initialize("test")
	if m := agg.call("logging/setLevel", `{"level":"error"}`); m.Error != nil || string(m.Result) != `{}` {
		t.Fatalf("setLevel: %s", m.Line)
	}
	if m := agg.call("logging/setLevel", `{"level":"loud"}`); !strings.Contains(string(m.Error), "unknown level") {
		t.Errorf("a level every server refuses answered %s, want the servers' error", m.Line)
	}
	for _, key := range []string{"alpha", "beta"} {
		if m := agg.call("tools/call", `{"name":"`+key+`:log","arguments":{}}`); m.Error != nil {
			t.Fatalf("log: %s", m.Line)
		}
		// error (4, no logger), critical (5), alert (6, no logger), emergency (7).
		want := []string{
			`{"jsonrpc":"2.0","method":"notifications/message","params":{"logger":"` + key + `","level":"error","data":{"n":4,"big":12345678901234567890123}}}`,
			`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"critical","logger":"fixture-logger","data":"line 5"}}`,
			`{"jsonrpc":"2.0","method":"notifications/message","params":{"logger":"` + key + `","level":"alert","data":{"n":6,"big":12345678901234567890123}}}`,
			`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"emergency","logger":"fixture-logger","data":"line 7"}}`,
		}
		for i, w := range want {
			if n := nextNote(t, agg, "log message"); string(n.Line) != w {
				t.Errorf("%s message %d:\n got %s\nwant %s", key, i, n.Line, w)
			}
		}
	}
}

// A progress token on any request reaches the child, and its progress comes back with the
// client's token, strings and numbers alike; a child cannot send progress for a token it was
// not given.
func TestProgressOnEveryRequest(t *testing.T) {
	agg := startAggregator(t, twoFull)
	agg.initialize("test")
	for _, tc := range []struct{ method, params string }{
		{"prompts/get", `{"name":"alpha:greet","arguments":{"who":"x"},"_meta":{"progressToken":"p-1"}}`},
		{"resources/read", `{"uri":"beta://static/a","_meta":{"progressToken":7}}`},
		{"completion/complete", `{"ref":{"type":"ref/prompt","name":"beta:greet"},"argument":{"name":"who","value":""},"_meta":{"progressToken":1.0}}`},
	} {
		ch := agg.send(tc.method, tc.params)
		n := nextNote(t, agg, "progress")
		var meta struct {
			Meta struct {
				Token json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		}
		json.Unmarshal([]byte(tc.params), &meta)
		want := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":1,"message":"working on %s"}}`, meta.Meta.Token, tc.method)
		if string(n.Line) != want {
			t.Errorf("progress of %s:\n got %s\nwant %s", tc.method, n.Line, want)
		}
		if m := agg.wait(ch, tc.method); m.Error != nil {
			t.Errorf("%s: %s", tc.method, m.Line)
		}
	}
}

// The lists follow the children: a changed prompt or resource list is re-read and the client
// told; a crash with restarts off takes the server's prompts and resources away too.
func TestPromptAndResourceListChanges(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {
		"alpha": {"command": "$FIXTURE", "args": ["-full", "-scheme", "alpha"]},
		"beta": {"command": "$FIXTURE", "args": ["-full", "-scheme", "beta"]}
	}}`, "--max-restarts", "0")
	agg.initialize("test")
	agg.call("tools/call", `{"name":"alpha:grow_prompt","arguments":{}}`)
	if !agg.note("notifications/prompts/list_changed", 5*time.Second) {
		t.Fatal("no prompts/list_changed")
	}
	if list := agg.call("prompts/list", ""); !strings.Contains(string(list.Result), `"alpha:grown_prompt_1"`) {
		t.Errorf("the new prompt is not listed: %s", list.Line)
	}
	agg.call("tools/call", `{"name":"beta:grow_resource","arguments":{}}`)
	if !agg.note("notifications/resources/list_changed", 5*time.Second) {
		t.Fatal("no resources/list_changed")
	}
	if list := agg.call("resources/list", ""); !strings.Contains(string(list.Result), `"beta://grown/1"`) {
		t.Errorf("the new resource is not listed: %s", list.Line)
	}

	agg.send("tools/call", `{"name":"beta:crash","arguments":{}}`)
	for _, method := range []string{"notifications/tools/list_changed", "notifications/prompts/list_changed", "notifications/resources/list_changed"} {
		if !agg.note(method, 5*time.Second) {
			t.Errorf("no %s after the crash", method)
		}
	}
	for _, method := range []string{"prompts/list", "resources/list", "resources/templates/list"} {
		list := agg.call(method, "")
		if strings.Contains(string(list.Result), "beta") {
			t.Errorf("%s still has the crashed server's entries: %s", method, list.Line)
		}
		if !strings.Contains(string(list.Result), "alpha") {
			t.Errorf("%s lost the other server's entries: %s", method, list.Line)
		}
	}
	if m := agg.call("resources/read", `{"uri":"beta://static/a"}`); !strings.Contains(string(m.Error), `-32002`) {
		t.Errorf("reading a resource of the crashed server answered %s", m.Line)
	}
	if m := agg.call("resources/read", `{"uri":"alpha://static/a"}`); m.Error != nil {
		t.Errorf("the other server stopped serving: %s", m.Line)
	}
}

// Two servers that list the same URI or template: a warning names both at start-up, and the
// server whose key sorts first serves it. A URI of the shared scheme that neither lists has
// no clear owner.
func TestResourceCollisions(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {
		"zed": {"command": "$FIXTURE", "args": ["-full", "-label", " from zed"]},
		"abe": {"command": "$FIXTURE", "args": ["-full", "-label", " from abe"]}
	}}`)
	agg.initialize("test")
	for _, uri := range []string{"fixture://static/a", "fixture://items/7"} {
		if m := agg.call("resources/read", `{"uri":"`+uri+`"}`); !strings.Contains(string(m.Result), "from abe") {
			t.Errorf("%s was not served by abe, whose key sorts first: %s", uri, m.Line)
		}
	}
	if list := items(t, agg.call("resources/list", ""), "resources"); len(list) != 2 {
		t.Errorf("the list has %d resources, want the 2 of abe: %s", len(list), list)
	}
	if m := agg.call("resources/read", `{"uri":"fixture://elsewhere"}`); !strings.Contains(string(m.Error), `several servers use URIs of its scheme (\"abe\", \"zed\")`) {
		t.Errorf("an unlisted URI of a shared scheme answered %s", m.Line)
	}
	stderr := agg.stderr.String()
	for _, want := range []string{
		`warning: the resource "fixture://static/a" is listed by servers "abe" and "zed"; "abe" serves it`,
		`warning: the resource template "fixture://items/{id}" is listed by servers "abe" and "zed"; "abe" serves it`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// The protocol versions a client may speak: each is negotiated, and the session works.
func TestClientProtocolVersions(t *testing.T) {
	for _, version := range []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			agg := startAggregator(t, twoFull)
			m := agg.call("initialize", `{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"v","version":"1"}}`)
			if !strings.Contains(string(m.Result), `"protocolVersion":"`+version+`"`) {
				t.Fatalf("initialize with %s answered %s", version, m.Line)
			}
			agg.writeLine(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			if m := agg.call("tools/call", `{"name":"alpha:echo","arguments":{"v":1}}`); !strings.Contains(string(m.Result), `"structuredContent":{"v":1}`) {
				t.Errorf("tools/call: %s", m.Line)
			}
			if m := agg.call("prompts/get", `{"name":"beta:greet","arguments":{"who":"v"}}`); m.Error != nil {
				t.Errorf("prompts/get: %s", m.Line)
			}
			if m := agg.call("ping", ""); string(m.Result) != `{}` {
				t.Errorf("ping: %s", m.Line)
			}
		})
	}
}

// A child's sampling, elicitation and roots requests go to the client, and the client's
// answer (or error) goes back to that child unchanged; a child's cancellation reaches the
// client; the client's roots/list_changed reaches every child.
func TestReverseRequests(t *testing.T) {
	agg := startAggregator(t, twoFull)
	m := agg.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{"sampling":{},"elicitation":{"form":{}},"roots":{"listChanged":true}},"clientInfo":{"name":"full","version":"1"}}`)
	if m.Error != nil {
		t.Fatal(m.Line)
	}
	agg.writeLine(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	for _, tc := range []struct{ method, params, answer, want string }{
		{"sampling/createMessage", `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":10,"x":[1.50]}`,
			`"result":{"role":"assistant","content":{"type":"text","text":"hello"},"model":"m","big":12345678901234567890123}`,
			`{"result":{"role":"assistant","content":{"type":"text","text":"hello"},"model":"m","big":12345678901234567890123}}`},
		{"elicitation/create", `{"message":"name?","requestedSchema":{"type":"object"}}`,
			`"error":{"code":-1,"message":"user declined","data":{"z":1,"a":2}}`,
			`{"error":{"code":-1,"message":"user declined","data":{"z":1,"a":2}}}`},
		{"roots/list", ``, `"result":{"roots":[{"uri":"file:///tmp","name":"tmp"}]}`, `{"result":{"roots":[{"uri":"file:///tmp","name":"tmp"}]}}`},
	} {
		args := `{"method":"` + tc.method + `"`
		if tc.params != "" {
			args += `,"params":` + tc.params
		}
		ch := agg.send("tools/call", `{"name":"beta:ask","arguments":`+args+`}}`)
		req := nextNote(t, agg, tc.method)
		var r struct {
			ID     json.RawMessage `json:"id"`
			Params json.RawMessage `json:"params"`
		}
		json.Unmarshal(req.Line, &r)
		if req.Method != tc.method || string(r.Params) != tc.params || len(r.ID) == 0 {
			t.Errorf("the client got %s, want %s with params %s", req.Line, tc.method, tc.params)
		}
		agg.writeLine(`{"jsonrpc":"2.0","id":` + string(r.ID) + `,` + tc.answer + `}`)
		m := agg.wait(ch, tc.method)
		var res struct {
			Structured json.RawMessage `json:"structuredContent"`
		}
		json.Unmarshal(m.Result, &res)
		if string(res.Structured) != tc.want {
			t.Errorf("the child got %s, want %s", res.Structured, tc.want)
		}
	}

	// The child cancels its request: the client is told, with the ID it saw.
	ch := agg.send("tools/call", `{"name":"alpha:ask","arguments":{"method":"sampling/createMessage","params":{"maxTokens":1},"cancel_after_ms":50}}`)
	req := nextNote(t, agg, "sampling request")
	var r struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal(req.Line, &r)
	cancel := nextNote(t, agg, "cancellation")
	if want := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + string(r.ID) + `,"reason":"changed my mind"}}`; string(cancel.Line) != want {
		t.Errorf("cancellation:\n got %s\nwant %s", cancel.Line, want)
	}
	agg.wait(ch, "ask")
	// A late answer to the cancelled request goes nowhere and breaks nothing.
	agg.writeLine(`{"jsonrpc":"2.0","id":` + string(r.ID) + `,"result":{}}`)

	agg.writeLine(`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}`)
	for _, key := range []string{"alpha", "beta", "plain"} {
		if key == "plain" {
			continue // no notes tool
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			m := agg.call("tools/call", `{"name":"`+key+`:notes","arguments":{}}`)
			if strings.Contains(string(m.Result), "notifications/roots/list_changed") {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s never got roots/list_changed: %s", key, m.Line)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// A client that did not declare sampling, elicitation or roots: the child's request gets a
// JSON-RPC error that says so, and the client never sees it.
func TestReverseRequestsClientCannot(t *testing.T) {
	agg := startAggregator(t, twoFull)
	agg.initialize("bare")
	for _, method := range []string{"sampling/createMessage", "elicitation/create", "roots/list"} {
		m := agg.call("tools/call", `{"name":"alpha:ask","arguments":{"method":"`+method+`","params":{}}}`)
		if !strings.Contains(string(m.Result), `"code":-32601`) || !strings.Contains(string(m.Result), "does not support "+method) {
			t.Errorf("%s for a client without the capability: %s", method, m.Line)
		}
	}
	select {
	case n := <-agg.notes:
		t.Errorf("the client got %s", n.Line)
	default:
	}
}

// A child that asks for roots as soon as it is initialized (as filesystem servers do) gets
// its answer once the client has connected and said it is initialized.
func TestReverseRequestBeforeClient(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {"fs": {"command": "$FIXTURE", "args": ["-full", "-roots-at-start"]}}}`)
	agg.call("initialize", `{"protocolVersion":"2025-06-18","capabilities":{"roots":{}},"clientInfo":{"name":"r","version":"1"}}`)
	agg.writeLine(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	req := nextNote(t, agg, "roots/list")
	if req.Method != "roots/list" {
		t.Fatalf("the client got %s, want roots/list", req.Line)
	}
	var r struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal(req.Line, &r)
	agg.writeLine(`{"jsonrpc":"2.0","id":` + string(r.ID) + `,"result":{"roots":[{"uri":"file:///w"}]}}`)
	if m := agg.call("tools/call", `{"name":"fs:roots","arguments":{}}`); !strings.Contains(string(m.Result), `{"result":{"roots":[{"uri":"file:///w"}]}}`) {
		t.Errorf("the child got %s", m.Line)
	}
}

// Two children ask the client something with the same progress token at once: the second
// request reaches the client with a token of the aggregator's, and the client's progress for
// each token reaches the child that asked, with the child's own token.
func TestReverseProgressTokens(t *testing.T) {
	agg := startAggregator(t, twoFull)
	agg.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{"sampling":{}},"clientInfo":{"name":"p","version":"1"}}`)
	agg.writeLine(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	const params = `{"_meta":{"progressToken":7,"k":"v"},"maxTokens":1}`
	type asked struct {
		answered <-chan message
		id       string
		token    json.RawMessage
	}
	ask := func(key string) asked {
		ch := agg.send("tools/call", `{"name":"`+key+`:ask","arguments":{"method":"sampling/createMessage","params":`+params+`}}`)
		req := nextNote(t, agg, key+"'s sampling request")
		var r struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Meta struct {
					Token json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
			Raw struct {
				Params json.RawMessage `json:"params"`
			}
		}
		json.Unmarshal(req.Line, &r)
		json.Unmarshal(req.Line, &r.Raw)
		// Apart from the token, the params are the child's, byte for byte.
		if got := strings.Replace(string(r.Raw.Params), string(r.Params.Meta.Token), "7", 1); got != params {
			t.Errorf("%s: the client got params %s, want %s with only the token changed", key, r.Raw.Params, params)
		}
		return asked{ch, string(r.ID), r.Params.Meta.Token}
	}
	alpha := ask("alpha")
	beta := ask("beta")
	if string(alpha.token) != "7" {
		t.Errorf("the first request's token reached the client as %s, want 7 unchanged", alpha.token)
	}
	if string(beta.token) == "7" || len(beta.token) == 0 {
		t.Fatalf("both requests reached the client with the token %s: its progress could not be told apart", beta.token)
	}
	for _, x := range []struct {
		asked
		msg string
	}{{beta, "for beta"}, {alpha, "for alpha"}} {
		agg.writeLine(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":` + string(x.token) + `,"progress":1,"message":"` + x.msg + `"}}`)
		agg.writeLine(`{"jsonrpc":"2.0","id":` + x.id + `,"result":{"model":"m"}}`)
		agg.wait(x.answered, x.msg)
	}
	for _, key := range []string{"alpha", "beta"} {
		m := agg.call("tools/call", `{"name":"`+key+`:notes","arguments":{}}`)
		var res struct {
			Structured struct {
				Notes []string `json:"notes"`
			} `json:"structuredContent"`
		}
		json.Unmarshal(m.Result, &res)
		want := `notifications/progress {"progressToken":7,"progress":1,"message":"for ` + key + `"}`
		var progress []string
		for _, n := range res.Structured.Notes {
			if strings.HasPrefix(n, "notifications/progress") {
				progress = append(progress, n)
			}
		}
		if len(progress) != 1 || progress[0] != want {
			t.Errorf("%s got the progress notifications %q, want only %q", key, progress, want)
		}
	}
}

// A child that logs as soon as it is initialized (at the aggregator's start, before any client
// connected): the messages reach the client once it is initialized, in order, as they would
// reach a client connected to the child directly.
func TestLogsBeforeClient(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {"early": {"command": "$FIXTURE", "args": ["-full", "-log-at-start", "3"]}}}`)
	// The fixture logs on notifications/initialized, before it answers tools/list, and the
	// aggregator answers initialize only once every child has been listed.
	agg.initialize("late")
	for i := range 3 {
		m := nextNote(t, agg, "a log message from before the client")
		want := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/message","params":{"logger":"early","level":"notice","data":"started %d"}}`, i)
		if string(m.Line) != want {
			t.Fatalf("message %d:\n got %s\nwant %s", i, m.Line, want)
		}
	}
}

// A client speaking 2025-03-26 may send JSON-RPC batches ("MUST support receiving" them): the
// answers come back as one array, in the order of the requests, each as it would be alone.
// From 2025-06-18 on, batches are not part of the protocol: one Invalid Request error.
func TestBatches(t *testing.T) {
	agg := startAggregator(t, twoFull)
	agg.call("initialize", `{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"batcher","version":"1"}}`)
	agg.writeLine(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	echo := `{"name":"alpha:echo","arguments":{"text":"in a batch","n":1.50}}`
	alone := []string{
		string(agg.call("tools/call", echo).Result),
		`{}`,
		string(agg.call("prompts/list", `{}`).Result),
	}
	agg.writeLine(`[{"jsonrpc":"2.0","id":"b1","method":"tools/call","params":` + echo + `},` +
		`{"jsonrpc":"2.0","id":"b2","method":"ping"},` +
		`{"jsonrpc":"2.0","method":"notifications/roots/list_changed"},` +
		`{"jsonrpc":"2.0","id":"b3","method":"prompts/list","params":{}}]`)
	answer := nextNote(t, agg, "the batch's answer")
	var got []message
	if err := json.Unmarshal(answer.Line, &got); err != nil {
		t.Fatalf("the batch's answer %s: %v", answer.Line, err)
	}
	if len(got) != 3 {
		t.Fatalf("the batch's answer has %d responses, want 3: %s", len(got), answer.Line)
	}
	for i, m := range got {
		if want := fmt.Sprintf(`"b%d"`, i+1); string(m.ID) != want || string(m.Result) != alone[i] {
			t.Errorf("response %d: id %s, result %s; want id %s, result %s", i, m.ID, m.Result, want, alone[i])
		}
	}

	agg = startAggregator(t, twoFull)
	agg.initialize("too new") // 2025-06-18
	agg.writeLine(`[{"jsonrpc":"2.0","id":"b1","method":"ping"}]`)
	m := nextNote(t, agg, "the error for a batch")
	if want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: JSON-RPC batches are not part of protocol version 2025-06-18 (they were removed in 2025-06-18)"}}`; string(m.Line) != want {
		t.Errorf("a batch in 2025-06-18:\n got %s\nwant %s", m.Line, want)
	}
	if m := agg.call("ping", ""); m.Error != nil {
		t.Errorf("after the batch, ping failed: %s", m.Line)
	}
}

// The children are told the client does URL elicitation; a client that declared only forms
// never sees a URL request: the child gets an error that says why. Form requests pass.
func TestURLElicitationClientFormOnly(t *testing.T) {
	agg := startAggregator(t, twoFull)
	agg.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"forms","version":"1"}}`)
	agg.writeLine(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	m := agg.call("tools/call", `{"name":"alpha:ask","arguments":{"method":"elicitation/create","params":{"mode":"url","message":"log in","url":"https://example.com/login","elicitationId":"e1"}}}`)
	if want := `"error":{"code":-32602,"message":"Invalid params: the client (forms) does not support URL elicitation (its \"elicitation\" capability has no \"url\"); the request came through mcp-simple-aggregator"}`; !strings.Contains(string(m.Result), want) {
		t.Errorf("URL elicitation for a form-only client: the child got %s, want %s", m.Result, want)
	}
	select {
	case n := <-agg.notes:
		t.Errorf("the client got %s", n.Line)
	default:
	}
	ch := agg.send("tools/call", `{"name":"alpha:ask","arguments":{"method":"elicitation/create","params":{"mode":"form","message":"name?","requestedSchema":{"type":"object"}}}}`)
	if req := nextNote(t, agg, "the form request"); req.Method != "elicitation/create" {
		t.Fatalf("the client got %s, want the form request", req.Line)
	} else {
		var r struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal(req.Line, &r)
		agg.writeLine(`{"jsonrpc":"2.0","id":` + string(r.ID) + `,"result":{"action":"decline"}}`)
	}
	agg.wait(ch, "the form request's answer")
}
