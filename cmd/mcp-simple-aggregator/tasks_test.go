package main

import (
	"encoding/json"
	"strings"
	"testing"
)

const tasksConfig = `{"mcpServers": {
	"alpha": {"command": "$FIXTURE", "args": ["-tasks", "-page", "1"]},
	"beta": {"command": "$FIXTURE", "args": ["-tasks"]},
	"plain": {"command": "$FIXTURE"}
}}`

// Tasks (2025-11-25) through the aggregator: the capability is the union of the servers',
// a task-augmented call creates the task at its server, and tasks/get, tasks/result,
// tasks/cancel reach the server that owns the task; tasks/list gathers every server's tasks,
// every page; status notifications reach the client unchanged.
func TestTasks(t *testing.T) {
	agg := startAggregator(t, tasksConfig)
	init := agg.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"tasker","version":"1"}}`)
	agg.writeLine(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	var res struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
	}
	json.Unmarshal(init.Result, &res)
	if got, want := string(res.Capabilities["tasks"]), `{"cancel":{},"list":{},"requests":{"tools":{"call":{}}}}`; got != want {
		t.Errorf("tasks capability %s, want %s (in %s)", got, want, init.Result)
	}
	if _, ok := res.Capabilities["tools"]; !ok {
		t.Errorf("the tools capability went missing: %s", init.Result)
	}

	type task struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
	}
	create := func(key string, ms int) task {
		t.Helper()
		m := agg.call("tools/call", `{"name":"`+key+`:task_sleep","arguments":{"ms":`+itoa(ms)+`},"task":{"ttl":60000}}`)
		var r struct {
			Task task `json:"task"`
		}
		if json.Unmarshal(m.Result, &r); r.Task.TaskID == "" || r.Task.Status != "working" {
			t.Fatalf("creating a task at %s: %s", key, m.Line)
		}
		return r.Task
	}
	a1 := create("alpha", 50)
	a2 := create("alpha", 10000)
	b := create("beta", 10000)

	// tasks/result waits for the task and returns the call's result, from alpha.
	m := agg.call("tasks/result", `{"taskId":"`+a1.TaskID+`"}`)
	if want := `{"content":[{"type":"text","text":"slept 50 ms"}],"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"` + a1.TaskID + `"}}}`; string(m.Result) != want {
		t.Errorf("tasks/result: %s, want the result %s", m.Line, want)
	}
	note := nextNote(t, agg, "the status notification")
	if !strings.HasPrefix(string(note.Line), `{"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":"`+a1.TaskID+`","status":"completed",`) {
		t.Errorf("status notification: %s", note.Line)
	}
	if m := agg.call("tasks/get", `{"taskId":"`+a1.TaskID+`"}`); !strings.Contains(string(m.Result), `"status":"completed"`) {
		t.Errorf("tasks/get of a completed task: %s", m.Line)
	}

	// beta's task is beta's: cancelled there, and alpha's other task still runs.
	if m := agg.call("tasks/cancel", `{"taskId":"`+b.TaskID+`"}`); !strings.Contains(string(m.Result), `"taskId":"`+b.TaskID+`","status":"cancelled"`) {
		t.Errorf("tasks/cancel: %s", m.Line)
	}
	nextNote(t, agg, "the cancellation's status notification")
	if m := agg.call("tasks/get", `{"taskId":"`+a2.TaskID+`"}`); !strings.Contains(string(m.Result), `"status":"working"`) {
		t.Errorf("tasks/get of a running task: %s", m.Line)
	}

	// tasks/list: alpha's two tasks (one page each) and beta's one, in one page.
	m = agg.call("tasks/list", `{}`)
	var list struct {
		Tasks      []task  `json:"tasks"`
		NextCursor *string `json:"nextCursor"`
	}
	json.Unmarshal(m.Result, &list)
	got := map[string]string{}
	for _, x := range list.Tasks {
		got[x.TaskID] = x.Status
	}
	if len(list.Tasks) != 3 || got[a1.TaskID] != "completed" || got[a2.TaskID] != "working" || got[b.TaskID] != "cancelled" || list.NextCursor != nil {
		t.Errorf("tasks/list: %s", m.Line)
	}
	if m := agg.call("tasks/list", `{"cursor":"page-1"}`); m.Error == nil {
		t.Errorf("tasks/list with a cursor never handed out: %s", m.Line)
	}

	if m := agg.call("tasks/get", `{"taskId":"no-such-task"}`); !strings.Contains(string(m.Error), `"code":-32602`) || !strings.Contains(string(m.Error), "Task not found: no-such-task") {
		t.Errorf("tasks/get of an unknown task: %s", m.Line)
	}
	// An ordinary call of the same tool still answers with its result.
	if m := agg.call("tools/call", `{"name":"beta:task_sleep","arguments":{"ms":1}}`); !strings.Contains(string(m.Result), "slept 1 ms") {
		t.Errorf("a call without a task: %s", m.Line)
	}
}

// Without a server that offers tasks, there is no tasks capability and tasks/ methods are not
// found.
func TestNoTasks(t *testing.T) {
	agg := startAggregator(t, `{"mcpServers": {"plain": {"command": "$FIXTURE"}}}`)
	init := agg.initialize("plain")
	if strings.Contains(string(init.Result), `"tasks"`) {
		t.Errorf("initialize offers tasks: %s", init.Result)
	}
	for _, method := range []string{"tasks/list", "tasks/get"} {
		if m := agg.call(method, `{"taskId":"x"}`); !strings.Contains(string(m.Error), `"code":-32601`) {
			t.Errorf("%s: %s", method, m.Line)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
