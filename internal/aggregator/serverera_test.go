package aggregator

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
)

// Servers of either era (probe.go, serverlegacy.go, servermodern.go, fulfil.go), driven by a legacy client of raw JSON-RPC lines: the
// children are the go-sdk fixture (internal/fixture/gosdk) in each era, and the JSON-RPC
// fixture for the probes a real SDK does not answer.

// gs is a server entry running the go-sdk fixture with args.
func gs(key string, args ...string) config.Server {
	return config.Server{Key: key, Command: gosdkBin, Args: args}
}

// structured returns the structuredContent of a tools/call answer.
func structured(t *testing.T, m msg) map[string]any {
	t.Helper()
	var res struct {
		Structured map[string]any `json:"structuredContent"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil || res.Structured == nil {
		t.Fatalf("not a structured result: %s", m.Line)
	}
	return res.Structured
}

// whoami calls the whoami tool of key and returns what the server saw of the request.
func whoami(t *testing.T, c *client, key string) (version string, info, caps map[string]any) {
	t.Helper()
	got := structured(t, c.call("tools/call", `{"name":"`+key+`:whoami"}`))
	version, _ = got["protocolVersion"].(string)
	info, _ = got["clientInfo"].(map[string]any)
	caps, _ = got["capabilities"].(map[string]any)
	return version, info, caps
}

// A modern-only child (it refuses initialize) is aggregated for a legacy client: it was spoken
// to in the modern era, and every request carried the client's clientInfo and capabilities in
// _meta. A dual child is spoken to in the modern era too; a legacy one gets initialize.
func TestChildEras(t *testing.T) {
	c := serve(t, Options{}, gs("mod", "-era", "modern"), gs("dual", "-era", "dual"), gs("old", "-era", "legacy"))
	c.initialize(`{"elicitation":{},"roots":{"listChanged":true},"extensions":{"io.example/x":{}}}`)
	list := names(t, c.call("tools/list", ""), "tools")
	for _, want := range []string{"mod:whoami", "dual:echo", "old:whoami"} {
		if !strings.Contains(strings.Join(list, " "), want) {
			t.Errorf("tools/list has no %s: %v", want, list)
		}
	}
	for key, want := range map[string]string{"mod": "2026-07-28", "dual": "2026-07-28", "old": "2025-11-25"} {
		version, info, caps := whoami(t, c, key)
		if version != want {
			t.Errorf("%s saw protocol version %q; want %q", key, version, want)
		}
		if info["name"] != "test" || info["version"] != "1" {
			t.Errorf("%s saw clientInfo %v", key, info)
		}
		if _, ok := caps["elicitation"]; !ok {
			t.Errorf("%s saw capabilities %v; want the client's elicitation", key, caps)
		}
		if _, ok := caps["roots"]; !ok {
			t.Errorf("%s saw capabilities %v; want the client's roots", key, caps)
		}
	}
	echo := c.call("tools/call", `{"name":"mod:echo","arguments":{"a":[1,2]}}`)
	if got := structured(t, echo); got["a"] == nil {
		t.Errorf("echo: %s", echo.Line)
	}
	if p := c.call("prompts/get", `{"name":"mod:greet","arguments":{"name":"Ann"}}`); !strings.Contains(p.Line, "Hello, Ann!") {
		t.Errorf("prompts/get: %s", p.Line)
	}
	if r := c.call("resources/read", `{"uri":"gosdk://static/a"}`); !strings.Contains(r.Line, "static a") {
		t.Errorf("resources/read: %s", r.Line)
	}
	log := c.log.String()
	for _, want := range []string{`era: modern (it answered server/discover) server=mod protocol=2026-07-28`, `era: modern (it answered server/discover) server=dual`, `era: legacy (it answered server/discover with the error -32022 "unsupported protocol version") server=old`} {
		if !strings.Contains(log, want) {
			t.Errorf("the log has no %q", want)
		}
	}
}

// A legacy child is still initialized, whatever it answers to the probe; one silent on it is
// given Options.ProbeTimeout, not the start-up timeout. One that exits on the probe is started
// again and initialized, and so are its later processes, without a probe. One that speaks only
// modern versions the aggregator does not fails to start, naming them.
func TestProbeFallback(t *testing.T) {
	start := time.Now()
	c := serve(t, Options{ProbeTimeout: 300 * time.Millisecond, StartupTimeout: 20 * time.Second, MaxRestarts: 3, RestartDelay: 10 * time.Millisecond},
		fx("silent", "-discover", "silent", "-report-init"), fx("invalid", "-discover", "invalid-params", "-report-init"),
		fx("plain", "-report-init"), fx("exits", "-discover", "exit"), fx("future", "-discover", "future"))
	c.initialize(`{}`)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the start took %v", took)
	}
	c.call("tools/call", `{"name":"exits:crash"}`)
	for !strings.Contains(c.note("notifications/message").Line, `server \"exits\" was restarted`) {
	}
	for _, key := range []string{"silent", "invalid", "plain"} {
		got := c.call("tools/call", `{"name":"`+key+`:init_params"}`)
		if !strings.Contains(got.Line, `\"protocolVersion\":\"2025-11-25\"`) && !strings.Contains(got.Line, `"protocolVersion":"2025-11-25"`) {
			t.Errorf("%s did not get initialize: %s", key, got.Line)
		}
	}
	log := c.log.String()
	for _, want := range []string{
		`era: legacy (no answer to server/discover within 300ms) server=silent`,
		`era: legacy (it answered server/discover with the error -32602 "Invalid params: unknown request before initialize") server=invalid`,
		`era: legacy (it answered server/discover with the error -32601 "Method not found") server=plain`,
		`era: legacy (its process exited with status 5 on the server/discover probe; started again for initialize) server=exits`,
		`era: legacy (its last process served in the legacy era; not probed) server=exits`,
		`server "future" could not start and stays down (the other servers are served): command "` + fixtureBin + `" server/discover failed: it speaks only the protocol versions 2099-01-01, and mcp-simple-aggregator speaks 2026-07-28, 2025-11-25`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log has no %q", want)
		}
	}
}

