package aggregator

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/logging"
)

// The core's own tests run the aggregator in this process: the client speaks to Serve over
// in-memory pipes, and the servers are the fixture server (internal/fixture/server), built
// once for the package.

var fixtureBin, gosdkBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "aggregator-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fixtureBin = filepath.Join(dir, "fixture-server")
	if runtime.GOOS == "windows" {
		fixtureBin += ".exe"
	}
	gosdkBin = filepath.Join(dir, "fixture-gosdk")
	if runtime.GOOS == "windows" {
		gosdkBin += ".exe"
	}
	for bin, pkg := range map[string]string{fixtureBin: "../fixture/server", gosdkBin: "../fixture/gosdk"} {
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building the fixture server:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// client is a raw JSON-RPC client of an Aggregator served in this process.
type client struct {
	t    *testing.T
	agg  *Aggregator
	w    *io.PipeWriter
	log  *lockedLog
	done chan error

	mu      sync.Mutex
	next    int
	waiting map[string]chan msg
	notes   chan msg
}

// msg is one line from the aggregator.
type msg struct {
	Line   string          `json:"-"`
	Seq    int             `json:"-"` // the order in which the aggregator wrote it
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fx is a server entry running the fixture with args.
func fx(key string, args ...string) config.Server {
	return config.Server{Key: key, Command: fixtureBin, Args: args}
}

// serve starts the servers and serves them to a new client; everything ends with the test.
func serve(t *testing.T, opts Options, servers ...config.Server) *client {
	t.Helper()
	log := &lockedLog{}
	if opts.Log == nil {
		opts.Log = logging.New(log, slog.LevelDebug)
	}
	opts.Stderr = log
	sort.Slice(servers, func(i, j int) bool { return servers[i].Key < servers[j].Key })
	cfg := &config.Config{File: filepath.Join(t.TempDir(), "config.json"), Servers: servers}
	agg, err := Start(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return connectClient(t, agg, log)
}

// connectClient serves agg to a new client over in-memory pipes; everything ends with the test.
func connectClient(t *testing.T, agg *Aggregator, log *lockedLog) *client {
	cr, cw := io.Pipe()
	ar, aw := io.Pipe()
	c := &client{t: t, agg: agg, w: cw, log: log, done: make(chan error, 1), waiting: map[string]chan msg{}, notes: make(chan msg, 1000)}
	go func() { c.done <- agg.Serve(context.Background(), cr, aw); aw.Close() }()
	go c.read(ar)
	t.Cleanup(func() {
		cw.Close()
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return within 10s of the end of its input")
		}
		agg.Close()
		if t.Failed() {
			t.Logf("log:\n%s", log)
		}
	})
	return c
}

func (c *client) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	for seq := 1; ; seq++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var m msg
			m.Line, m.Seq = strings.TrimSuffix(string(line), "\n"), seq
			if line[0] == '[' {
				c.notes <- m // a batch's answer
			} else if err := json.Unmarshal(line, &m); err != nil {
				c.t.Errorf("the aggregator wrote a line that is not JSON: %q", line)
			} else if m.Method == "" && len(m.ID) > 0 && string(m.ID) != "null" {
				c.mu.Lock()
				ch := c.waiting[string(m.ID)]
				delete(c.waiting, string(m.ID))
				c.mu.Unlock()
				if ch == nil {
					c.t.Errorf("an answer to no request: %s", line)
				} else {
					ch <- m
				}
			} else {
				c.notes <- m
			}
		}
		if err != nil {
			return
		}
	}
}

func (c *client) write(line string) {
	if _, err := io.WriteString(c.w, line+"\n"); err != nil {
		c.t.Fatalf("writing to the aggregator: %v", err)
	}
}

// send sends a request and returns where its answer arrives.
func (c *client) send(method, params string) <-chan msg {
	c.mu.Lock()
	c.next++
	id := fmt.Sprint(c.next)
	ch := make(chan msg, 1)
	c.waiting[id] = ch
	c.mu.Unlock()
	line := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `"`
	if params != "" {
		line += `,"params":` + params
	}
	c.write(line + "}")
	return ch
}

func (c *client) wait(ch <-chan msg, what string) msg {
	c.t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(10 * time.Second):
		c.t.Fatalf("no answer to %s within 10s", what)
		return msg{}
	}
}

func (c *client) call(method, params string) msg {
	c.t.Helper()
	return c.wait(c.send(method, params), method)
}

// initialize performs the handshake with the given capabilities.
func (c *client) initialize(caps string) msg {
	c.t.Helper()
	m := c.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"test","version":"1"}}`)
	if m.Error != nil {
		c.t.Fatalf("initialize: %s", m.Line)
	}
	c.write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return m
}

// note waits for the next notification (or request) with the given method.
func (c *client) note(method string) msg {
	c.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-c.notes:
			if m.Method == method {
				return m
			}
		case <-deadline:
			c.t.Fatalf("no %s within 10s", method)
			return msg{}
		}
	}
}

// testTimeout is how long waitFor waits.
const testTimeout = 10 * time.Second

// waitFor polls cond until it holds, failing the test after testTimeout (the aggregator's log
// follows the failure: connectClient).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %v", what, testTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitLog waits until the aggregator's log (at debug level) holds text.
func (c *client) waitLog(text string) {
	c.t.Helper()
	waitFor(c.t, fmt.Sprintf("the log line %q", text), func() bool { return strings.Contains(c.log.String(), text) })
}

// wantError checks that m is an error answer with code and a message containing text.
func wantError(t *testing.T, m msg, code int, text string) {
	t.Helper()
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(m.Error, &e) != nil || e.Code != code || !strings.Contains(e.Message, text) {
		t.Errorf("answer %s; want error %d containing %q", m.Line, code, text)
	}
}

// names returns the names in a tools/list or prompts/list answer.
func names(t *testing.T, m msg, field string) []string {
	t.Helper()
	var list map[string][]struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(m.Result, &list); err != nil {
		t.Fatalf("%s: %v", m.Line, err)
	}
	var out []string
	for _, it := range list[field] {
		out = append(out, it.Name)
	}
	return out
}
