package aggregator

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// Where a shared process's messages go. The process's one reader (the shared process's
// multiplexer reads the server once for every session) hands each message to the setup
// (Route), which hands it to the sessions it is for, so that no session sees another's:
//
//	an answer                  to the session of its ID's space alone (each session numbers
//	                           its requests in a space of its own: Options.IDSpace), whose
//	                           table has it; one of no session's space is the setup's own
//	                           (Answered: its initialize, its listen, its setLevel)
//	progress                   to the session of its token's space
//	a server's request         to the session of the task it names (the session's table
//	                           says: Member.OwnsTask), else to the session whose request it
//	                           serves (the turns: Asker), else to the first session that
//	                           joined; ping is answered here (hop by hop)
//	a listen's notification    to the sessions whose listens ask for it, untagged
//	                           (ListenNotification)
//	a task's status            to the session whose table owns the task
//	anything else              to every session: list changes; a log message and a resource's
//	                           update, which each session's core takes at its own level, or
//	                           when its client subscribed (serverLog, serverResourceUpdated);
//	                           the cancellation of a server's request, which the table of
//	                           the session that was asked has, and the others drop
//
// A process of the session's own is read by the session itself (readServer), whose every
// message is its own.

// A Member is a session's handle on a shared process as the process's reader sees it (a
// shared process's attachment, which is the session's Fed): the setup hands it the server's
// messages for its session.
type Member interface {
	// Space is the session's ID space: its requests' IDs and progress tokens begin with it.
	Space() string
	// OwnsTask reports whether a request of the session's created the server's task id.
	OwnsTask(id string) bool
	// Deliver hands the session a message of the server's; more says that another follows at
	// once, and Flush ends such a burst (the session writes what it held for its client).
	Deliver(msg jsonrpc.Message, more bool)
	Flush()
	// BadLine hands the session a line of the server's that the reader could not read.
	BadLine(bad *stdio.BadLineError)
	// MaxMessageSize is the session's limit on one message (--max-message-size). The
	// process's reader reads with the largest of its sessions'; a message over a session's
	// own reaches it as a line too large to read (BadLine), as unshared.
	MaxMessageSize() int
}

// Route hands a message of the server's, read by the process's one reader, to the sessions it
// is for (above); more says that another of the server's messages follows at once: what the
// sessions write to their clients for the messages of such a burst is held, and written once
// the last is routed (or Flush is called), as an unshared session's reader of the server does.
// size is the length of the message's line, which each session holds to its own limit. Its
// calls come one at a time.
func (ps *ProcessSessions) Route(msg jsonrpc.Message, size int, more bool) {
	ps.more, ps.size = more, size
	switch m := msg.(type) {
	case *jsonrpc.Response:
		ps.answer(m)
	case *jsonrpc.Request:
		if m.IsCall() {
			ps.serverRequest(m)
		} else {
			ps.serverNotification(m)
		}
	}
	if !more {
		ps.Flush()
	}
}

// RouteBadLine takes a line of the server's that the process's reader could not read, as
// Route takes a message: one too large to read that answers a session's request goes to that
// session, whose request is answered with an error in its place (it would wait for good, and
// a turn with it), and any other to every session, each of which says so in its log, as
// unshared (serverBadLine).
func (ps *ProcessSessions) RouteBadLine(bad *stdio.BadLineError, more bool) {
	for _, m := range ps.badLineTo(bad) {
		m.BadLine(bad)
	}
	if !more {
		ps.Flush()
	}
}

// badLineTo is the sessions a line the reader could not read goes to (RouteBadLine); a too
// large answer to a request of the setup's own (its initialize) goes to none: the setup's
// request fails, as unshared, rather than being waited for.
func (ps *ProcessSessions) badLineTo(bad *stdio.BadLineError) []Member {
	if id, ok := stdio.TooLargeID(bad); ok {
		sid, _ := id.Raw().(string)
		if m := ps.ofSpace(sid); m != nil {
			return []Member{m}
		}
		if strings.HasPrefix(sid, setupIDs) {
			ps.Answered(sid, nil, rpcError(jsonrpc.CodeInternalError, nil, "Internal error: the server's answer is larger than the shared process reads of one message (the largest --max-message-size of the sessions that have used it)"))
			return nil
		}
	}
	return ps.routed()
}