// A server that starts too slowly to answer the probe in time reads it late: a go-sdk server of
// both eras then refuses initialize ("duplicate initialize": the probe began a modern session),
// and a modern-only one refuses it anyway. Its late answer to the probe says it is modern, and
// it is served in that era instead of failing to start (npx fetching a package, go run
// compiling: the README's demo hit this).
func TestProbeAnsweredLate(t *testing.T) {
	c := serve(t, Options{ProbeTimeout: 200 * time.Millisecond, StartupTimeout: 20 * time.Second},
		gs("dual", "-era", "dual", "-start-delay", "700ms"), gs("mod", "-era", "modern", "-start-delay", "700ms"))
	c.initialize(`{}`)
	for _, key := range []string{"dual", "mod"} {
		got := structured(t, c.call("tools/call", `{"name":"`+key+`:whoami"}`))
		if got["protocolVersion"] != "2026-07-28" {
			t.Errorf("%s is spoken to in %v, want 2026-07-28", key, got["protocolVersion"])
		}
		if want := "era: modern (it answered server/discover after the probe's timeout, and refused initialize: "; !strings.Contains(c.log.String(), want) {
			t.Errorf("the log has no %q", want)
		}
	}
}

// answer answers the aggregator's request m with result.
func (c *client) answer(m msg, result string) {
	c.write(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`)
}

// A modern child's input_required reaches a legacy client as the server-to-client requests of
// its era, one per round, and the client sees one result: the child got the answers as
// inputResponses (it returns them).
func TestInputRequiredForLegacyClient(t *testing.T) {
	c := serve(t, Options{}, gs("m", "-era", "modern"))
	c.initialize(`{"elicitation":{},"sampling":{},"roots":{}}`)
	for _, tc := range []struct{ tool, method, answer string }{
		{"elicit", "elicitation/create", `{"action":"accept","content":{"name":"Ann"}}`},
		{"sample", "sampling/createMessage", `{"role":"assistant","content":{"type":"text","text":"hello"},"model":"m1"}`},
		{"roots", "roots/list", `{"roots":[{"uri":"file:///tmp","name":"tmp"}]}`},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			done := c.send("tools/call", `{"name":"m:`+tc.tool+`","arguments":{"rounds":2}}`)
			for range 2 {
				req := c.note(tc.method)
				if len(req.ID) == 0 {
					t.Fatalf("%s is not a request: %s", tc.method, req.Line)
				}
				c.answer(req, tc.answer)
			}
			final := c.wait(done, "tools/call")
			got := structured(t, final)
			answers, _ := got["answers"].([]any)
			if len(answers) != 2 {
				t.Fatalf("result %s; want 2 answers", final.Line)
			}
			want := map[string]any{}
			json.Unmarshal([]byte(tc.answer), &want)
			b, _ := json.Marshal(answers[1])
			var gotAnswer map[string]any
			json.Unmarshal(b, &gotAnswer)
			for k := range want {
				if _, ok := gotAnswer[k]; !ok {
					t.Errorf("the child got %s; want the client's answer %s", b, tc.answer)
				}
			}
			if strings.Contains(final.Line, "input_required") {
				t.Errorf("the client saw input_required: %s", final.Line)
			}
		})
	}
}

// A legacy client that did not declare the capability an input request needs gets an error
// naming the server and the kind; one that answers with an error too.
func TestInputRequiredRefused(t *testing.T) {
	c := serve(t, Options{}, gs("m", "-era", "modern"))
	c.initialize(`{"roots":{}}`)
	wantError(t, c.call("tools/call", `{"name":"m:sample"}`), -32601, `server "m" needs sampling/createMessage (the "sampling" capability)`)
	done := c.send("tools/call", `{"name":"m:roots"}`)
	req := c.note("roots/list")
	c.write(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":{"code":-32000,"message":"no roots today"}}`)
	wantError(t, c.wait(done, "tools/call"), -32603, `answered the roots/list of server "m" with an error`)
}

