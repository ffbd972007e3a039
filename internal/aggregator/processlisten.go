package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// The listen of a modern server's process, for one session or many. Every session that has the
// server listens for its list changes and its client's resource subscriptions
// (modernServer.listenAt). The specification lets one connection hold many listens ("A client
// MAY have multiple active subscriptions concurrently", basic/patterns/subscriptions.mdx), but
// the go-sdk's server keeps one per kind and connection (the latest) and ends a kind's
// subscription when any listen of the connection ends (docs/protocol-eras.md §6): the sessions'
// listens, each on its own, would take each other's notifications away. So the process hears
// one listen, the setup's own, asking for what the sessions ask together; each session's listen
// is what of it the server agreed to, and each session gets the notifications its filter asks
// for (ListenNotification), without the tag. When what the sessions ask together changes (a
// session asks for more, or for less that no other asks for: a resource no session subscribes
// to any more is not to be updated), the setup listens again: the old listen is ended first,
// and its end awaited (the go-sdk answers a cancelled listen once it let go of it; a server
// that says nothing more gets the grace), before the new one is opened; once that one is
// acknowledged, the other sessions read the lists again (gap), for changes while nothing was
// subscribed. An old listen that ends after the grace ends the list subscriptions of the one
// opened since too: the setup listens once more (endedLate). A session that stops using the
// process leaves the listen as it is, asking for at least as much as the others; the next
// change of what they ask sets it to theirs.

// setupListen is a subscriptions/listen of the setup's own.
type setupListen struct {
	id     string
	filter era.Filter  // what it asked for
	agreed *era.Filter // what its acknowledgement agreed to; nil before it
	ending bool        // cancelled by the setup, to listen again: a session waiting for its acknowledgement waits for the next one's
	// again says it replaced another, and opener which session's listen asked for it (nil for
	// none: endedLate): once it is acknowledged, the others read their lists again.
	again  bool
	opener any
	acked  chan struct{}
	ended  chan struct{} // closed by its answer (Answered), or by the process's end (Ended)
	endErr json.RawMessage
}

// listener is a session's part in the process's listen.
type listener struct {
	filter era.Filter
	gap    func() // reads the lists again, after the setup listened again
}

// listen makes the process's listen carry what the session of f asks for (filter; env: the
// envelope of its requests, era.BuildEnvelope, which the setup's listen takes), with
// what the other sessions ask, and returns the URIs of filter the server agreed to. It waits
// for the acknowledgement until ctx ends, or closed is closed (the session's use of the process
// ended); what the setup does to listen again is its own, and goes on without the session:
// grace bounds its wait for the end of the listen it cancelled, and bound its wait for one that
// did not end within the grace (endedLate). A listen that failed leaves the session's part as
// it was.
func (ps *ProcessSessions) listen(ctx context.Context, closed <-chan struct{}, f any, env string, filter era.Filter, grace, bound time.Duration, gap func()) ([]string, error) {
	select {
	case ps.reopen <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("no acknowledgement of subscriptions/listen: %w", ctx.Err())
	case <-closed:
		return nil, errClosed
	}
	ps.mu.Lock()
	if ps.members[f] == nil {
		ps.mu.Unlock()
		<-ps.reopen
		return nil, errors.New("the session no longer uses the process")
	}
	prev := ps.listeners[f]
	mine := &listener{filter: filter, gap: gap}
	ps.listeners[f] = mine
	ps.listenEnv = env
	cur := ps.open
	want := ps.wanted()
	if cur != nil && cur.filter.Includes(want) && want.Includes(cur.filter) {
		ps.mu.Unlock()
		<-ps.reopen
	} else {
		cur = ps.again(f, want, grace, bound) // releases ps.mu and, once it wrote, ps.reopen
	}
	if cur == nil {
		return nil, nil // nothing to listen for
	}
	agreed, err := ps.agreed(ctx, closed, cur, filter)
	if err != nil {
		ps.mu.Lock()
		if ps.listeners[f] == mine { // the setup does not ask for what the server did not take
			if prev != nil {
				ps.listeners[f] = prev
			} else {
				delete(ps.listeners, f)
			}
		}
		ps.mu.Unlock()
	}
	return agreed, err
}

