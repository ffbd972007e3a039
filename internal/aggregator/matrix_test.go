package aggregator

//lint:file-ignore SA1019 sampling, roots and logging are deprecated in 2026-07-28 (SEP-2577) but still in it, and the matrix proves a proxy carries them

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The protocol-era matrix: a go-sdk client of each era (legacy: pinned to 2025-11-25, which
// sends initialize; modern: the SDK's default, a server/discover probe and 2026-07-28) meets the
// go-sdk fixture server of each era (legacy, modern only, dual) through the aggregator, and
// every feature it exercises gives what the same client gets from a direct connection to the
// same server: in the client's own era where the server speaks it, else in the server's (a
// legacy client cannot reach a modern-only server directly, and a modern client falls back to
// initialize with a legacy one). Only the names (prefixed with the key) and the modern result
// envelope (resultType, ttlMs, cacheScope, the serverInfo in _meta) may differ; docs/protocol-eras.md shows the
// matrix.

// matrixVersions are the protocol versions the client of each era asks for.
var matrixVersions = map[string]string{"legacy": "2025-11-25", "modern": "2026-07-28"}

// matrixPeer is one client session, and what its handlers were given.
type matrixPeer struct {
	cs     *mcp.ClientSession
	prefix string // "m:" through the aggregator, "" directly

	mu       sync.Mutex
	progress []float64 // of the token "tok"
	started  int       // progress of the token "slow": the slow call runs
	logs     []string
	changed  int
	updated  []string
	notified chan struct{} // a notification arrived
}

// matrixClient is a go-sdk client whose handlers record what reaches p: elicitation and
// sampling answered from their requests, one root.
func matrixClient(p *matrixPeer) *mcp.Client {
	note := func(f func()) {
		p.mu.Lock()
		f()
		p.mu.Unlock()
		select {
		case p.notified <- struct{}{}:
		default:
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "matrix", Version: "1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "re: " + req.Params.Message}}, nil
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			text := ""
			if len(req.Params.Messages) > 0 {
				if t, ok := req.Params.Messages[0].Content.(*mcp.TextContent); ok {
					text = t.Text
				}
			}
			return &mcp.CreateMessageResult{Model: "matrix-model", Role: "assistant", Content: &mcp.TextContent{Text: "sampled: " + text}}, nil
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			note(func() {
				if req.Params.ProgressToken == "slow" {
					p.started++
				} else {
					p.progress = append(p.progress, req.Params.Progress)
				}
			})
		},
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			note(func() { p.logs = append(p.logs, fmt.Sprintf("%s %v", req.Params.Level, req.Params.Data)) })
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			note(func() { p.changed++ })
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			note(func() { p.updated = append(p.updated, req.Params.URI) })
		},
	})
	c.AddRoots(&mcp.Root{URI: "file:///matrix/root", Name: "matrix root"})
	return c
}

// waitFor waits until cond holds of p (read under its lock), or fails the test.
func (p *matrixPeer) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		p.mu.Lock()
		ok := cond()
		p.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-p.notified:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%s: waited 10s for %s", p.label(), what)
		}
	}
}

func (p *matrixPeer) label() string {
	if p.prefix == "" {
		return "direct"
	}
	return "through the aggregator"
}