// The client's cancellation of a request waiting for its input cancels the input request at
// the client; the request is never retried.
func TestInputRequiredCancelled(t *testing.T) {
	c := serve(t, Options{}, gs("m", "-era", "modern"))
	c.initialize(`{"elicitation":{}}`)
	c.send("tools/call", `{"name":"m:elicit"}`)
	req := c.note("elicitation/create")
	c.write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + c.lastID() + `}}`)
	got := c.note("notifications/cancelled")
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	json.Unmarshal(got.Params, &p)
	if string(p.RequestID) != string(req.ID) {
		t.Errorf("cancelled %s; want the input request %s", p.RequestID, req.ID)
	}
}

// A modern child's list change, on its subscriptions/listen stream, reaches the legacy client
// as notifications/tools/list_changed, and the new tool is listed.
func TestListenListChanged(t *testing.T) {
	c := serve(t, Options{}, gs("m", "-era", "modern"))
	c.initialize(`{}`)
	if got := structured(t, c.call("tools/call", `{"name":"m:grow"}`)); got["added"] != "grown_1" {
		t.Fatalf("grow: %v", got)
	}
	c.note("notifications/tools/list_changed")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(strings.Join(names(t, c.call("tools/list", ""), "tools"), " "), "m:grown_1") {
		if time.Now().After(deadline) {
			t.Fatal("m:grown_1 is not listed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// resources/subscribe on a modern child opens its listen again with the URI, and is answered
// once the child acknowledged it; notifications/resources/updated reaches the client without
// the listen's tag; after unsubscribe no more.
func TestListenResourceSubscription(t *testing.T) {
	c := serve(t, Options{}, gs("m", "-era", "modern"))
	c.initialize(`{}`)
	if m := c.call("resources/subscribe", `{"uri":"gosdk://static/a"}`); string(m.Result) != "{}" {
		t.Fatalf("resources/subscribe: %s", m.Line)
	}
	c.call("tools/call", `{"name":"m:touch","arguments":{"uri":"gosdk://static/a"}}`)
	got := c.note("notifications/resources/updated")
	if got.Line != `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"gosdk://static/a"}}` {
		t.Errorf("updated: %s", got.Line)
	}
	if m := c.call("resources/unsubscribe", `{"uri":"gosdk://static/a"}`); string(m.Result) != "{}" {
		t.Fatalf("resources/unsubscribe: %s", m.Line)
	}
	// The list changes still arrive on the new listen.
	c.call("tools/call", `{"name":"m:grow"}`)
	c.note("notifications/tools/list_changed")
}

// A modern child that lets go of a replaced listen only after the aggregator stopped waiting
// (the go-sdk then ends the connection's list subscriptions, the new listen's with them): once
// the old one ends, the aggregator listens again, and the list changes still arrive.
func TestListenEndedLate(t *testing.T) {
	c := serve(t, Options{ProbeTimeout: 100 * time.Millisecond}, gs("m", "-era", "modern", "-listen-end-delay", "500ms"))
	c.initialize(`{}`)
	if m := c.call("resources/subscribe", `{"uri":"gosdk://static/a"}`); string(m.Result) != "{}" {
		t.Fatalf("resources/subscribe: %s", m.Line)
	}
	waitFor(t, "the listen to be opened again", func() bool {
		return strings.Contains(c.log.String(), "listened again: the listen it replaced ended late")
	})
	c.call("tools/call", `{"name":"m:grow"}`)
	c.note("notifications/tools/list_changed")
	c.call("tools/call", `{"name":"m:touch","arguments":{"uri":"gosdk://static/a"}}`)
	c.note("notifications/resources/updated")
}

// A change while the aggregator listens again (the client subscribes to a resource of a modern
// child) is not lost: between the old listen's end and the new one's start nothing is
// subscribed at the child, which tells no one; once the new listen is acknowledged, the
// aggregator reads the lists again (modernServer.subscribe). The child answers the old listen
// a second after letting go of it, and the change is made in that second.
func TestListenAgainReadsLists(t *testing.T) {
	c := serve(t, Options{ProbeTimeout: 5 * time.Second}, gs("m", "-era", "modern", "-listen-answer-delay", "1s"))
	c.initialize(`{}`)
	subscribed := c.send("resources/subscribe", `{"uri":"gosdk://static/a"}`)
	waitFor(t, "the child letting go of the old listen", func() bool {
		return strings.Contains(c.log.String(), "gosdk: let go of a cancelled listen")
	})
	c.call("tools/call", `{"name":"m:grow"}`)
	if m := <-subscribed; string(m.Result) != "{}" {
		t.Fatalf("resources/subscribe: %s", m.Line)
	}
	c.note("notifications/tools/list_changed")
	if m := c.call("tools/list", ""); !strings.Contains(m.Line, `"m:grown_1"`) {
		t.Errorf("tools/list after the change: %s", m.Line)
	}
}

// A modern child has no ping: its health probe is server/discover. One that stops answering it
// is restarted; one that answers it is left alone (were it pinged, "ping" would fail with
// Method not found, and it would be restarted too).
func TestModernHealthProbe(t *testing.T) {
	c := serve(t, Options{MaxRestarts: 5, RestartDelay: 20 * time.Millisecond, PingInterval: 100 * time.Millisecond, PingFailures: 2},
		gs("hung", "-era", "modern", "-hang-discover-after", "1"), gs("well", "-era", "modern"))
	c.initialize(`{}`)
	note := c.note("notifications/message")
	if !strings.Contains(note.Line, `server \"hung\" did not answer 2 pings in a row`) {
		t.Errorf("message: %s", note.Line)
	}
	c.note("notifications/message") // restarted: by then "well" had as many probes
	if log := c.log.String(); !strings.Contains(log, `ping failed server=hung`) || strings.Contains(log, `ping failed server=well`) {
		t.Errorf("want the probes of \"hung\" to fail, and those of \"well\" not")
	}
}

// check shows each server's era.
func TestCheckEra(t *testing.T) {
	cfg := &config.Config{File: filepath.Join(t.TempDir(), "config.json"), Servers: []config.Server{gs("mod", "-era", "modern"), fx("old")}}
	rep := Check(context.Background(), cfg, Options{})
	eras := map[string]string{}
	for _, s := range rep.Servers {
		eras[s.Key] = s.Era
	}
	if eras["mod"] != "modern" || eras["old"] != "legacy" || !rep.OK {
		t.Errorf("eras %v, report %+v", eras, rep)
	}
}

// The progress of every leg of a request that needed input reaches the client under its own
// token, and what does not increase (each leg starts again) is dropped.
func TestInputRequiredProgress(t *testing.T) {
	c := serve(t, Options{}, gs("m", "-era", "modern"))
	c.initialize(`{"elicitation":{}}`)
	done := c.send("tools/call", `{"name":"m:elicit","arguments":{"rounds":2,"steps":1},"_meta":{"progressToken":"tok"}}`)
	var progress []string
	for len(progress) < 5 {
		var m msg
		select {
		case m = <-c.notes:
		case final := <-done:
			if final.Error != nil {
				t.Fatalf("tools/call: %s", final.Line)
			}
			for {
				select {
				case m := <-c.notes:
					if m.Method == "notifications/progress" {
						progress = append(progress, string(m.Params))
					}
					continue
				default:
				}
				break
			}
			want := []string{`{"progressToken":"tok","progress":1}`, `{"progressToken":"tok","progress":2}`, `{"progressToken":"tok","progress":3}`}
			if strings.Join(progress, " ") != strings.Join(want, " ") {
				t.Errorf("progress %v; want %v", progress, want)
			}
			return
		case <-time.After(10 * time.Second):
			t.Fatal("no answer within 10s")
		}
		switch m.Method {
		case "notifications/progress":
			progress = append(progress, string(m.Params))
		case "elicitation/create":
			c.answer(m, `{"action":"accept","content":{"name":"Ann"}}`)
		}
	}
	t.Fatalf("too much progress: %v", progress)
}

// A legacy client's log level (logging/setLevel) goes to a modern child in every request's
// _meta: it logs at that level and above, and nothing before the client set one.
func TestModernChildLogLevel(t *testing.T) {
	c := serve(t, Options{}, gs("m", "-era", "modern"))
	c.initialize(`{}`)
	c.call("tools/call", `{"name":"m:log"}`)
	if m := c.call("logging/setLevel", `{"level":"warning"}`); string(m.Result) != "{}" {
		t.Fatalf("logging/setLevel: %s", m.Line)
	}
	c.call("tools/call", `{"name":"m:log"}`)
	var got []string
	for len(got) < 2 {
		m := c.note("notifications/message")
		if strings.Contains(m.Line, `"logger":"gosdk"`) {
			got = append(got, string(m.Params))
		}
	}
	if !strings.Contains(got[0], `"warning message"`) || !strings.Contains(got[1], `"error message"`) {
		t.Errorf("log messages %v; want warning and error only", got)
	}
}

// A request that carries the modern envelope already (a modern client's) reaches a modern
// child byte for byte: the child sees that clientInfo, not the initialize's.
func TestEnvelopePassesThrough(t *testing.T) {
	c := serve(t, Options{}, gs("m", "-era", "modern"))
	c.initialize(`{"sampling":{}}`)
	got := structured(t, c.call("tools/call", `{"name":"m:whoami","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"other","version":"2"}}}`))
	if info, _ := got["clientInfo"].(map[string]any); info["name"] != "other" {
		t.Errorf("the child saw %v", got)
	}
	if caps, _ := got["capabilities"].(map[string]any); caps["sampling"] != nil {
		t.Errorf("the child saw the capabilities %v; want the request's own", caps)
	}
}

// The cache hints of a modern child's lists are kept (the pages merged: internal/era's
// tests), and a legacy child's lists have none.
func TestListHint(t *testing.T) {
	c := serve(t, Options{}, gs("m", "-era", "modern"), fx("old"))
	c.initialize(`{}`)
	c.agg.roster.mu.Lock()
	m, old := c.agg.roster.slots["m"].proc.hints[kindTools], c.agg.roster.slots["old"].proc.hints[kindTools]
	c.agg.roster.mu.Unlock()
	if !m.Public || old != (era.CacheHint{}) {
		t.Errorf("hints: modern child %+v (the go-sdk says public), legacy child %+v (want none)", m, old)
	}
}

// A legacy client's resources/subscribe of a modern child's resource waits for the child's
// listen to be opened again; meanwhile it is in the in-flight table, and the client's
// cancellation finds it: it is never answered (the next subscription, which waits for the
// same listen, is).
func TestListenSubscriptionCancelled(t *testing.T) {
	c := serve(t, Options{ProbeTimeout: 5 * time.Second}, gs("m", "-era", "modern", "-listen-end-delay", "300ms"))
	c.initialize(`{}`)
	if m := c.call("resources/subscribe", `{"uri":"gosdk://static/a"}`); string(m.Result) != "{}" {
		t.Fatalf("resources/subscribe: %s", m.Line)
	}
	// The next one waits for the listen the first opened to end (300 ms).
	cancelled := c.send("resources/subscribe", `{"uri":"gosdk://static/b"}`)
	c.write(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + c.lastID() + `}}`)
	if m := c.call("resources/unsubscribe", `{"uri":"gosdk://static/a"}`); m.Error != nil {
		t.Fatalf("resources/unsubscribe: %s", m.Line)
	}
	select {
	case m := <-cancelled:
		t.Errorf("the cancelled resources/subscribe was answered: %s", m.Line)
	default:
	}
	if p := c.agg.inflight.pending(); strings.Contains(p, "fanning") {
		t.Errorf("the table holds %s", p)
	}
}