// again listens again, asking for want, for the session of f (nil: endedLate): the open
// listen, if any, is cancelled, and the new one opened once the old one ended, or after the
// grace, on a goroutine of the setup's, which the session does not wait for; it returns the
// new listen (nil when want is empty: then none is opened). Callers hold ps.mu and ps.reopen;
// it releases ps.mu, and ps.reopen once the new listen is written.
func (ps *ProcessSessions) again(f any, want era.Filter, grace, bound time.Duration) *setupListen {
	old := ps.open
	var cur *setupListen
	if !want.Empty() {
		cur = &setupListen{id: ps.nextID(), filter: want, again: old != nil, opener: f, acked: make(chan struct{}), ended: make(chan struct{})}
		ps.byID[cur.id] = cur
	}
	ps.open = cur
	if old != nil {
		old.ending = true
	}
	params := era.Envelop(era.ListenParams(want), ps.listenEnv)
	ps.mu.Unlock()
	go func() {
		defer func() { <-ps.reopen }()
		if old != nil && !ps.endOf(old, grace) {
			go ps.endedLate(old, bound)
		}
		if cur != nil {
			ps.write(stdio.Request(cur.id, "subscriptions/listen", params)...)
		}
	}()
	return cur
}

// endOf cancels the listen old, and waits for its end (the go-sdk answers a cancelled listen
// once it let go of it) for grace at most (others say nothing more,
// basic/patterns/subscriptions.mdx); it reports whether it ended.
func (ps *ProcessSessions) endOf(old *setupListen, grace time.Duration) bool {
	ps.write(stdio.Cancelled(old.id, "mcp-simple-aggregator listens again with other subscriptions")...)
	wait := time.NewTimer(grace)
	defer wait.Stop()
	select {
	case <-old.ended:
		return true
	case <-wait.C:
		return false
	}
}

// wanted is what the sessions' listens ask for together. Callers hold ps.mu.
func (ps *ProcessSessions) wanted() era.Filter {
	var u era.Filter
	for _, l := range ps.listeners {
		u = u.Union(l.filter)
	}
	return u
}

// agreed waits for the acknowledgement of the listen l, and returns what of filter's URIs it
// agreed to. A listen the setup replaced before its acknowledgement (another session asked for
// more) is followed by the one that replaced it, which asks for at least as much.
func (ps *ProcessSessions) agreed(ctx context.Context, closed <-chan struct{}, l *setupListen, filter era.Filter) ([]string, error) {
	for {
		select {
		case <-l.acked:
			ps.mu.Lock()
			agreed := filter.Within(*l.agreed)
			ps.mu.Unlock()
			return agreed.URIs, nil
		case <-l.ended:
			ps.mu.Lock()
			next := ps.open
			replaced := l.ending && l.agreed == nil && next != nil && next != l
			ps.mu.Unlock()
			if replaced {
				l = next
				continue
			}
			if l.endErr != nil {
				return nil, fmt.Errorf("subscriptions/listen failed: %s", l.endErr)
			}
			return nil, errors.New("subscriptions/listen ended before its acknowledgement")
		case <-closed:
			return nil, errClosed
		case <-ctx.Done():
			return nil, fmt.Errorf("no acknowledgement of subscriptions/listen: %w", ctx.Err())
		}
	}
}

