package aggregator

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// Tasks (protocol 2025-11-25): a tools/call with "task" in its params makes the child create a
// task and answer at once with it ({"task":{"taskId":...}}); the client then asks tasks/get,
// tasks/result and tasks/cancel about it, and tasks/list for all of them. The aggregator
// learns which server owns a task from the answer that created it, from tasks/list and from
// notifications/tasks/status, and routes by the task's ID, which passes unchanged (servers
// make them unique: UUIDs, as a rule). The Go SDK has no field for the tasks capability: the
// children's are read from their raw initialize answers (childConn), and their union is
// added to the aggregator's initialize answer (answering).

// taskTable knows which server owns each task.
type taskTable struct {
	mu    sync.Mutex
	owner map[string]*server
}

func (t *taskTable) set(id string, s *server) {
	if id == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.owner == nil {
		t.owner = map[string]*server{}
	}
	t.owner[id] = s
}

func (t *taskTable) get(id string) *server {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.owner[id]
}

// drop forgets the tasks of a server that went down.
func (t *taskTable) drop(s *server) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, owner := range t.owner {
		if owner == s {
			delete(t.owner, id)
		}
	}
}

// unionTasks is the tasks capability the aggregator offers: the union of the children's (nil
// when none offers tasks).
func unionTasks(servers []*server) json.RawMessage {
	var merged map[string]any
	for _, s := range servers {
		var m map[string]any
		if len(s.tasks) == 0 || json.Unmarshal(s.tasks, &m) != nil {
			continue
		}
		merged = mergeObjects(merged, m)
	}
	if merged == nil {
		return nil
	}
	b, _ := json.Marshal(merged)
	return b
}

// mergeObjects adds src's members to dst, merging objects member by member; dst keeps what it
// has otherwise.
func mergeObjects(dst, src map[string]any) map[string]any {
	if dst == nil {
		dst = map[string]any{}
	}
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			dv, _ := dst[k].(map[string]any)
			dst[k] = mergeObjects(dv, sv)
		} else if _, ok := dst[k]; !ok {
			dst[k] = v
		}
	}
	return dst
}

// answering adds the tasks capability to the SDK's answer to the client's initialize.
func (a *Aggregator) answering(resp *jsonrpc.Response) {
	if a.tasksCaps == nil || resp.Error != nil {
		return
	}
	if id := a.initID.Load(); id == nil || *id != resp.ID {
		return
	}
	cs, ce, ok := rawjson.Member(resp.Result, "capabilities")
	if !ok || resp.Result[cs] != '{' {
		return
	}
	member := `"tasks":` + string(a.tasksCaps)
	if i := cs + 1 + skipSpace(resp.Result[cs+1:ce]); resp.Result[i] != '}' {
		member += ","
	}
	resp.Result = slices.Concat(resp.Result[:cs+1], []byte(member), resp.Result[cs+1:])
}

// callTask forwards tasks/get, tasks/result and tasks/cancel to the server that owns the task.
func (a *Aggregator) callTask(req *jsonrpc.Request) {
	if a.tasksCaps == nil {
		a.answerError(req.ID, jsonrpc.CodeMethodNotFound, "Method not found: no server offers tasks")
		return
	}
	id, token, ok := a.stringParam(req, "taskId")
	if !ok {
		return
	}
	s := a.tasks.get(id)
	if s == nil {
		a.answerError(req.ID, jsonrpc.CodeInvalidParams, fmt.Sprintf("Task not found: %s (no server reported a task with this ID, or its server went down)", id))
		return
	}
	a.forward(req, &forwarded{server: s, doing: req.Method + " of task %q", subject: id, token: token, label: "task", value: id}, req.Params)
}

// noteCreatedTask learns the owner of the task in a child's answer to a task-augmented call.
func (a *Aggregator) noteCreatedTask(s *server, result json.RawMessage) {
	if ts, te, ok := rawjson.Member(result, "task"); ok {
		id, _ := stringMember(result[ts:te], "taskId")
		a.tasks.set(id, s)
	}
}

// childTaskStatus passes a child's notifications/tasks/status to the client, and learns who
// owns the task.
func (a *Aggregator) childTaskStatus(s *server, m *jsonrpc.Request) {
	id, _ := stringMember(m.Params, "taskId")
	a.tasks.set(id, s)
	a.toClient(notification(m.Method, m.Params)...)
}

// maxTaskPages bounds the pages read from one server for one tasks/list.
const maxTaskPages = 1000

// listTasks answers tasks/list with the tasks of every server that lists them, every page of
// each, in one page.
func (a *Aggregator) listTasks(req *jsonrpc.Request) {
	var targets []*server
	if a.tasksCaps != nil {
		for _, s := range a.catalog.Load().servers {
			if hasMember(s.tasks, "list") {
				targets = append(targets, s)
			}
		}
	}
	if len(targets) == 0 {
		a.answerError(req.ID, jsonrpc.CodeMethodNotFound, "Method not found: no server lists tasks")
		return
	}
	if !a.checkNoCursor(req) {
		return
	}
	var mu sync.Mutex
	left := len(targets)
	found := make([][]json.RawMessage, len(targets))
	for i, s := range targets {
		var page func(cursor string, n int)
		page = func(cursor string, n int) {
			params := json.RawMessage(`{}`)
			if cursor != "" {
				params = json.RawMessage(`{"cursor":` + strconv.Quote(cursor) + `}`)
			}
			f := &forwarded{server: s, method: req.Method, doing: "listing tasks (page %q)", subject: cursor}
			f.done = func(result, errObj json.RawMessage) {
				var r struct {
					Tasks []json.RawMessage `json:"tasks"`
					Next  string            `json:"nextCursor"`
				}
				if errObj == nil && json.Unmarshal(result, &r) == nil {
					for _, t := range r.Tasks {
						id, _ := stringMember(t, "taskId")
						a.tasks.set(id, s)
					}
					mu.Lock()
					found[i] = append(found[i], r.Tasks...)
					mu.Unlock()
					if r.Next != "" && r.Next != cursor && n < maxTaskPages {
						page(r.Next, n+1)
						return
					}
				} else {
					s.log.Warn("tasks/list failed; its tasks are left out of the list", "error", string(errObj))
				}
				mu.Lock()
				left--
				last := left == 0
				mu.Unlock()
				if last {
					a.writeAnswer(req.ID, encodeList("tasks", slices.Concat(found...)), nil)
				}
			}
			a.send(f, params)
		}
		page("", 1)
	}
}
