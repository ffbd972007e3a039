package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// envelope is the _meta of a modern request (protocol version 2026-07-28).
const envelope = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"io.modelcontextprotocol/clientInfo":{"name":"faults","version":"1"}}`

// A process that is only probed (server/discover, then the end of its input, as the
// TypeScript SDK's transport and Claude Code's double start do) answers, exits at once and
// leaves none of its twenty servers behind.
func TestFaultProbeOnly(t *testing.T) {
	tag := newTag(t)
	var servers []string
	for i := range 20 {
		servers = append(servers, fmt.Sprintf(`"s%02d": %s`, i, tagged(tag)))
	}
	agg := startAggregator(t, `{"mcpServers": {`+strings.Join(servers, ",")+`}}`)
	m := agg.call("server/discover", `{`+envelope+`}`)
	if !strings.Contains(string(m.Result), `"supportedVersions":["2026-07-28"`) {
		t.Fatalf("discover: %s", m.Line)
	}
	endSessionWithin(t, agg, tag, 2*time.Second, "a probed process must not keep its client waiting")
}

// A session that ends with a subscriptions/listen stream open ends at once: the stream ends with
// the transport, and is not an answer the end of input waits for.
func TestFaultListenOpenAtEnd(t *testing.T) {
	tag := newTag(t)
	agg := startAggregator(t, `{"mcpServers": {"s": `+tagged(tag, "-full")+`}}`)
	agg.send("subscriptions/listen", `{`+envelope+`,"notifications":{"toolsListChanged":true}}`)
	if !agg.note("notifications/subscriptions/acknowledged", 10*time.Second) {
		t.Fatal("the listen was not acknowledged")
	}
	endSessionWithin(t, agg, tag, 2*time.Second, "an open listen must not hold the end back (the drain waits 5s for answers)")
}

// Bad modern input is answered with an error and the session goes on: a malformed envelope,
// a forged requestState, a retry without one or with someone else's, a retry whose server went
// down meanwhile.
func TestFaultModernInput(t *testing.T) {
	tag := newTag(t)
	agg := startAggregator(t, `{"mcpServers": {"s": `+tagged(tag, "-full")+`}}`, "--max-restarts", "0")
	for _, tc := range []struct{ params, want string }{
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":2026}}`, `"code":-32602`},
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25","io.modelcontextprotocol/clientCapabilities":{}}}`, `"code":-32022`},
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[]}}`, `"code":-32602`},
		{`{"_meta":"x"}`, `"code":-32602`},
	} {
		if m := agg.call("tools/list", tc.params); !strings.Contains(string(m.Error), tc.want) {
			t.Errorf("tools/list %s answered %s, want %s", tc.params, m.Line, tc.want)
		}
	}
	ask := `"name":"s:ask","arguments":{"method":"elicitation/create","params":{"message":"?","requestedSchema":{"type":"object"}}}`
	first := agg.call("tools/call", `{`+envelope+`,`+ask+`}`)
	var res struct {
		RequestState string `json:"requestState"`
	}
	if json.Unmarshal(first.Result, &res) != nil || res.RequestState == "" {
		t.Fatalf("no input_required: %s", first.Line)
	}
	state, _ := json.Marshal(res.RequestState)
	for _, tc := range []struct{ what, extra, want string }{
		{"forged", `,"requestState":"mcpagg1.eyJpIjoiMSJ9.AAAA"`, "failed verification"},
		{"malformed", `,"requestState":"mcpagg1.%%%"`, "malformed"},
		{"responses of the wrong type", `,"inputResponses":[],"requestState":` + string(state), "inputResponses"},
	} {
		if m := agg.call("tools/call", `{`+envelope+`,`+ask+tc.extra+`}`); !strings.Contains(string(m.Error), tc.want) {
			t.Errorf("%s: answered %s, want an error with %q", tc.what, m.Line, tc.want)
		}
	}
	// A retry without the requestState (or with a state that is not the aggregator's) is the
	// request again: the server asks afresh, under a new state.
	for _, extra := range []string{`,"inputResponses":{"elicitation-1":{"action":"decline"}}`, `,"inputResponses":{},"requestState":"someone else's"`} {
		again := agg.call("tools/call", `{`+envelope+`,`+ask+extra+`}`)
		var got struct {
			ResultType   string `json:"resultType"`
			RequestState string `json:"requestState"`
		}
		if json.Unmarshal(again.Result, &got) != nil || got.ResultType != "input_required" || got.RequestState == "" || got.RequestState == res.RequestState {
			t.Errorf("a retry %s: %s, want a new input_required", extra, again.Line)
		}
	}
	// The server goes down while the request waits for the client's input: the retry gets
	// the error that it went down.
	agg.call("tools/call", `{`+envelope+`,"name":"s:crash"}`)
	retry := agg.call("tools/call", `{`+envelope+`,`+ask+`,"inputResponses":{"elicitation-1":{"action":"decline"}},"requestState":`+string(state)+`}`)
	if !strings.Contains(string(retry.Error), `"code":-32603`) || !strings.Contains(string(retry.Error), `Server unavailable`) {
		t.Errorf("a retry whose server went down: %s", retry.Line)
	}
	if m := agg.call("tools/list", `{`+envelope+`}`); m.Error != nil {
		t.Errorf("the session did not go on: %s", m.Line)
	}
	endSession(t, agg, tag)
}