// endedLate listens again when the listen old, which the setup stopped waiting for, ends within
// bound: the go-sdk's server, letting go of it, ends the list subscriptions of the connection,
// those of any listen opened since with them. A server that never answers a cancelled listen
// says nothing more. (Opened again by the setup alone: opener nil.)
func (ps *ProcessSessions) endedLate(old *setupListen, bound time.Duration) {
	wait := time.NewTimer(bound)
	defer wait.Stop()
	select {
	case <-old.ended:
	case <-wait.C:
		ps.forget(old)
		return
	}
	ps.reopen <- struct{}{}
	ps.mu.Lock()
	if ps.open == nil {
		ps.mu.Unlock()
		<-ps.reopen
		return // nothing open: the next session's listen opens one
	}
	// This server lets go of a cancelled listen late: the one open now is waited for to its
	// end (within bound), or it would end the next one's subscriptions in turn.
	ps.again(nil, ps.wanted(), bound, bound)
}

// forget drops a listen of the setup's whose end will not come.
func (ps *ProcessSessions) forget(l *setupListen) {
	ps.mu.Lock()
	delete(ps.byID, l.id)
	ps.mu.Unlock()
}

// listenEnded takes the answer to a listen of the setup's: the server ended it, or let go of
// it once cancelled. It reports whether id was one.
func (ps *ProcessSessions) listenEnded(id string, errObj json.RawMessage) bool {
	ps.mu.Lock()
	l := ps.byID[id]
	if l != nil {
		delete(ps.byID, id)
		if ps.open == l {
			ps.open = nil // the server ended it: the next session's listen opens another
		}
	}
	ps.mu.Unlock()
	if l == nil {
		return false
	}
	l.endErr = errObj
	close(l.ended)
	return true
}

// Ended takes the end of the process: its listens end with it.
func (ps *ProcessSessions) Ended() {
	ps.mu.Lock()
	ls := ps.byID
	ps.byID = map[string]*setupListen{}
	ps.open = nil
	ps.mu.Unlock()
	for _, l := range ls {
		close(l.ended)
	}
}

// ListenNotification takes a notification of the server's tagged with the ID of a listen of
// the setup's own (rest: its params without the tag), and returns the sessions it is for,
// which get it untagged: those whose listens ask for it. The acknowledgement is the setup's
// (and, for a listen that replaced another, has the other sessions read their lists again); a
// notification of a listen no longer open is dropped ("MUST NOT send any notification on the
// subscription before" the acknowledgement: the server's, which a session's listen waits for).
func (ps *ProcessSessions) ListenNotification(id, method string, rest json.RawMessage) []any {
	ps.mu.Lock()
	l := ps.open
	if l == nil || l.id != id {
		ps.mu.Unlock()
		return nil
	}
	if method == "notifications/subscriptions/acknowledged" {
		var gaps []func()
		if l.agreed == nil {
			agreed, _ := era.ReadFilter(rest)
			l.agreed = &agreed
			close(l.acked)
			ps.log.Debug("listening", "subscription", id, "agreed", string(rawjson.Marshal(agreed)))
			if l.again {
				gaps = ps.gapsBut(l.opener)
			}
			if l.again && l.opener == nil {
				ps.log.Debug("listened again: the listen it replaced ended late")
			}
		}
		ps.mu.Unlock()
		for _, gap := range gaps {
			gap()
		}
		return nil
	}
	defer ps.mu.Unlock()
	uri, _ := rawjson.StringMember(rest, "uri")
	var to []any
	for f, ls := range ps.listeners {
		if ls.filter.Wants(method) || method == "notifications/resources/updated" && ls.filter.Covers(uri) {
			to = append(to, f)
		}
	}
	return to
}

// gapsBut are the gaps of every session that listens but that of f (which reads its lists
// itself): between the listen the setup ended and the one it opened, nothing was subscribed at
// the server, and a change then was told to no one. Callers hold ps.mu.
func (ps *ProcessSessions) gapsBut(f any) []func() {
	var gaps []func()
	for g, l := range ps.listeners {
		if g != f {
			gaps = append(gaps, l.gap)
		}
	}
	return gaps
}
