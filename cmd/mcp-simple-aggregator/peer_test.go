package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// peer speaks raw JSON-RPC to a process over its stdio, so that tests see the exact bytes of
// every answer: the aggregator's, and the fixture's when connected directly.
type peer struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	stderr *lockedBuffer

	mu      sync.Mutex
	nextID  int
	waiting map[string]chan message
	notes   chan message
	done    chan struct{}
	// waitOnce runs cmd.Wait once (from waitExit): after it, stderr holds all the process wrote.
	waitOnce sync.Once
	// quiet drops answers nobody waits for, and notifications beyond the buffer, instead of
	// failing the test: for load that is sent without waiting and cut off.
	quiet bool
}

// message is one line from the peer, with its parts as raw bytes.
type message struct {
	Line   []byte          `json:"-"`
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startPeer starts a program and reads its stdout.
func startPeer(t *testing.T, name string, args ...string) *peer {
	t.Helper()
	return startPeerCmd(t, exec.Command(name, args...))
}

// startPeerCmd is startPeer for a command made by the caller (with its own process
// attributes).
func startPeerCmd(t *testing.T, cmd *exec.Cmd) *peer {
	t.Helper()
	name := cmd.Path
	// Under -race the binaries are race-built, and the race runtime sleeps a second before a
	// program exits (atexit_sleep_ms); that second is not the aggregator's, and it would
	// count twice (the aggregator waits for its watchdog) against shutdown deadlines.
	cmd.Env = append(os.Environ(), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &peer{t: t, cmd: cmd, in: in, stderr: new(lockedBuffer), waiting: map[string]chan message{}, notes: make(chan message, 1000), done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go p.read(out)
	t.Cleanup(func() {
		p.in.Close()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Errorf("%s did not exit within 10s of the end of its input", filepath.Base(name))
		}
		p.waitExit()
		if t.Failed() {
			t.Logf("stderr of %s:\n%s", filepath.Base(name), p.stderr)
		}
	})
	return p
}

// waitExit waits for the process to exit and for the last of its stderr (which a process it
// started may hold a while longer).
func (p *peer) waitExit() {
	p.waitOnce.Do(func() { p.cmd.Wait() })
}

// startAggregator writes config to a file and starts the aggregator on it.
func startAggregator(t *testing.T, config string, flags ...string) *peer {
	t.Helper()
	path := writeConfig(t, config)
	return startPeer(t, aggBinary, append([]string{"--config", path}, flags...)...)
}

// writeConfig writes a configuration, with "$FIXTURE" standing for the fixture server.
func writeConfig(t *testing.T, config string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.json")
	quoted, _ := json.Marshal(fixtureBin)
	config = strings.ReplaceAll(config, `"$FIXTURE"`, string(quoted))
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (p *peer) read(out io.Reader) {
	defer close(p.done)
	r := bufio.NewReaderSize(out, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 && line[0] == '[' {
			// A batch's answer: a note, for the test to take apart.
			p.notes <- message{Line: bytes.TrimRight(line, "\n")}
		} else if len(line) > 0 {
			var m message
			if jerr := json.Unmarshal(line, &m); jerr != nil {
				p.t.Errorf("stdout carried a line that is not JSON: %q", line)
				continue
			}
			m.Line = bytes.TrimRight(line, "\n")
			if len(m.ID) > 0 && string(m.ID) != "null" && m.Method == "" {
				p.mu.Lock()
				ch := p.waiting[string(m.ID)]
				delete(p.waiting, string(m.ID))
				p.mu.Unlock()
				if ch == nil {
					if !p.quiet {
						p.t.Errorf("answer to an unknown request: %s", m.Line)
					}
					continue
				}
				ch <- m
			} else if p.quiet {
				select {
				case p.notes <- m:
				default:
				}
			} else {
				p.notes <- m
			}
		}
		if err != nil {
			return
		}
	}
}

// send writes a request and returns the channel its answer will arrive on.
func (p *peer) send(method, params string) <-chan message {
	p.mu.Lock()
	p.nextID++
	id := fmt.Sprint(p.nextID)
	ch := make(chan message, 1)
	p.waiting[id] = ch
	p.mu.Unlock()
	req := `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `"`
	if params != "" {
		req += `,"params":` + params
	}
	p.writeLine(req + "}")
	return ch
}

func (p *peer) writeLine(line string) {
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		p.t.Fatalf("writing to the peer: %v", err)
	}
}

// call sends a request and waits for its answer.
func (p *peer) call(method, params string) message {
	p.t.Helper()
	return p.wait(p.send(method, params), method)
}

func (p *peer) wait(ch <-chan message, what string) message {
	p.t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(20 * time.Second):
		p.t.Fatalf("no answer to %s within 20s; stderr:\n%s", what, p.stderr)
		return message{}
	}
}

// initialize performs the handshake as a client named clientName.
func (p *peer) initialize(clientName string) message {
	p.t.Helper()
	m := p.call("initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"`+clientName+`","version":"1.0"}}`)
	if m.Error != nil {
		p.t.Fatalf("initialize failed: %s", m.Line)
	}
	p.writeLine(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return m
}

// note waits for a notification with the given method.
func (p *peer) note(method string, within time.Duration) bool {
	deadline := time.After(within)
	for {
		select {
		case m := <-p.notes:
			if m.Method == method {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

// tools returns the tool definitions of a tools/list answer by name, as raw bytes.
func tools(t *testing.T, m message) (map[string]json.RawMessage, []string) {
	t.Helper()
	var list struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(m.Result, &list); err != nil {
		t.Fatalf("tools/list answer %s: %v", m.Line, err)
	}
	byName := map[string]json.RawMessage{}
	var names []string
	for _, def := range list.Tools {
		var d struct {
			Name string `json:"name"`
		}
		json.Unmarshal(def, &d)
		byName[d.Name] = def
		names = append(names, d.Name)
	}
	return byName, names
}

// pidOf is the process ID of the server behind the fixture tool name (its pid tool).
func pidOf(agg *peer, name string) int {
	m := agg.call("tools/call", `{"name":"`+name+`"}`)
	var res struct {
		S struct {
			PID int `json:"pid"`
		} `json:"structuredContent"`
	}
	json.Unmarshal(m.Result, &res)
	return res.S.PID
}

// testTimeout is how long waitFor waits.
const testTimeout = 10 * time.Second

// waitFor polls cond until it holds, failing the test after testTimeout (the peers' stderr
// follows the failure: startPeer).
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

// waitSaid waits until p's stderr holds text at least n times: what a server says (the
// fixture's "fixture: sleep of N ms started", when a call has reached it), which the
// aggregator forwards after the server's key, or what the aggregator says itself.
func waitSaid(t *testing.T, p *peer, text string, n int) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for strings.Count(p.stderr.String(), text) < n {
		if time.Now().After(deadline) {
			t.Fatalf("stderr does not say %q %d times after %v:\n%s", text, n, testTimeout, p.stderr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitTool waits until tools/list has (or lacks) the tool name.
func waitTool(t *testing.T, agg *peer, name string, present bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, names := tools(t, agg.call("tools/list", ""))
		has := false
		for _, n := range names {
			has = has || n == name
		}
		if has == present {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools/list: %q present = %v after 10s, want %v; stderr:\n%s", name, has, present, agg.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitLarge waits for the answer of the fixture's big tool on server key, for as long as the
// aggregator runs: how long a large answer takes (64 MiB under the race detector, on a loaded
// machine) is no budget a test can fix. The call must reach the server (it says so) within
// testTimeout; then the test fails only when the aggregator ends without answering, or when
// the test's own deadline (go test -timeout) is near, saying whether the server had written
// all of its answer.
func (p *peer) waitLarge(ch <-chan message, key string) message {
	p.t.Helper()
	waitSaid(p.t, p, "["+key+"] fixture: big: writing", 1)
	return p.waitRunning(ch, key+":big", func() string {
		written := strings.Contains(p.stderr.String(), "["+key+"] fixture: big:") && strings.Contains(p.stderr.String(), "bytes written")
		return fmt.Sprintf(" (the server had written it all: %v)", written)
	})
}

// waitRunning waits for the answer on ch for as long as the aggregator runs, with no budget of
// its own (for large messages); the test fails when the aggregator ends without answering, or
// when the test's own deadline is near, with what more says.
func (p *peer) waitRunning(ch <-chan message, what string, more func() string) message {
	p.t.Helper()
	var near <-chan time.Time
	if deadline, ok := p.t.Deadline(); ok {
		near = time.After(time.Until(deadline) - 30*time.Second)
	}
	select {
	case m := <-ch:
		return m
	case <-p.done:
		select {
		case m := <-ch: // the answer was the last line
			return m
		default:
		}
		p.t.Fatalf("the aggregator ended without answering %s; stderr:\n%s", what, p.stderr)
	case <-near:
		p.t.Fatalf("no answer to %s by the test's deadline%s; stderr:\n%s", what, more(), p.stderr)
	}
	return message{}
}