// direct connects a client of clientEra straight to the fixture of childEra, in the client's
// era when the fixture speaks it, else in the fixture's.
func direct(t *testing.T, clientEra, childEra string) *matrixPeer {
	t.Helper()
	era := clientEra
	if childEra != "dual" {
		era = childEra
	}
	p := &matrixPeer{notified: make(chan struct{}, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := matrixClient(p).Connect(ctx, &mcp.CommandTransport{Command: exec.Command(gosdkBin, "-era", childEra)},
		&mcp.ClientSessionOptions{ProtocolVersion: matrixVersions[era]})
	if err != nil {
		t.Fatalf("direct connection (%s client, %s server): %v", era, childEra, err)
	}
	t.Cleanup(func() { cs.Close() })
	p.cs = cs
	return p
}

// aggregated connects a client of clientEra to the aggregator serving the fixture of childEra
// under the key "m".
func aggregated(t *testing.T, clientEra, childEra string) *matrixPeer {
	t.Helper()
	p := &matrixPeer{prefix: "m:", notified: make(chan struct{}, 1)}
	p.cs, _ = sdkConnect(t, matrixClient(p), &mcp.ClientSessionOptions{ProtocolVersion: matrixVersions[clientEra]}, gs("m", "-era", childEra))
	if got, want := p.cs.InitializeResult().ProtocolVersion, matrixVersions[clientEra]; got != want {
		t.Fatalf("the %s client's session with the aggregator speaks %s", clientEra, got)
	}
	return p
}

// TestEraMatrix runs every feature in every pairing of client era and server era.
func TestEraMatrix(t *testing.T) {
	for _, clientEra := range []string{"legacy", "modern"} {
		for _, childEra := range []string{"legacy", "modern", "dual"} {
			t.Run(clientEra+"-client/"+childEra+"-server", func(t *testing.T) {
				want := exercise(t, direct(t, clientEra, childEra))
				got := exercise(t, aggregated(t, clientEra, childEra))
				for _, f := range slices.Sorted(maps.Keys(want)) {
					if got[f] != want[f] {
						t.Errorf("%s:\n through the aggregator: %s\n directly:               %s", f, got[f], want[f])
					}
				}
			})
		}
	}
}

// exercise runs each feature of the matrix with p, and returns what it got, by feature, in a form that compares across the two connections.
func exercise(t *testing.T, p *matrixPeer) map[string]string {
	t.Helper()
	ctx := context.Background()
	got := map[string]string{}
	call := func(name string, args map[string]any, meta mcp.Meta) string {
		t.Helper()
		res, err := p.cs.CallTool(ctx, &mcp.CallToolParams{Name: p.prefix + name, Arguments: args, Meta: meta})
		return outcome(res, err)
	}

	tools, err := p.cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("%s: tools/list: %v", p.label(), err)
	}
	got["tools/list"] = toolDefs(tools.Tools, p.prefix)
	got["tools/call"] = call("echo", map[string]any{"a": []any{1, "two", nil}, "b": map[string]any{"c": 1.5}}, nil)

	progressed := call("progress", map[string]any{"steps": 3}, mcp.Meta{"progressToken": "tok"})
	p.waitFor(t, "3 progress notifications", func() bool { return len(p.progress) == 3 })
	got["progress"] = fmt.Sprint(progressed, p.progress)

	slowCtx, stop := context.WithCancel(ctx)
	slowDone := make(chan error, 1)
	go func() {
		_, err := p.cs.CallTool(slowCtx, &mcp.CallToolParams{Name: p.prefix + "slow", Arguments: map[string]any{"ms": 20000, "tag": "matrix"},
			Meta: mcp.Meta{"progressToken": "slow"}})
		slowDone <- err
	}()
	p.waitFor(t, "the slow call's progress: it runs at the server", func() bool { return p.started > 0 })
	stop()
	if err := <-slowDone; !errors.Is(err, context.Canceled) {
		t.Errorf("%s: the cancelled call ended with %v", p.label(), err)
	}
	var tags string
	waitFor(t, p.label()+": the server noting the cancellation, when it reads it", func() bool {
		tags = call("cancelled", nil, nil)
		return strings.Contains(tags, "matrix")
	})
	got["cancellation"] = tags

	prompt, err := p.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: p.prefix + "greet", Arguments: map[string]string{"name": "Ann"}})
	got["prompts/get"] = outcome(prompt, err)
	prompts, err := p.cs.ListPrompts(ctx, nil)
	if err == nil {
		for _, pr := range prompts.Prompts {
			pr.Name = strings.TrimPrefix(pr.Name, p.prefix)
		}
	}
	got["prompts/list"] = outcome(prompts, err)

	for _, uri := range []string{"gosdk://static/a", "gosdk://items/7"} {
		res, err := p.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		got["resources/read "+uri] = outcome(res, err)
	}
	res, err := p.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "gosdk://nowhere"})
	got["resources/read of a missing resource"] = outcome(res, err)
	templates, err := p.cs.ListResourceTemplates(ctx, nil)
	got["resources/templates/list"] = outcome(templates, err)

	if err := p.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "gosdk://static/a"}); err != nil {
		t.Fatalf("%s: subscribe: %v", p.label(), err)
	}
	// A modern go-sdk client's Subscribe opens its subscriptions/listen and returns without
	// waiting for the acknowledgement: the resource is touched until an update arrives.
	var touched string
	p.waitFor(t, "notifications/resources/updated", func() bool {
		if len(p.updated) == 0 {
			p.mu.Unlock()
			touched = call("touch", map[string]any{"uri": "gosdk://static/a"}, nil)
			p.mu.Lock()
		}
		return len(p.updated) > 0
	})
	got["resources/subscribe"] = fmt.Sprint(touched, p.updated[0])

	grown := call("grow", nil, nil)
	p.waitFor(t, "a tool list change", func() bool { return p.changed > 0 })
	// A modern client's list may be cached until the change arrives.
	waitFor(t, p.label()+": grown_1 in tools/list", func() bool {
		tools, err = p.cs.ListTools(ctx, nil)
		return err == nil && strings.Contains(toolDefs(tools.Tools, p.prefix), "grown_1")
	})
	got["list changes"] = fmt.Sprint(grown, toolDefs(tools.Tools, p.prefix))
	got["tools/call grown_1"] = call("grown_1", nil, nil)

	got["elicitation"] = call("elicit", map[string]any{"rounds": 2, "message": "Name?"}, nil)
	got["sampling"] = call("sample", map[string]any{"rounds": 2, "prompt": "Hi"}, nil)
	got["roots"] = call("roots", nil, nil)

	p.mu.Lock()
	p.logs = nil
	p.mu.Unlock()
	var meta mcp.Meta
	if p.cs.InitializeResult().ProtocolVersion < matrixVersions["modern"] {
		if err := p.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "warning"}); err != nil {
			t.Fatalf("%s: logging/setLevel: %v", p.label(), err)
		}
	} else {
		meta = mcp.Meta{mcp.MetaKeyLogLevel: "warning"}
	}
	logged := call("log", nil, meta)
	// The server logs at five levels in order, error last; the client takes notifications one
	// at a time, in the order they came (go-sdk: jsonrpc2's handleAsync). Once the error
	// message is in, any message below the level would be too.
	p.waitFor(t, "the error message, the last logged", func() bool { return slices.Contains(p.logs, "error error message") })
	p.mu.Lock()
	got["logging"] = fmt.Sprint(logged, p.logs)
	p.mu.Unlock()

	// A server error of its own (-32042 is the legacy URLElicitationRequiredError, which a modern
	// client never gets: TestModernURLElicitation).
	got["error"] = call("fail", map[string]any{"code": -32011}, nil)
	return got
}

