package aggregator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// interceptChild takes what a child sends that the aggregator handles itself: answers to
// forwarded requests, notifications for the client, list changes, and the child's requests to
// the client. What it declines (ping, answers to the SDK's own requests) goes to the SDK's
// client session.
func (a *Aggregator) interceptChild(s *server, msg jsonrpc.Message) bool {
	switch m := msg.(type) {
	case *jsonrpc.Response:
		return a.childAnswer(s, m)
	case *jsonrpc.Request:
		if m.IsCall() {
			switch m.Method {
			case "sampling/createMessage", "elicitation/create", "roots/list":
				a.reverseRequest(s, m)
				return true
			}
			return false
		}
		switch m.Method {
		case "notifications/progress":
			a.childProgress(s, m)
		case "notifications/message":
			a.childLog(s, m)
		case "notifications/resources/updated":
			a.toClient(notification(m.Method, m.Params)...)
		case "notifications/tasks/status":
			a.childTaskStatus(s, m)
		case "notifications/tools/list_changed":
			go a.refresh(s, kindTools)
		case "notifications/prompts/list_changed":
			go a.refresh(s, kindPrompts)
		case "notifications/resources/list_changed":
			go a.refresh(s, kindResources, kindTemplates)
		case "notifications/cancelled":
			return a.reverseCancelled(s, m)
		default:
			return false
		}
		return true
	}
	return false
}

// toClient writes a message to the client. Before the client is initialized (the children
// were started before it connected) the message waits, as it would have reached a client
// connected to the child directly.
func (a *Aggregator) toClient(parts ...[]byte) {
	if !a.ready.Load() && a.early.hold(parts) {
		return
	}
	if err := a.up.WriteParts(parts...); err != nil {
		a.log.Debug("writing to the client", "error", err)
	}
}

// Limits of what waits for the client: a child that logs a lot while no client is connected
// loses its oldest messages, not the aggregator its memory.
const (
	earlyMessages = 1000
	earlyBytes    = 4 << 20
)

// earlyQueue holds the children's notifications that came before the client was initialized.
type earlyQueue struct {
	mu      sync.Mutex
	done    bool // flushed: messages now go to the client directly
	msgs    [][]byte
	size    int
	dropped int
}

// hold queues a message for the client; it reports false when the queue was flushed already
// and the message must be written now.
func (q *earlyQueue) hold(parts [][]byte) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.done {
		return false
	}
	msg := slices.Concat(parts...)
	q.msgs = append(q.msgs, msg)
	q.size += len(msg)
	for len(q.msgs) > earlyMessages || q.size > earlyBytes && len(q.msgs) > 1 {
		q.size -= len(q.msgs[0])
		q.msgs[0] = nil
		q.msgs = q.msgs[1:]
		q.dropped++
	}
	return true
}

// flush writes what waited, in order, then marks the client ready: a message sent meanwhile
// waits for the lock and goes after them.
func (q *earlyQueue) flush(a *Aggregator) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.dropped > 0 {
		a.log.Warn(fmt.Sprintf("%d notifications of the servers from before the client connected were dropped (the last %d, up to %d MiB, are kept)", q.dropped, earlyMessages, earlyBytes>>20))
	}
	for _, msg := range q.msgs {
		if err := a.up.WriteParts(msg); err != nil {
			a.log.Debug("writing to the client", "error", err)
		}
	}
	q.msgs, q.done = nil, true
	a.ready.Store(true)
}

// childProgress forwards a child's progress notification for a request of the client to the
// client, as it is: the client's token was passed to the child unchanged, and a client's
// tokens are unique among its requests in flight. Progress for a token the child was not given
// is dropped.
func (a *Aggregator) childProgress(s *server, m *jsonrpc.Request) {
	start, end, ok := rawjson.Member(m.Params, "progressToken")
	if !ok || !a.pending.tokenOwner(s, tokenKey(m.Params[start:end])) {
		s.log.Debug("dropped a progress notification for a token it was not given", "params", excerpt(m.Params))
		return
	}
	a.toClient(notification(m.Method, m.Params)...)
}

// childLog forwards a child's log message to the client, with the server's key as the logger
// when the child named none.
func (a *Aggregator) childLog(s *server, m *jsonrpc.Request) {
	params := m.Params
	if _, _, ok := rawjson.Member(params, "logger"); !ok && len(params) > 1 && params[0] == '{' {
		logger, _ := json.Marshal(s.key)
		rest := params[1:]
		sep := ","
		if i := skipSpace(rest); i < len(rest) && rest[i] == '}' {
			sep = ""
		}
		a.toClient([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"logger":`), logger, []byte(sep), rest, []byte("}\n"))
		return
	}
	a.toClient(notification(m.Method, params)...)
}

func skipSpace(b []byte) int {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// refresh re-reads lists of a child after it announced a change, and tells the client what
// changed.
func (a *Aggregator) refresh(s *server, ks ...kind) {
	select {
	case <-s.listed: // a change announced during start-up is read after the first lists
	case <-s.down:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.opts.StartupTimeout)
	defer cancel()
	lists, err := s.readLists(ctx, ks)
	if err != nil {
		s.log.Warn("re-reading a list after a change failed; keeping the previous list", "request", err.stage, "error", err.err)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-s.down:
		return
	default:
	}
	old := s.lists
	for _, k := range ks {
		s.lists[k] = lists[k]
	}
	if a.catalog.Load() == nil {
		return // start-up builds the first catalog, with these lists
	}
	cat, cerr := buildCatalog(a.liveServers(), a.opts.Separator)
	if cerr != nil {
		s.lists = old
		s.log.Error("the new list cannot be served; keeping the previous list", "error", cerr)
		return
	}
	a.storeCatalog(cat)
}

// storeCatalog makes cat the current catalog and tells the client which lists changed.
// Callers hold a.mu.
func (a *Aggregator) storeCatalog(cat *catalog) {
	old := a.catalog.Load()
	a.catalog.Store(cat)
	for _, w := range cat.warnings {
		if !slices.Contains(old.warnings, w) {
			a.log.Warn(w)
		}
	}
	for k := range numKinds {
		if string(old.lists[k]) != string(cat.lists[k]) && a.advertises(k) {
			a.notify.trigger(kinds[k].changed)
		}
	}
}

// debouncer sends each list_changed notification once after a burst of changes.
type debouncer struct {
	mu      sync.Mutex
	delay   time.Duration
	send    func(method string)
	pending []string
	timer   *time.Timer
}

func newDebouncer(delay time.Duration, send func(method string)) *debouncer {
	return &debouncer{delay: delay, send: send}
}

func (d *debouncer) trigger(method string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !slices.Contains(d.pending, method) {
		d.pending = append(d.pending, method)
	}
	if d.timer == nil {
		d.timer = time.AfterFunc(d.delay, func() {
			d.mu.Lock()
			pending := d.pending
			d.pending, d.timer = nil, nil
			d.mu.Unlock()
			for _, m := range pending {
				d.send(m)
			}
		})
	}
}

func (d *debouncer) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
	}
}
