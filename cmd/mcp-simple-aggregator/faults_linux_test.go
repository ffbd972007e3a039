package main

// The fault suite (make faults): real processes only. Every case states what must hold
// afterwards: the aggregator still answers, the other server still works, no message is lost
// or misrouted (the peer fails the test on any answer to a request it did not make or did not
// expect twice), and no process is left behind (every server runs with a FAULT_TAG in its
// environment, which its descendants inherit; /proc is searched for it at the end).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// tagged returns a server entry running the fixture with args, tagged with tag.
func tagged(tag string, args ...string) string {
	a, _ := json.Marshal(append([]string{}, args...))
	return `{"command": "$FIXTURE", "args": ` + string(a) + `, "env": {"FAULT_TAG": "` + tag + `"}}`
}

func newTag(t *testing.T) string {
	return fmt.Sprintf("%s-%d-%d", strings.NewReplacer("/", "-", " ", "-").Replace(t.Name()), os.Getpid(), time.Now().UnixNano())
}

// taggedProcs lists the live processes whose environment holds FAULT_TAG=tag.
func taggedProcs(tag string) []int {
	var out []int
	needle := []byte("FAULT_TAG=" + tag + "\x00")
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(env, needle) && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// noneLeft fails the test if a tagged process is still alive after a few seconds.
func noneLeft(t *testing.T, tag string) {
	t.Helper()
	deadline := time.Now().Add(6 * time.Second)
	for {
		left := taggedProcs(tag)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, pid := range left {
				t.Errorf("process %d (%s) outlived the aggregator", pid, cmdline(pid))
				syscall.Kill(pid, syscall.SIGKILL)
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// endSession closes the aggregator's input, waits for it to exit and checks that nothing
// tagged with tag survives.
func endSession(t *testing.T, agg *peer, tag string) {
	t.Helper()
	endSessionWithin(t, agg, tag, 0, "")
}

// endSessionWithin is endSession that also fails when the exit takes longer than limit
// (when limit > 0), saying why that would be wrong.
func endSessionWithin(t *testing.T, agg *peer, tag string, limit time.Duration, why string) {
	t.Helper()
	start := time.Now()
	agg.in.Close()
	if !exits(agg.cmd.Process.Pid, 20*time.Second) {
		t.Errorf("the aggregator did not exit within 20s of the end of its input")
	}
	if d := time.Since(start); limit > 0 && d > limit {
		t.Errorf("the end of input took %v: %s", d, why)
	}
	noneLeft(t, tag)
}

// Child faults during start-up: the aggregator stops with an error that names the server and
// says what happened, within the start-up timeout, and leaves nothing behind; faults that do
// not prevent serving are survived.
func TestFaultChildAtStartup(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		want  string // in the error; "" when serving must work
		flags []string
	}{
		{"exit", []string{"-exit-at-start", "3"}, "exited with status 3", nil},
		{"signal", []string{"-signal-at-start"}, "was killed by a signal (killed)", nil},
		{"hang", []string{"-hang-at-start"}, "did not", []string{"--startup-timeout", "1s"}},
		{"close-stdout", []string{"-close-stdout-at-start"}, `"victim"`, []string{"--startup-timeout", "2s"}},
		{"ignore-eof-and-sigterm", []string{"-hang-at-start", "-stubborn"}, "did not", []string{"--startup-timeout", "1s"}},
		{"grandchild", []string{"-hang-at-start", "-grandchild"}, "did not", []string{"--startup-timeout", "1s"}},
		{"garbage", []string{"-garbage"}, "", nil},
		{"flood-stderr", []string{"-flood-stderr"}, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tag := newTag(t)
			path := writeConfig(t, `{"mcpServers": {"victim": `+tagged(tag, tc.args...)+`, "healthy": `+tagged(tag)+`}}`)
			if tc.want == "" {
				agg := startPeer(t, aggBinary, append([]string{"--config", path}, tc.flags...)...)
				agg.initialize("test")
				for _, name := range []string{"victim:echo", "healthy:echo"} {
					if m := agg.call("tools/call", `{"name":"`+name+`","arguments":{"k":1}}`); !strings.Contains(string(m.Result), `"structuredContent":{"k":1}`) {
						t.Errorf("%s: %s", name, m.Line)
					}
				}
				endSession(t, agg, tag)
				return
			}
			// Beside a healthy server, the failed one is reported and stays down; the healthy one
			// serves (FR-009).
			start := time.Now()
			agg := startPeer(t, aggBinary, append([]string{"--config", path}, tc.flags...)...)
			agg.initialize("test")
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("starting took %v", d)
			}
			if m := agg.call("tools/call", `{"name":"healthy:echo","arguments":{"k":1}}`); !strings.Contains(string(m.Result), `"structuredContent":{"k":1}`) {
				t.Errorf("the healthy server: %s", m.Line)
			}
			if m := agg.call("tools/call", `{"name":"victim:echo"}`); !strings.Contains(string(m.Error), "Unknown tool: victim:echo") {
				t.Errorf("the failed server's tool: %s", m.Line)
			}
			if !agg.note("notifications/message", 5*time.Second) {
				t.Errorf("the client was not told of the failure")
			}
			if s := agg.stderr.String(); !strings.Contains(s, `server "victim" could not start and stays down`) || !strings.Contains(s, tc.want) {
				t.Errorf("stderr does not name the server and say %q:\n%s", tc.want, s)
			}
			endSession(t, agg, tag)

			// Alone, it fails the start-up.
			alone := writeConfig(t, `{"mcpServers": {"victim": `+tagged(tag, tc.args...)+`}}`)
			cmd := exec.Command(aggBinary, append([]string{"--config", alone}, tc.flags...)...)
			cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start = time.Now()
			if err := cmd.Run(); err == nil {
				t.Fatalf("the aggregator started although its only server failed; stderr:\n%s", &stderr)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("failing took %v", d)
			}
			if !strings.Contains(stderr.String(), "no server could start") || !strings.Contains(stderr.String(), `"victim"`) || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("the error does not name the server and say %q:\n%s", tc.want, &stderr)
			}
			noneLeft(t, tag)
		})
	}
}