// outcome is a result, or an error, as JSON without the modern result envelope.
func outcome(res any, err error) string {
	if err != nil {
		var rpc *jsonrpc.Error
		if errors.As(err, &rpc) {
			return fmt.Sprintf("error %d %q %s", rpc.Code, rpc.Message, rpc.Data)
		}
		return "error " + err.Error()
	}
	var m map[string]any
	if json.Unmarshal(must(json.Marshal(res)), &m) != nil {
		return string(must(json.Marshal(res)))
	}
	for _, k := range []string{"resultType", "ttlMs", "cacheScope"} {
		delete(m, k)
	}
	if meta, ok := m["_meta"].(map[string]any); ok {
		delete(meta, mcp.MetaKeyServerInfo)
		if len(meta) == 0 {
			delete(m, "_meta")
		}
	}
	return string(must(json.Marshal(m)))
}

// toolDefs are the tool definitions with their names unprefixed, sorted by name.
func toolDefs(tools []*mcp.Tool, prefix string) string {
	defs := make([]string, 0, len(tools))
	for _, tool := range tools {
		c := *tool
		c.Name = strings.TrimPrefix(c.Name, prefix)
		defs = append(defs, string(must(json.Marshal(&c))))
	}
	sort.Strings(defs)
	return strings.Join(defs, "\n")
}