// Unroute makes the process's messages go to f no more: its session stops using the process
// (Leave follows, and releases what it set up).
func (ps *ProcessSessions) Unroute(f any) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.unroute(f)
}

// unroute is Unroute for callers that hold ps.mu.
func (ps *ProcessSessions) unroute(f any) {
	ps.setRoutes(slices.DeleteFunc(slices.Clone(ps.routed()), func(m Member) bool { return m == f }))
}

// routes are the sessions the process's messages go to, in the order they joined, with their
// ID spaces (Member.Space, asked once): a snapshot, replaced whole (setRoutes) and never
// changed, which the process's reader reads without ps.mu for every answer (ofSpace).
type routes struct {
	members []Member
	spaces  []string
}

// setRoutes makes members the sessions the process's messages go to. Callers hold ps.mu.
func (ps *ProcessSessions) setRoutes(members []Member) {
	r := &routes{members: members, spaces: make([]string, len(members))}
	for i, m := range members {
		r.spaces[i] = m.Space()
	}
	ps.routes.Store(r)
}

// routed are the sessions the process's messages go to, in the order they joined: the
// snapshot's own slice, clipped, so that what a caller appends to it is a copy of its own.
func (ps *ProcessSessions) routed() []Member {
	if r := ps.routes.Load(); r != nil {
		return slices.Clip(r.members)
	}
	return nil
}

// Flush ends the burst of every session handed a message during the reader's burst.
func (ps *ProcessSessions) Flush() {
	for i, m := range ps.bursting {
		m.Flush()
		ps.bursting[i] = nil
	}
	ps.bursting = ps.bursting[:0]
}

// hand gives m the message msg of the server's: in its burst while more of the server's
// messages follow. A message over the session's limit reaches it as the line an unshared
// session's reader would not have read: too large, with the ID it had (its request, if it
// answers one, is failed saying so, by the session's own limit).
func (ps *ProcessSessions) hand(m Member, msg jsonrpc.Message) {
	if ps.size > m.MaxMessageSize() {
		if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() {
			// The session will not answer it (its reader would not have read it), and the
			// server, or another session's turn, would wait for good: answered here.
			ps.write(stdio.Response(stdio.IDJSON(r.ID), nil, stdio.ErrorObject(int64(jsonrpc.CodeInternalError), nil,
				"Internal error: the request is larger than the --max-message-size of the session it is for; the request came through mcp-simple-aggregator's shared process"))...)
		}
		m.BadLine(&stdio.BadLineError{Err: &stdio.TooLargeError{ID: messageID(msg)}})
		return
	}
	if ps.more && !slices.Contains(ps.bursting, m) {
		ps.bursting = append(ps.bursting, m)
	}
	m.Deliver(msg, ps.more)
}

// answer passes the server's answer to the session whose request it is, by its ID's space; one
// of no session's space is the setup's own, or dropped.
func (ps *ProcessSessions) answer(m *jsonrpc.Response) {
	id, _ := m.ID.Raw().(string)
	if to := ps.ofSpace(id); to != nil {
		ps.hand(to, m)
		return
	}
	ps.Answered(id, m.Result, stdio.ErrorJSON(m.Error))
}

// serverRequest passes a request of the server's to the session whose request it serves; a
// ping is answered here. Nothing on the wire of the legacy era ties a server's request to the
// request it serves (the modern era asks inside the answer, which goes back under its
// request's ID): it goes to the session of the task it names
// (io.modelcontextprotocol/related-task), else to the session of the request that asks (the
// turns: Asker), else, asked outside any request, to the first session that joined: never to
// one that does not have the server. A request that could be any of several sessions' is
// answered with an error, never guessed. The session's table records it; its answer is the
// session's.
func (ps *ProcessSessions) serverRequest(m *jsonrpc.Request) {
	id := stdio.IDJSON(m.ID)
	if m.Method == "ping" {
		ps.write(stdio.Response(id, json.RawMessage(`{}`), nil)...)
		return
	}
	to, why := ps.taskOwner(relatedTask(m.Params)), ""
	if to == nil {
		to, why = ps.asked()
	}
	if to == nil {
		ps.write(stdio.Response(id, nil, stdio.ErrorObject(int64(jsonrpc.CodeInternalError), nil, "Internal error: "+why+"; the request came through mcp-simple-aggregator's shared process"))...)
		return
	}
	ps.hand(to, &jsonrpc.Request{ID: m.ID, Method: m.Method, Params: m.Params})
}

