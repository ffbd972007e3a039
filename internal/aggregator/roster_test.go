package aggregator

import (
	"log/slog"
	"maps"
	"testing"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
)

// The reload plan is a pure function of the roster and the new file.
func TestPlan(t *testing.T) {
	entry := func(key string, args ...string) config.Server {
		return config.Server{Key: key, Command: "srv", Args: args}
	}
	filtered := entry("f")
	filtered.Tools = config.NewFilter("c.json", "mcpServers", "f", config.FilterField{Name: "excludeTools", Patterns: []string{"x"}})
	current := map[string]slotView{
		"same":     {cfg: entry("same"), state: serving},
		"changed":  {cfg: entry("changed", "-a"), state: serving},
		"gone":     {cfg: entry("gone"), state: serving},
		"down":     {cfg: entry("down"), state: down},
		"waiting":  {cfg: entry("waiting"), state: waiting},
		"starting": {cfg: entry("starting"), state: starting},
		"f":        {cfg: entry("f"), state: serving},
		"always":   {cfg: entry("always"), state: serving},
	}
	always := entry("always")
	always.AlwaysLoad = true
	next := []config.Server{entry("same"), entry("changed", "-b"), entry("down"), entry("waiting"), entry("starting"), filtered, entry("new"), always}
	want := map[string]action{
		"same": keep, "changed": restart, "gone": remove, "down": restart, "waiting": restart, "starting": keep, "f": refilter, "new": add, "always": refilter,
	}
	if got := plan(current, next); !maps.Equal(got, want) {
		t.Errorf("plan:\n got %v\nwant %v", got, want)
	}
	if got := plan(nil, nil); len(got) != 0 {
		t.Errorf("an empty plan: %v", got)
	}
}

// backoff doubles from the first delay up to the ceiling.
func TestBackoff(t *testing.T) {
	a := &Aggregator{opts: Options{RestartDelay: 500 * time.Millisecond}}
	for tries, want := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second} {
		if got := a.backoff(tries); got != want {
			t.Errorf("backoff(%d) = %v, want %v", tries, got, want)
		}
	}
	if got := a.backoff(1000); got != maxBackoff {
		t.Errorf("backoff(1000) = %v", got)
	}
}

// A slot that lost its process waits for a restart, or is down: by how it fell, its tries, how
// long it had served, and the restart limit.
func TestFall(t *testing.T) {
	old := &server{key: "k"}
	cases := []struct {
		name        string
		state       state
		tries       int
		served      time.Duration // how long it had served
		max         int
		wantState   state
		wantTries   int
		wantDelay   time.Duration
		wantsListed bool // its lists stay in the catalog
		initial     bool // its start is a first start
		lazy        bool // --lazy
	}{
		{"a crash", serving, 0, time.Second, 5, waiting, 1, time.Second, true, false, false},
		{"a crash after a restart", serving, 2, time.Second, 5, waiting, 3, 4 * time.Second, true, false, false},
		{"a crash after a minute of service starts over", serving, 4, 2 * time.Minute, 5, waiting, 1, time.Second, true, false, false},
		{"a crash with restarts off", serving, 0, time.Second, 0, down, 0, 0, false, false, false},
		{"a restart's try that fails", starting, 2, 0, 5, waiting, 3, 4 * time.Second, true, false, false},
		{"the last try fails: given up", starting, 5, 0, 5, down, 5, 0, false, false, false},
		{"a crash with the tries used up", serving, 5, time.Second, 5, down, 5, 0, false, false, false},
		{"a first start that fails", starting, 0, 0, 5, down, 0, 0, false, true, false},
		{"a try whose process could not be started", waiting, 1, 0, 5, waiting, 2, 2 * time.Second, true, false, false},
		{"a crash with --lazy: its next request starts it", serving, 0, time.Second, 5, dormant, 1, 0, true, false, true},
		{"a start on first use that fails", starting, 1, 0, 5, dormant, 2, 0, true, false, true},
		{"the last start on first use fails: given up", starting, 5, 0, 5, down, 5, 0, false, false, true},
		{"a first start that fails, with --lazy", starting, 0, 0, 5, down, 0, 0, false, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := &Aggregator{opts: Options{RestartDelay: time.Second, MaxRestarts: tc.max, Lazy: tc.lazy}, log: slog.New(slog.DiscardHandler), inflight: newTable("")}
			sl := &slot{key: "k", state: tc.state, proc: old, listed: old, tries: tc.tries, since: time.Now().Add(-tc.served), initial: tc.initial}
			a.roster.mu.Lock()
			_, delay := a.fallLocked(sl, "exited")
			a.stopTimer(sl)
			a.roster.mu.Unlock()
			if sl.state != tc.wantState || sl.tries != tc.wantTries || delay != tc.wantDelay || (sl.listed != nil) != tc.wantsListed || sl.proc != nil {
				t.Errorf("state %v, tries %d, delay %v, listed %v, proc %v; want %v, %d, %v, %v, nil",
					sl.state, sl.tries, delay, sl.listed != nil, sl.proc, tc.wantState, tc.wantTries, tc.wantDelay, tc.wantsListed)
			}
			if sl.back != (tc.wantState == waiting) {
				t.Errorf("calls held: %v, want %v", sl.back, tc.wantState == waiting)
			}
		})
	}
}
