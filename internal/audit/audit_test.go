package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// warnings collects what a Log warns of; Warn may be called from the log's goroutines.
type warnings struct {
	mu   sync.Mutex
	msgs []string
	c    chan string
}

func newWarnings() *warnings { return &warnings{c: make(chan string, 100)} }

func (w *warnings) warn(msg string) {
	w.mu.Lock()
	w.msgs = append(w.msgs, msg)
	w.mu.Unlock()
	w.c <- msg
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

// at is a fixed time in a zone of its own, so that the lines are the same everywhere.
func at(sec int) time.Time {
	return time.Date(2026, 11, 25, 14, 3, sec, 123_456_789, time.FixedZone("CET", 3600))
}

// events writes one event of each kind and outcome.
func events(l *Log) {
	l.Server(Server{Time: at(0), Server: "github", Action: ServerStart, PID: 4242})
	l.Definition(Definition{Time: at(1), Server: "github", Kind: "tool", Name: "delete_repo", Action: DefinitionWithheld, Reason: "differs from the lock: description changed"})
	l.Call(Call{Time: at(2), Client: "claude-code", Server: "github", Method: "tools/call", Tool: "create_issue", Duration: 12345678 * time.Nanosecond,
		Outcome: Result, RequestBytes: 212, ResponseBytes: 1024,
		Arguments: json.RawMessage(`{"owner": "ada", "repo": "notes", "title": "<b>Bug</b>"}`), Result: json.RawMessage(`{"content":[{"type":"text","text":"created #7"}]}`)})
	l.Call(Call{Time: at(3), Client: "claude-code", Server: "github", Method: "tools/call", Tool: "get_file", Duration: time.Millisecond,
		Outcome: IsError, RequestBytes: 100, ResponseBytes: 80, Arguments: json.RawMessage(`{"path":"x"}`), Result: json.RawMessage(`{"content":[],"isError":true}`)})
	l.Call(Call{Time: at(4), Client: "claude-code", Server: "github", Method: "tools/call", Tool: "nope", Duration: 50 * time.Microsecond,
		Outcome: Error, ErrorCode: -32602, RequestBytes: 90, ResponseBytes: 120, Result: json.RawMessage(`{"code":-32602,"message":"Unknown tool: github:nope"}`)})
	l.Call(Call{Time: at(5), Client: "claude-code", Server: "notes", Method: "prompts/get", Prompt: "summarize", Duration: 2 * time.Second,
		Outcome: Cancelled, RequestBytes: 60, Arguments: json.RawMessage(`{"style":"short"}`)})
	l.Call(Call{Time: at(6), Client: "claude-code", Server: "notes", Method: "resources/read", URI: "notes://all", Duration: 3 * time.Millisecond,
		Outcome: Result, RequestBytes: 70, ResponseBytes: 300000, Result: json.RawMessage(`"` + strings.Repeat("x", maxBody) + `"`)})
	l.Call(Call{Time: at(7), Server: "raw", Method: "tools/call", Tool: "echo", Outcome: Result, Arguments: json.RawMessage(`{"bad": `)})
	l.Server(Server{Time: at(8), Server: "github", Action: ServerCrash, PID: 4242, Detail: "exited with status 2"})
	l.Server(Server{Time: at(9), Server: "github", Action: ServerRestart, PID: 4250})
	l.Server(Server{Time: at(10), Server: "github", Action: ServerStop, PID: 4250})
}

// TestLines: the lines of each event, without and with bodies (testdata/*.golden.jsonl;
// go test -update rewrites them).
func TestLines(t *testing.T) {
	for _, bodies := range []bool{false, true} {
		name := "lines.golden.jsonl"
		if bodies {
			name = "lines-bodies.golden.jsonl"
		}
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			w := newWarnings()
			l, err := Open(path, &Options{Bodies: bodies, Warn: w.warn})
			if err != nil {
				t.Fatal(err)
			}
			if l.Bodies() != bodies {
				t.Errorf("Bodies() = %v", l.Bodies())
			}
			events(l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for i, line := range bytes.Split(bytes.TrimSuffix(got, []byte("\n")), []byte("\n")) {
				if !json.Valid(line) {
					t.Errorf("line %d is not JSON: %s", i+1, line)
				}
			}
			golden := filepath.Join("testdata", name)
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("lines (-%s +got); go test -update rewrites it:\n%s", golden, diff)
			}
			if s := l.Stats(); s != (Stats{Written: 11}) {
				t.Errorf("stats %+v", s)
			}
			if ws := w.all(); ws != nil {
				t.Errorf("warnings: %q", ws)
			}
		})
	}
}

