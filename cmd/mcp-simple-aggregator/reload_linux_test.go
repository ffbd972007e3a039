package main

// The fault suite's reload cases (issue #14): the real binary, a configuration file saved the
// ways editors save it, and SIGHUP.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// reloadConfig is a configuration with the servers keys, each the fixture tagged with tag.
func reloadConfig(tag string, keys ...string) string {
	var entries []string
	for _, k := range keys {
		entries = append(entries, `"`+k+`": `+tagged(tag))
	}
	quoted, _ := json.Marshal(fixtureBin)
	return strings.ReplaceAll(`{"mcpServers": {`+strings.Join(entries, ", ")+`}}`, `"$FIXTURE"`, string(quoted))
}

// The ways a file is saved each trigger one reload of the final content; a file that cannot be
// used (mid-write, invalid, a missing variable) changes nothing; SIGHUP reloads too.
func TestFaultReloadSaves(t *testing.T) {
	tag := newTag(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(reloadConfig(tag, "a")), 0o600); err != nil {
		t.Fatal(err)
	}
	agg := startPeer(t, aggBinary, "--config", path, "--debug")
	agg.initialize("test")
	summaries := func() int { return strings.Count(agg.stderr.String(), "mcp-simple-aggregator: reload: ") }

	steps := []struct {
		name string
		save func(content string)
	}{
		{"atomic rename", func(content string) {
			tmp := filepath.Join(dir, ".config.json.swp")
			os.WriteFile(tmp, []byte(content), 0o600)
			os.Rename(tmp, path)
		}},
		{"truncate then write", func(content string) {
			f, _ := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0o600)
			f.WriteString(content[:len(content)/2]) // invalid for a moment
			f.Sync()
			time.Sleep(20 * time.Millisecond)
			f.WriteString(content[len(content)/2:])
			f.Close()
		}},
		{"delete and recreate", func(content string) {
			os.Remove(path)
			time.Sleep(20 * time.Millisecond)
			os.WriteFile(path, []byte(content), 0o600)
		}},
		{"ten saves within a second", func(content string) {
			for i := range 10 {
				c := content
				if i < 9 {
					c = reloadConfig(tag, "a", "never") // an intermediate content that must never load
				}
				os.WriteFile(path, []byte(c), 0o600)
				time.Sleep(20 * time.Millisecond) // well within the 200 ms debounce, also on a loaded machine
			}
		}},
	}
	keys := []string{"a"}
	for i, st := range steps {
		before := summaries()
		key := "s" + string(rune('0'+i))
		keys = append(keys, key)
		st.save(reloadConfig(tag, keys...))
		waitTool(t, agg, key+":echo", true)
		time.Sleep(400 * time.Millisecond) // more than the debounce: a second reload would show
		if n := summaries() - before; n != 1 {
			t.Errorf("%s: %d reloads, want 1", st.name, n)
		}
		if strings.Contains(agg.stderr.String(), `server=never`) {
			t.Errorf("%s: an intermediate content was loaded", st.name)
		}
	}

	// Invalid JSON and a missing variable change nothing: the servers keep serving.
	pid := func(name string) int { return pidOf(agg, name) }
	a := pid("a:pid")
	for _, bad := range []string{`{"mcpServers": `, `{"mcpServers": {"a": {"command": "${NOT_SET_IN_THE_FAULT_SUITE}"}}}`} {
		errorsBefore := strings.Count(agg.stderr.String(), "the servers keep running as they were")
		os.WriteFile(path, []byte(bad), 0o600)
		deadline := time.Now().Add(5 * time.Second)
		for strings.Count(agg.stderr.String(), "the servers keep running as they were") == errorsBefore && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if got := pid("a:pid"); got != a {
			t.Errorf("after %q: a's process %d, want %d", bad, got, a)
		}
		if !agg.note("notifications/message", 5*time.Second) {
			t.Errorf("after %q: the client was not told", bad)
		}
	}

	// SIGHUP reloads (the file is restored first, without a change the watcher would see as
	// new content: it reloads too, and then SIGHUP once more).
	before := summaries()
	os.WriteFile(path, []byte(reloadConfig(tag, keys...)), 0o600)
	waitFor(t, "the reload of the restored file", func() bool { return summaries() > before })
	before = summaries()
	agg.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(5 * time.Second)
	for summaries() == before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if summaries() != before+1 {
		t.Errorf("SIGHUP: %d reloads, want 1", summaries()-before)
	}
	if got := pid("a:pid"); got != a {
		t.Errorf("a reload of the same file restarted a: %d, then %d", a, got)
	}
	endSession(t, agg, tag)
}

// A save that changes one server while eight callers hammer it: no call fails, no call is
// answered twice (the peer fails on that), the old process is gone afterwards, and the other
// servers keep their processes.
func TestFaultReloadUnderLoad(t *testing.T) {
	tag := newTag(t)
	path := filepath.Join(t.TempDir(), "config.json")
	config := func(v string) string {
		return strings.Replace(reloadConfig(tag, "a", "b", "c"), `"env": {"FAULT_TAG": "`+tag+`"}`, `"env": {"FAULT_TAG": "`+tag+`", "V": "`+v+`"}`, 1)
	}
	os.WriteFile(path, []byte(config("1")), 0o600)
	agg := startPeer(t, aggBinary, "--config", path)
	agg.initialize("test")
	pid := func(name string) int { return pidOf(agg, name) }
	oldA, b, c := pid("a:pid"), pid("b:pid"), pid("c:pid")

	var calls, failed atomic.Int64
	load := startCallers(t, 8, func(g int) {
		m := agg.call("tools/call", `{"name":"a:echo","arguments":{"g":`+itoa(g)+`}}`)
		calls.Add(1)
		if m.Error != nil || !strings.Contains(string(m.Result), `"structuredContent":{"g":`+itoa(g)+`}`) {
			failed.Add(1)
			t.Errorf("a call during the reload: %s", m.Line)
		}
	})
	load.waitAnswered(t, "the callers' first calls")
	os.WriteFile(path, []byte(config("2")), 0o600)
	waitFor(t, "a's new process (V=2)", func() bool {
		m := agg.call("tools/call", `{"name":"a:getenv","arguments":{"name":"V"}}`)
		return strings.Contains(string(m.Line), `"value":"2"`)
	})
	load.waitAnswered(t, "the callers' calls to the new process")
	load.end()
	if failed.Load() > 0 || calls.Load() < 50 {
		t.Errorf("%d of %d calls failed", failed.Load(), calls.Load())
	}
	if newA := pid("a:pid"); newA == oldA {
		t.Errorf("a was not restarted")
	}
	if !exits(oldA, 10*time.Second) {
		t.Errorf("a's old process %d still runs", oldA)
	}
	if pid("b:pid") != b || pid("c:pid") != c {
		t.Errorf("the other servers were restarted")
	}
	endSession(t, agg, tag)
}
