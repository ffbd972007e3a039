package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A child that stops answering pings is treated as crashed: killed, removed, list_changed,
// and it stays down; the others go on.
func TestUnresponsiveChildIsStopped(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {
		"deaf": {"command": "$FIXTURE", "args": ["-ignore-pings"]},
		"ok": {"command": "$FIXTURE"}
	}}`, "--ping-interval", "100ms", "--ping-failures", "2", "--max-restarts", "0")
	agg.initialize("test")
	pid := agg.call("tools/call", `{"name":"deaf:pid","arguments":{}}`)
	var p struct {
		Structured struct {
			PID int `json:"pid"`
		} `json:"structuredContent"`
	}
	json.Unmarshal(pid.Result, &p)
	if !agg.note("notifications/tools/list_changed", 10*time.Second) {
		t.Fatal("no list_changed after the child stopped answering pings")
	}
	if list := agg.call("tools/list", ""); strings.Contains(string(list.Result), "deaf:") {
		t.Errorf("the unresponsive server's tools are still listed")
	}
	if m := agg.call("tools/call", `{"name":"ok:echo","arguments":{}}`); m.Error != nil {
		t.Errorf("the other server stopped working: %s", m.Line)
	}
	if !exits(p.Structured.PID, 10*time.Second) {
		t.Errorf("the unresponsive server (pid %d) is still running", p.Structured.PID)
	}
	if !strings.Contains(agg.stderr.String(), `server "deaf" did not answer 2 pings in a row`) {
		t.Errorf("stderr does not say why:\n%s", agg.stderr)
	}
}
