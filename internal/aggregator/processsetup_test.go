package aggregator

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
)

// wire is what a ProcessSessions wrote to its process, message by message.
type wire struct {
	mu   sync.Mutex
	msgs []string
}

func (w *wire) write(parts ...[]byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var line []byte
	for _, p := range parts {
		line = append(line, p...)
	}
	w.msgs = append(w.msgs, strings.TrimSpace(string(line)))
}

// wrote returns what was written since the last call.
func (w *wire) wrote() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

func newTestSetup(members ...string) (*ProcessSessions, *wire) {
	w := &wire{}
	ps := NewProcessSessions(w.write, slog.New(slog.DiscardHandler))
	for _, m := range members {
		ps.Join(m)
	}
	return ps, w
}

// Two sessions' subscriptions decided in one order and answered in the other (a session's
// write held for its client's burst): once none is at the server, the server is made to hold
// what the sessions want.
func TestSetupReconcilesSubscriptions(t *testing.T) {
	ps, w := newTestSetup("A", "B")
	uri := `{"uri":"x://r"}`
	_, hereA1, subA := ps.take("A", "resources/subscribe", json.RawMessage(uri))
	_, hereA2, unsubA := ps.take("A", "resources/unsubscribe", json.RawMessage(uri))
	_, hereB, subB := ps.take("B", "resources/subscribe", json.RawMessage(uri))
	if hereA1 || hereA2 || hereB {
		t.Fatalf("answered here while a subscription of the resource was at the server: %v %v %v", hereA1, hereA2, hereB)
	}
	// The server took them as A's subscription, B's, then A's unsubscription: it holds none.
	subA(true)
	subB(true)
	unsubA(true)
	if got := w.wrote(); len(got) != 1 || !strings.Contains(got[0], `"method":"resources/subscribe"`) || !strings.Contains(got[0], `x://r`) {
		t.Errorf("the setup wrote %q, want a subscription, for B", got)
	}
	if !ps.wants("B", "x://r") || ps.wants("A", "x://r") {
		t.Errorf("wants: A %v, B %v", ps.wants("A", "x://r"), ps.wants("B", "x://r"))
	}
	// Held now: B's repeat is answered here.
	if _, here, _ := ps.take("B", "resources/subscribe", json.RawMessage(uri)); !here {
		t.Error("a repeat of a held subscription went to the server")
	}
}

// Levels answered in the other order than they were decided: once none is at the server, the
// process is set to what the sessions ask together.
func TestSetupRelevels(t *testing.T) {
	ps, w := newTestSetup("A")
	set1, _, debug := ps.take("A", "logging/setLevel", json.RawMessage(`{"level":"debug"}`))
	set2, _, errLevel := ps.take("A", "logging/setLevel", json.RawMessage(`{"level":"error"}`))
	if !strings.Contains(string(set1), "debug") || !strings.Contains(string(set2), "error") {
		t.Fatalf("the levels sent: %s, %s", set1, set2)
	}
	errLevel(true)
	debug(true) // the server took debug last
	if got := w.wrote(); len(got) != 1 || !strings.Contains(got[0], `"level":"error"`) {
		t.Errorf("the setup wrote %q, want logging/setLevel to error", got)
	}
}

// A session waiting for the acknowledgement of a listen that another session's listen replaced
// before it was acknowledged takes the acknowledgement of the one that replaced it, which asks
// for at least as much.
func TestSetupListenFollowsReplacement(t *testing.T) {
	ps, w := newTestSetup("A", "B")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		uris []string
		err  error
	}
	done := map[string]chan result{"A": make(chan result, 1), "B": make(chan result, 1)}
	listen := func(who string, f era.Filter) {
		uris, err := ps.listen(ctx, nil, who, era.BuildEnvelope(era.Latest(era.Modern), nil, nil), f, 5*time.Second, 5*time.Second, func() {})
		done[who] <- result{uris, err}
	}
	written := func(what string) string {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			for _, m := range w.wrote() {
				if strings.Contains(m, what) {
					return m
				}
			}
		}
		t.Fatalf("the setup did not write %s", what)
		return ""
	}
	go listen("A", era.Filter{Tools: true})
	first := written(`"method":"subscriptions/listen"`)
	go listen("B", era.Filter{Tools: true, URIs: []string{"x://r"}})
	written(`"method":"notifications/cancelled"`)
	ps.Answered(idOf(t, first), json.RawMessage(`{}`), nil) // the go-sdk answers a cancelled listen
	second := written(`"method":"subscriptions/listen"`)
	if !strings.Contains(second, `x://r`) {
		t.Fatalf("the second listen: %s", second)
	}
	ps.ListenNotification(idOf(t, second), "notifications/subscriptions/acknowledged",
		json.RawMessage(`{"notifications":{"toolsListChanged":true,"resourceSubscriptions":["x://r"]}}`))
	for _, who := range []string{"A", "B"} {
		if r := <-done[who]; r.err != nil {
			t.Errorf("%s's listen: %v", who, r.err)
		}
	}
}

// idOf is the ID of a request line the setup wrote.
func idOf(t *testing.T, line string) string {
	t.Helper()
	var req struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(line), &req); err != nil || req.ID == "" {
		t.Fatalf("not a request of the setup's: %s (%v)", line, err)
	}
	return req.ID
}