// asked is the session a server's request that names no task of a session's goes to
// (serverRequest), or why none.
func (ps *ProcessSessions) asked() (Member, string) {
	if f, why := ps.Asker(); f != nil || why != "" {
		m, _ := f.(Member)
		return m, why
	}
	if ms := ps.routed(); len(ms) > 0 {
		return ms[0], ""
	}
	return nil, "no session uses the server"
}

// serverNotification passes a notification of the server's to the sessions it is for.
func (ps *ProcessSessions) serverNotification(m *jsonrpc.Request) {
	params := m.Params
	var to []Member
	switch {
	case m.Method == "notifications/tasks/status":
		task, _ := rawjson.StringMember(params, "taskId")
		if owner := ps.taskOwner(task); owner != nil {
			to = []Member{owner}
		}
	case m.Method == "notifications/progress":
		if ts, te, ok := rawjson.Member(params, "progressToken"); ok {
			tok, _ := rawjson.Decode(params[ts:te])
			if owner := ps.ofSpace(tok); owner != nil {
				to = []Member{owner}
			}
		}
	default:
		// A modern server's listen: the setup's, for every session (processlisten.go); each
		// session whose listen asks for it gets it untagged.
		if rawID, rest, tagged := era.Untag(params); tagged {
			id, _ := rawjson.Decode(rawID)
			for _, f := range ps.ListenNotification(id, m.Method, rest) {
				if member, ok := f.(Member); ok {
					to = append(to, member)
				}
			}
			params = rest
			break
		}
		// Anything else to every session: list changes; a log message or a resource's
		// update, which each session's core takes at its level or when its client subscribed;
		// the cancellation of a server's request, which the table of the session asked has.
		to = ps.routed()
	}
	for _, member := range to {
		ps.hand(member, &jsonrpc.Request{Method: m.Method, Params: params})
	}
}

// ofSpace is the session whose ID space id (an ID or a progress token) is of; nil when none's.
func (ps *ProcessSessions) ofSpace(id string) Member {
	r := ps.routes.Load()
	if r == nil {
		return nil
	}
	for i, space := range r.spaces {
		if strings.HasPrefix(id, space) {
			return r.members[i]
		}
	}
	return nil
}

// taskOwner is the session whose table holds the task id of the server's (the session whose
// request created it); nil when none's, or for "". Each session is asked without ps.mu held:
// its answer takes its table's lock.
func (ps *ProcessSessions) taskOwner(id string) Member {
	if id == "" {
		return nil
	}
	for _, m := range ps.routed() {
		if m.OwnsTask(id) {
			return m
		}
	}
	return nil
}

// relatedTask is the task a server's request is about (its _meta's
// io.modelcontextprotocol/related-task); "" when none.
func relatedTask(params json.RawMessage) string {
	ms, me, ok := rawjson.Member(params, "_meta")
	if !ok {
		return ""
	}
	ts, te, ok := rawjson.Member(params[ms:me], metaRelatedTask)
	if !ok {
		return ""
	}
	task, _ := rawjson.StringMember(params[ms+ts:ms+te], "taskId")
	return task
}

// metaRelatedTask is the _meta key of a message about a task (2025-11-25: "Metadata for
// associating messages with a task").
const metaRelatedTask = "io.modelcontextprotocol/related-task"

// messageID is the ID of msg as JSON: nil for a notification.
func messageID(msg jsonrpc.Message) json.RawMessage {
	switch m := msg.(type) {
	case *jsonrpc.Response:
		return stdio.IDJSON(m.ID)
	case *jsonrpc.Request:
		if m.IsCall() {
			return stdio.IDJSON(m.ID)
		}
	}
	return nil
}