// Child faults in the middle of a call: the call gets an answer (the child's, or an error
// naming the server), the other server and the aggregator keep serving, and the end of the
// session leaves nothing behind.
func TestFaultChildMidCall(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		tool  string // called on the victim
		args2 string
		want  string // in the answer
	}{
		{"exit", nil, "crash", `{}`, `server \"victim\" exited with status 3`},
		{"signal", []string{"-crash-signal"}, "crash", `{}`, `server \"victim\" was killed by a signal (killed)`},
		{"close-stdout", nil, "close_stdout", `{}`, `server \"victim\"`},
		{"grandchild-holds-pipes", []string{"-grandchild"}, "crash", `{}`, `server \"victim\" exited with status 3`},
		{"garbage", []string{"-garbage"}, "echo", `{"k":1}`, `"structuredContent":{"k":1}`},
		{"answer-twice", []string{"-twice"}, "echo", `{"k":1}`, `"structuredContent":{"k":1}`},
		{"unknown-id", []string{"-unknown-id"}, "echo", `{"k":1}`, `"structuredContent":{"k":1}`},
		{"64-MiB", nil, "big", `{"bytes":67108864}`, `"text":"xxxxxxxx`},
		{"flood-stderr", []string{"-flood-stderr"}, "echo", `{"k":1}`, `"structuredContent":{"k":1}`},
		{"ignore-eof-and-sigterm", []string{"-stubborn"}, "echo", `{"k":1}`, `"structuredContent":{"k":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tag := newTag(t)
			agg := startAggregator(t, `{"mcpServers": {"victim": `+tagged(tag, tc.args...)+`, "healthy": `+tagged(tag)+`}}`)
			agg.initialize("test")
			ch := agg.send("tools/call", `{"name":"victim:`+tc.tool+`","arguments":`+tc.args2+`}`)
			var m message
			if tc.tool == "big" {
				m = agg.waitLarge(ch, "victim")
			} else {
				m = agg.wait(ch, "victim:"+tc.tool)
			}
			if !strings.Contains(string(m.Line), tc.want) {
				t.Errorf("victim:%s answered %.300s; want %s", tc.tool, m.Line, tc.want)
			}
			// A second answer fails the test whenever it comes (peer.read: an answer to no
			// request), up to the end of the session, which reads all the aggregator wrote.
			if m := agg.call("tools/call", `{"name":"healthy:echo","arguments":{"still":1}}`); !strings.Contains(string(m.Result), `{"still":1}`) {
				t.Errorf("the other server after the fault: %s", m.Line)
			}
			if m := agg.call("ping", `{}`); m.Error != nil {
				t.Errorf("ping after the fault: %s", m.Line)
			}
			endSession(t, agg, tag)
		})
	}
}

// A call that hangs forever is cancelled by the client; nothing else waits for it.
func TestFaultChildHangsMidCall(t *testing.T) {
	tag := newTag(t)
	agg := startAggregator(t, `{"mcpServers": {"victim": `+tagged(tag)+`, "healthy": `+tagged(tag)+`}}`)
	agg.initialize("test")
	agg.send("tools/call", `{"name":"victim:hang","arguments":{}}`) // never answered
	agg.mu.Lock()
	id := agg.nextID
	agg.mu.Unlock()
	if m := agg.call("tools/call", `{"name":"victim:echo","arguments":{"k":1}}`); !strings.Contains(string(m.Result), `{"k":1}`) {
		t.Errorf("the hanging server's other tools: %s", m.Line)
	}
	agg.writeLine(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d}}`, id))
	if m := agg.call("tools/call", `{"name":"healthy:echo","arguments":{"k":2}}`); !strings.Contains(string(m.Result), `{"k":2}`) {
		t.Errorf("the other server: %s", m.Line)
	}
	endSessionWithin(t, agg, tag, 4*time.Second, "the cancelled call was waited for")
}