// TestNilLog: without --audit-log the log is nil, and costs nothing.
func TestNilLog(t *testing.T) {
	var l *Log
	l.Call(Call{})
	l.Definition(Definition{})
	l.Server(Server{})
	if l.Bodies() || l.Stats() != (Stats{}) || l.Close() != nil {
		t.Error("a nil log does something")
	}
	if n := testing.AllocsPerRun(100, func() { l.Call(Call{Server: "s", Method: "tools/call", Tool: "t"}) }); n != 0 {
		t.Errorf("a call to a nil log allocates %v times", n)
	}
}

// TestModes: the file is created 0600 whatever the umask; one that others may read is
// appended to as it is, with one warning.
func TestModes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows has no such modes")
	}
	dir := t.TempDir()
	defer setUmask(0)()
	path := filepath.Join(dir, "new.jsonl")
	l, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Server(Server{Server: "a", Action: ServerStart})
	l.Close()
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Errorf("new file: mode %#o, want 0600", info.Mode().Perm())
	}

	path = filepath.Join(dir, "shared.jsonl")
	if err := os.WriteFile(path, []byte(`{"event":"before"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := newWarnings()
	l, err = Open(path, &Options{Warn: w.warn})
	if err != nil {
		t.Fatal(err)
	}
	l.Server(Server{Server: "a", Action: ServerStart})
	l.Close()
	if ws := w.all(); len(ws) != 1 || !strings.Contains(ws[0], "mode 0644") || !strings.Contains(ws[0], "chmod 600 "+path) {
		t.Errorf("warnings %q, want one that names the mode and the way out", ws)
	}
	data, _ := os.ReadFile(path)
	if !bytes.HasPrefix(data, []byte(`{"event":"before"}`+"\n")) || bytes.Count(data, []byte("\n")) != 2 {
		t.Errorf("not appended to:\n%s", data)
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o644 {
		t.Errorf("the user's mode was changed to %#o", info.Mode().Perm())
	}
}

// TestRotation: the log never takes more than (MaxBackups + 1) files of MaxMegabytes, each
// 0600 and made of whole lines, and the newest events are in the file itself.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	l, err := Open(path, &Options{MaxMegabytes: 1, MaxBackups: 2, Bodies: true, Queue: 10000})
	if err != nil {
		t.Fatal(err)
	}
	arg := json.RawMessage(`{"text":"` + strings.Repeat("a", 1000) + `"}`)
	const n = 5000 // about 5 MiB
	for i := range n {
		l.Call(Call{Server: "s", Method: "tools/call", Tool: fmt.Sprint("t", i), Outcome: Result, Arguments: arg})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if s := l.Stats(); s.Written != n {
		t.Fatalf("stats %+v, want %d written (the queue holds them all)", s, n)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Errorf("%d files, want the log and 2 rotated: %v", len(entries), entries)
	}
	for _, e := range entries {
		info, _ := e.Info()
		if info.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %#o, want 0600", e.Name(), info.Mode().Perm())
		}
		if info.Size() > 1<<20 {
			t.Errorf("%s: %d bytes, more than 1 MiB", e.Name(), info.Size())
		}
		if e.Name() != "audit.jsonl" && (!strings.HasPrefix(e.Name(), "audit-") || !strings.HasSuffix(e.Name(), ".jsonl")) {
			t.Errorf("rotated file %s is not named audit-<time>.jsonl", e.Name())
		}
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		for i, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
			if !json.Valid(line) {
				t.Fatalf("%s: line %d is not JSON (a line was cut): %.80s", e.Name(), i+1, line)
			}
		}
	}
	data, _ := os.ReadFile(path)
	if !bytes.Contains(data, []byte(fmt.Sprintf(`"tool":"t%d"`, n-1))) {
		t.Error("the last event is not in the log file")
	}
}

// TestCannotOpen: a file that cannot be written, or a directory that does not exist, is
// one error at Open, and nothing is moved aside or created.
func TestCannotOpen(t *testing.T) {
	dir := t.TempDir()
	_, err := Open(filepath.Join(dir, "no", "such", "dir", "audit.jsonl"), nil)
	if !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "audit log: ") {
		t.Errorf("missing directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "no")); !errors.Is(err, fs.ErrNotExist) {
		t.Error("a directory was created")
	}
	if _, err := Open(dir, nil); err == nil {
		t.Error("a directory as the log: no error")
	}

	path := filepath.Join(dir, "audit.jsonl")
	if err := os.WriteFile(path, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	readOnly(t, path)
	_, err = Open(path, nil)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("read-only file: %v, want an error naming it", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("files beside the read-only log: %v", entries)
	}
}

// TestConcurrentCalls: callers from many goroutines (run with -race), every event written
// once, whole.
func TestConcurrentCalls(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(path, &Options{Queue: 8192})
	if err != nil {
		t.Fatal(err)
	}
	const callers, each = 8, 500
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				l.Call(Call{Server: fmt.Sprint("s", c), Method: "tools/call", Tool: fmt.Sprint("t", i), Outcome: Result})
			}
		})
	}
	wg.Wait()
	l.Close()
	l.Call(Call{Server: "late"}) // after Close: dropped, no panic
	f, _ := os.Open(path)
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c struct{ Server, Tool string }
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if seen[c.Server+c.Tool] {
			t.Errorf("%s %s written twice", c.Server, c.Tool)
		}
		seen[c.Server+c.Tool] = true
	}
	if len(seen) != callers*each || l.Stats().Written != callers*each {
		t.Errorf("%d events in the file, stats %+v, want %d", len(seen), l.Stats(), callers*each)
	}
}

// TestSymlink: a symlinked log stays a link, and is written where it points.
func TestSymlink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symlinks need privileges on Windows")
	}
	dir := t.TempDir()
	target, link := filepath.Join(dir, "real.jsonl"), filepath.Join(dir, "audit.jsonl")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	l, err := Open(link, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.Server(Server{Server: "a", Action: ServerStart})
	l.Close()
	if info, err := os.Lstat(link); err != nil || info.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link is gone: %v %v", info, err)
	}
	if data, _ := os.ReadFile(target); !bytes.Contains(data, []byte(`"action":"start"`)) {
		t.Errorf("the target holds %q", data)
	}
}

// BenchmarkCall is what a call costs its caller with --audit-log (without bodies): the
// encoding of its line, and a place in the queue.
func BenchmarkCall(b *testing.B) {
	l, err := Open(filepath.Join(b.TempDir(), "audit.jsonl"), &Options{Queue: 1 << 16})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	c := Call{Client: "claude-code", Server: "github", Method: "tools/call", Tool: "create_issue", Duration: 12 * time.Millisecond, Outcome: Result, RequestBytes: 200, ResponseBytes: 2000}
	for b.Loop() {
		l.Call(c)
	}
}

// A call's line written without reflection is the line encoding/json writes, byte for byte.
func FuzzCallLine(f *testing.F) {
	f.Add("claude-code", "github", "tools/call", "search_code", "", "", int64(1234567), "result", 0, 10, 2000)
	f.Add("", "s", "resources/read", "", "", "file:///a\"b\\c\u2028é<>&\x01", int64(0), "error", -32602, 0, 0)
	f.Add("x", "s", "prompts/get", "", "p\xff", "", int64(3_600_000_000_000), "isError", 0, 1, 1)
	f.Fuzz(func(t *testing.T, client, server, method, tool, prompt, uri string, ns int64, outcome string, code, req, resp int) {
		line := callLine{Time: "2026-11-25T23:59:59.123+00:00", Event: "call", Client: client, Server: server, Method: method,
			Tool: tool, Prompt: prompt, URI: uri, DurationMS: math.Round(float64(ns)/float64(time.Microsecond)) / 1000,
			Outcome: Outcome(outcome), ErrorCode: code, RequestBytes: req, ResponseBytes: resp}
		want, err := encode(line)
		if err != nil {
			return
		}
		if got := line.append(nil); string(got) != string(want) {
			t.Fatalf("append:\n%s\nencoding/json:\n%s", got, want)
		}
	})
}

// A timestamp of the second before's reused parts is the one time.Format writes.
func TestTimestamp(t *testing.T) {
	east := time.FixedZone("east", 5*3600+30*60)
	base := time.Date(2026, 11, 25, 23, 59, 58, 0, time.UTC)
	for i := range 3000 {
		at := base.Add(time.Duration(i) * 997 * time.Microsecond)
		for _, tt := range []time.Time{at, at.In(east), at.Local()} {
			if got, want := timestamp(tt), tt.Format(timestampLayout); got != want {
				t.Fatalf("timestamp(%v) = %s, want %s", tt, got, want)
			}
		}
	}
}
