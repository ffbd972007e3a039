package aggregator

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/logging"
)

// sdkSession connects a go-sdk client (the version in go.mod, which probes with server/discover
// and speaks the modern era when it can) to the aggregator serving servers.
func sdkSession(t *testing.T, opts *mcp.ClientOptions, servers ...config.Server) (*mcp.ClientSession, *lockedLog) {
	t.Helper()
	return sdkConnect(t, mcp.NewClient(&mcp.Implementation{Name: "go-sdk-test", Version: "1"}, opts), nil, servers...)
}

// sdkConnect connects client, with the session options opts, to the aggregator serving
// servers; the session and the aggregator end with the test.
func sdkConnect(t *testing.T, client *mcp.Client, opts *mcp.ClientSessionOptions, servers ...config.Server) (*mcp.ClientSession, *lockedLog) {
	t.Helper()
	log := &lockedLog{}
	cfg := &config.Config{File: filepath.Join(t.TempDir(), "config.json"), Servers: servers}
	agg, err := Start(context.Background(), cfg, Options{Log: logging.New(log, slog.LevelDebug), Stderr: log})
	if err != nil {
		t.Fatal(err)
	}
	cr, cw := io.Pipe()
	ar, aw := io.Pipe()
	done := make(chan struct{})
	go func() { agg.Serve(context.Background(), cr, aw); aw.Close(); close(done) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: ar, Writer: cw}, opts)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, log)
	}
	t.Cleanup(func() {
		cs.Close()
		cw.Close()
		<-done
		agg.Close()
		if t.Failed() {
			t.Logf("log:\n%s", log)
		}
	})
	return cs, log
}

// A go-sdk client speaks the modern era with the aggregator, and reaches a legacy server
// through it: its tools, a call, the server's elicitation as a multi round-trip result its
// client answers, and list changes on its subscriptions/listen stream.
func TestModernGoSDKClient(t *testing.T) {
	changed := make(chan struct{}, 10)
	cs, _ := sdkSession(t, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"said": req.Params.Message}}, nil
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}, fx("a", "-full"))
	ctx := context.Background()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("the session speaks %q", v)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 || tools.Tools[0].Name != "a:echo" {
		t.Fatalf("tools/list: %v %v", tools, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a:echo", Arguments: map[string]any{"x": 1}})
	if err != nil || !strings.Contains(string(must(json.Marshal(res.StructuredContent))), `"x":1`) {
		t.Fatalf("echo: %v %v", res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "a:ask", Arguments: map[string]any{
		"method": "elicitation/create", "params": map[string]any{"message": "Name?", "requestedSchema": map[string]any{"type": "object"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(must(json.Marshal(res.StructuredContent))); got != `{"result":{"action":"accept","content":{"said":"Name?"}}}` {
		t.Errorf("the server got %s", got)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "a:grow"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools/list_changed on the listen stream")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