// Client faults: every bad input gets its answer and the session goes on.
func TestFaultClientInput(t *testing.T) {
	tag := newTag(t)
	agg := startAggregator(t, `{"mcpServers": {"s": `+tagged(tag)+`}}`)
	// A request before initialize gets an answer, and initialize still works afterwards.
	if m := agg.call("tools/list", `{}`); m.Line == nil {
		t.Error("no answer to tools/list before initialize")
	}
	agg.initialize("test")
	for _, line := range []string{
		`{not json`,
		`{"jsonrpc":"2.0","id":77,"method":"tools/ca`, // truncated
		`[1,2`,
	} {
		agg.writeLine(line)
		select {
		case m := <-agg.notes:
			if !strings.Contains(string(m.Error), `"code":-32700`) {
				t.Errorf("%q answered with %s, want -32700", line, m.Line)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%q got no answer", line)
		}
	}
	for _, tc := range []struct{ method, params, want string }{
		{"no/such/method", `{}`, `"code":-32601`},
		{"tools/call", `{"name":5}`, `"error"`},
		{"tools/call", `{"name":"s:echo","arguments":"not an object"}`, `"jsonrpc"`}, // the child's answer, whatever it is
		{"tools/call", `[]`, `"error"`},
		{"tools/list", `{"cursor":7}`, `"error"`},
		{"tools/call", `{"name":"s:nope"}`, `"code":-32602`},
	} {
		if m := agg.call(tc.method, tc.params); !strings.Contains(string(m.Line), tc.want) {
			t.Errorf("%s %s answered with %s, want %s", tc.method, tc.params, m.Line, tc.want)
		}
	}
	if m := agg.call("tools/call", `{"name":"s:echo","arguments":{"after":"bad input"}}`); !strings.Contains(string(m.Result), `{"after":"bad input"}`) {
		t.Errorf("a call after bad input: %s", m.Line)
	}
	endSession(t, agg, tag)
}

// 10,000 requests in flight at once all get their own answers.
func TestFaultTenThousandInFlight(t *testing.T) {
	tag := newTag(t)
	agg := startAggregator(t, `{"mcpServers": {"a": `+tagged(tag)+`, "b": `+tagged(tag)+`}}`)
	agg.initialize("test")
	const n = 10000
	chans := make([]<-chan message, n)
	var wmu sync.Mutex
	for i := range n {
		wmu.Lock()
		chans[i] = agg.send("tools/call", fmt.Sprintf(`{"name":"%s:echo","arguments":{"i":%d}}`, []string{"a", "b"}[i%2], i))
		wmu.Unlock()
	}
	for i, ch := range chans {
		m := agg.wait(ch, "call "+strconv.Itoa(i))
		if want := fmt.Sprintf(`"structuredContent":{"i":%d}`, i); !strings.Contains(string(m.Result), want) {
			t.Fatalf("call %d answered with %.200s", i, m.Line)
		}
	}
	endSession(t, agg, tag)
}

// A storm of cancellations: every cancelled call reaches the child as cancelled, nothing
// answers a cancelled call late, and the session goes on.
func TestFaultCancellationStorm(t *testing.T) {
	tag := newTag(t)
	agg := startAggregator(t, `{"mcpServers": {"s": `+tagged(tag)+`}}`)
	agg.initialize("test")
	const n = 500
	first := 0
	for i := range n {
		agg.send("tools/call", `{"name":"s:sleep","arguments":{"ms":60000}}`)
		agg.mu.Lock()
		if i == 0 {
			first = agg.nextID
		}
		agg.mu.Unlock()
	}
	for id := first; id < first+n; id++ {
		agg.writeLine(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%d,"reason":"storm"}}`, id))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := agg.call("tools/call", `{"name":"s:cancelled","arguments":{}}`)
		var res struct {
			StructuredContent struct{ IDs []json.RawMessage } `json:"structuredContent"`
		}
		json.Unmarshal(m.Result, &res)
		if len(res.StructuredContent.IDs) == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child saw %d of %d cancellations", len(res.StructuredContent.IDs), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	endSessionWithin(t, agg, tag, 4*time.Second, "cancelled calls were waited for")
}

// The client closes its input in the middle of a call: the answer still arrives, then the
// aggregator exits.
func TestFaultStdinClosedMidCall(t *testing.T) {
	tag := newTag(t)
	agg := startAggregator(t, `{"mcpServers": {"s": `+tagged(tag)+`}}`)
	agg.initialize("test")
	ch := agg.send("tools/call", `{"name":"s:sleep","arguments":{"ms":300}}`)
	agg.in.Close()
	if m := agg.wait(ch, "the call in flight"); !strings.Contains(string(m.Result), "slept 300 ms") {
		t.Errorf("the call in flight answered %s", m.Line)
	}
	agg.waitExit()
	noneLeft(t, tag)
}

// The aggregator is killed at random moments under load (seeded: the seed is logged):
// afterwards no server, grandchild or watchdog survives.
func TestFaultKilledUnderLoad(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FAULT_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("FAULT_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGKILL} {
		for round := range 2 {
			t.Run(fmt.Sprintf("%v-%d", sig, round), func(t *testing.T) {
				tag := newTag(t)
				path := writeConfig(t, `{"mcpServers": {"a": `+tagged(tag, "-grandchild")+`, "b": `+tagged(tag, "-stubborn")+`}}`)
				cmd := exec.Command(aggBinary, "--config", path)
				in, _ := cmd.StdinPipe()
				out, _ := cmd.StdoutPipe()
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				// Quiet: the load's answers are not waited for, and the signal cuts them off.
				p := &peer{t: t, cmd: cmd, in: in, stderr: new(lockedBuffer), waiting: map[string]chan message{}, notes: make(chan message, 1000), done: make(chan struct{}), quiet: true}
				go p.read(out)
				p.initialize("test")
				family := descendants(cmd.Process.Pid)
				stop := make(chan struct{})
				go func() { // load: calls without waiting for their answers
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						line := fmt.Sprintf(`{"jsonrpc":"2.0","id":"load-%d","method":"tools/call","params":{"name":"%s:echo","arguments":{"i":%d}}}`+"\n", i, []string{"a", "b"}[i%2], i)
						if _, err := in.Write([]byte(line)); err != nil {
							return
						}
					}
				}()
				time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
				cmd.Process.Signal(sig)
				exited := make(chan struct{})
				go func() { cmd.Wait(); close(exited) }()
				select {
				case <-exited:
				case <-time.After(15 * time.Second):
					cmd.Process.Kill()
					t.Fatal("the aggregator did not exit within 15s of the signal")
				}
				close(stop)
				in.Close()
				noneLeft(t, tag)
				deadline := time.Now().Add(6 * time.Second)
				for _, pid := range family { // the watchdog too
					for alive(pid) {
						if time.Now().After(deadline) {
							t.Fatalf("process %d (%s) outlived the aggregator", pid, cmdline(pid))
						}
						time.Sleep(20 * time.Millisecond)
					}
				}
			})
		}
	}
}

// A server that answers requests it was never sent (here: the IDs under which the aggregator
// forwards other servers' calls) completes nothing: traffic never crosses between servers.
func TestFaultServerForgesAnotherServersAnswers(t *testing.T) {
	tag := newTag(t)
	record := filepath.Join(t.TempDir(), "calls")
	agg := startAggregator(t, `{"mcpServers": {"honest": `+tagged(tag, "-record", record)+`, "thief": `+tagged(tag, "-forge-ids", "50")+`}}`)
	agg.initialize("test")
	var chans []<-chan message
	for range 5 {
		chans = append(chans, agg.send("tools/call", `{"name":"honest:sleep","arguments":{"ms":500}}`))
	}
	waitFor(t, "the five calls at the honest server (its -record file)", func() bool {
		calls, _ := os.ReadFile(record)
		return strings.Count(string(calls), "sleep ") == 5
	})
	// Its own call is among the IDs it forges: the first answer to it counts, whichever.
	if m := agg.call("tools/call", `{"name":"thief:echo","arguments":{"k":1}}`); m.Result == nil {
		t.Errorf("thief:echo answered %s", m.Line)
	}
	for _, ch := range chans {
		if m := agg.wait(ch, "honest:sleep"); !strings.Contains(string(m.Result), "slept 500 ms") {
			t.Errorf("a call to the honest server was answered by the other: %s", m.Line)
		}
	}
	endSession(t, agg, tag)
}

// Secrets from "env" are never logged, also not with --debug; their names may be.
func TestFaultSecretsNeverLogged(t *testing.T) {
	tag := newTag(t)
	t.Setenv("FAULT_SECRET", "s3cret-from-the-environment")
	agg := startAggregator(t, `{"mcpServers": {"s": {"command": "$FIXTURE", "env": {"FAULT_TAG": "`+tag+`", "API_TOKEN": "s3cret-literal-value", "OTHER": "${FAULT_SECRET}"}}}}`, "--debug")
	agg.initialize("test")
	if m := agg.call("tools/call", `{"name":"s:getenv","arguments":{"name":"API_TOKEN"}}`); !strings.Contains(string(m.Result), "s3cret-literal-value") {
		t.Errorf("the server did not get its variable: %s", m.Line)
	}
	agg.in.Close()
	agg.waitExit()
	logged := agg.stderr.String()
	for _, secret := range []string{"s3cret-literal-value", "s3cret-from-the-environment"} {
		if strings.Contains(logged, secret) {
			t.Errorf("stderr with --debug shows the value %q:\n%s", secret, logged)
		}
	}
	noneLeft(t, tag)
}

// Config values never meet a shell: metacharacters reach the server as they are written.
func TestFaultNoShell(t *testing.T) {
	tag := newTag(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	line := "; touch " + marker + " | touch " + marker + " `touch " + marker + "` $(touch " + marker + ") && touch " + marker
	agg := startAggregator(t, `{"mcpServers": {"s": `+tagged(tag, "-stderr", line)+`}}`)
	agg.initialize("test")
	if m := agg.call("ping", `{}`); m.Error != nil {
		t.Errorf("ping: %s", m.Line)
	}
	agg.in.Close()
	agg.waitExit()
	if _, err := os.Stat(marker); err == nil {
		t.Error("a shell ran a command from the configuration")
	}
	if !strings.Contains(agg.stderr.String(), "[s] "+line) {
		t.Errorf("the argument did not reach the server as written; stderr:\n%s", agg.stderr)
	}
	noneLeft(t, tag)
}

// Soak: a seeded random mix of calls, list requests and server crashes from several callers
// at once, for FAULT_SOAK (default 5s); every answer from a live server is compared byte for
// byte with what the same fixture answers directly. Run under -race by make faults.
func TestFaultSoak(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("FAULT_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	length := 5 * time.Second
	if d, err := time.ParseDuration(os.Getenv("FAULT_SOAK")); err == nil {
		length = d
	}
	t.Logf("FAULT_SEED=%d FAULT_SOAK=%v", seed, length)
	tag := newTag(t)
	keys := []string{"a", "b", "c", "d"}
	var entries []string
	for _, k := range keys {
		entries = append(entries, `"`+k+`": `+tagged(tag))
	}
	agg := startAggregator(t, `{"mcpServers": {`+strings.Join(entries, ",")+`}}`, "--max-restarts", "0")
	agg.initialize("test")
	direct := startPeer(t, fixtureBin)
	direct.initialize("test")

	var mu sync.Mutex
	// A server is crashing from the moment its crash call is sent until the call's answer says
	// it exited: calls sent meanwhile may still be answered by it. Once crashed, every call
	// to it must fail.
	crashed, crashing := map[string]bool{}, map[string]bool{}
	crashes := 0
	end := time.Now().Add(length)
	var wg sync.WaitGroup
	var calls, lists atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for time.Now().Before(end) && !t.Failed() {
				key := keys[rng.IntN(len(keys))]
				mu.Lock()
				down, uncertain := crashed[key], crashing[key] && !crashed[key]
				mu.Unlock()
				switch r := rng.IntN(100); {
				case r < 2 && w == 0: // crash a server (at most two of the four)
					mu.Lock()
					if crashing[key] || crashes >= 2 {
						mu.Unlock()
						continue
					}
					crashes++
					crashing[key] = true
					mu.Unlock()
					if m := agg.call("tools/call", `{"name":"`+key+`:crash","arguments":{}}`); !strings.Contains(string(m.Error), `server \"`+key+`\" exited with status 3`) {
						t.Errorf("crash of %s answered %s", key, m.Line)
					}
					mu.Lock()
					crashed[key] = true
					mu.Unlock()
				case r < 20:
					m := agg.call("tools/list", `{}`)
					_, names := tools(t, m)
					seen := map[string]bool{}
					for _, n := range names {
						k, _, _ := strings.Cut(n, ":")
						seen[k] = true
					}
					mu.Lock()
					for _, k := range keys {
						if !crashing[k] && !seen[k] {
							t.Errorf("tools/list lacks the live server %s: %v", k, names)
						}
					}
					mu.Unlock()
					lists.Add(1)
				default:
					tool := []string{"echo", "echo", "odd", "fail"}[rng.IntN(4)]
					args := fmt.Sprintf(`{"n":%d,"s":"%x","nested":{"f":%d.5,"l":[%d, true, null]}}`, rng.Int64(), rng.Uint64(), rng.IntN(1000), rng.IntN(10))
					m := agg.call("tools/call", `{"name":"`+key+`:`+tool+`","arguments":`+args+`}`)
					if uncertain {
						continue // answered by the server or failed by its crash: both are right
					}
					if down {
						if m.Error == nil {
							t.Errorf("a call to the crashed server %s succeeded: %s", key, m.Line)
						}
						continue
					}
					d := direct.call("tools/call", `{"name":"`+tool+`","arguments":`+args+`}`)
					mu.Lock()
					nowDown := crashing[key]
					mu.Unlock()
					if !nowDown && (!bytes.Equal(m.Result, d.Result) || !bytes.Equal(m.Error, d.Error)) {
						t.Errorf("%s:%s differs from a direct call:\naggregated %s\n    direct %s", key, tool, m.Line, d.Line)
					}
					calls.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d calls and %d lists checked, %d servers crashed", calls.Load(), lists.Load(), crashes)
	endSession(t, agg, tag)
}
