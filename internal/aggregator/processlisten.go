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

// The listen of a shared modern server's process. Every session that has the server listens
// for its list changes and its client's resource subscriptions (modernServer.listenAt). The
// specification lets one connection hold many listens ("A client MAY have multiple active
// subscriptions concurrently", basic/patterns/subscriptions.mdx), but the go-sdk's server keeps
// one per kind and connection (the latest) and ends a kind's subscription when any listen of
// the connection ends (docs/protocol-eras.md §6): the sessions' listens, each on its own, would
// take each other's notifications away. So the process hears one listen, the setup's own,
// asking for what the sessions ask together; each session's listen is what of it the server
// agreed to, and the process's reader hands each session the notifications its filter asks for
// (ListenNotification), without the tag. A session that asks for other than the sessions asked
// together (more, or less: a resource no session subscribes to any more is not to be
// updated) makes the setup listen again: the old one is ended first, and its end awaited (the go-sdk
// answers a cancelled listen once it let go of it; a server that says nothing more gets the
// grace), before the new one is opened; the other sessions then read the lists again (gap), for
// changes while nothing was subscribed. A session that stops using the process leaves the listen
// as it is: it asks for at least as much as the others.

// setupListen is a subscriptions/listen of the setup's own.
type setupListen struct {
	id     string
	filter era.Filter  // what it asked for
	agreed *era.Filter // what its acknowledgement agreed to; nil before it
	ending bool        // cancelled by the setup, to listen again
	acked  chan struct{}
	ended  chan struct{} // closed by its answer (Answered), or by the process's end
	endErr json.RawMessage
}

// listener is a session's part in the process's listen.
type listener struct {
	filter era.Filter
	gap    func() // reads the lists again, after the setup listened again for another session
}

// listen makes the process's listen carry what the session of f asks for (filter; params: the
// params of its subscriptions/listen, in its envelope, which the setup's listen takes), with
// what the other sessions ask, and returns the URIs of filter the server agreed to. It waits
// for the acknowledgement until ctx ends, or closed is closed (the session's use of the process
// ended); grace bounds the wait for the end of a listen the setup cancelled to listen again,
// and bound the wait for one that did not end within the grace (endedLate).
func (ps *ProcessSetup) listen(ctx context.Context, closed <-chan struct{}, f any, params json.RawMessage, filter era.Filter, grace, bound time.Duration, gap func()) ([]string, error) {
	ps.reopen.Lock()
	defer ps.reopen.Unlock()
	ps.mu.Lock()
	if ps.members[f] == nil {
		ps.mu.Unlock()
		return nil, errors.New("the session no longer uses the process")
	}
	ps.listeners[f] = &listener{filter: filter, gap: gap}
	want := ps.wanted()
	old := ps.open
	if old != nil && !old.ending && old.filter.Includes(want) && want.Includes(old.filter) {
		ps.mu.Unlock()
		return ps.agreed(ctx, closed, old, filter)
	}
	if old != nil {
		old.ending = true
	}
	ps.mu.Unlock()
	var late *setupListen // the old listen, when its end was not seen
	if old != nil {
		ps.write(stdio.Cancelled(old.id, "mcp-simple-aggregator listens again with more subscriptions")...)
		wait := time.NewTimer(grace)
		select {
		case <-old.ended: // the go-sdk answers a cancelled listen once it let go of it
		case <-wait.C: // others say nothing more (basic/patterns/subscriptions.mdx)
			late = old
		}
		wait.Stop()
	}
	if want.Empty() {
		ps.mu.Lock()
		ps.open = nil
		ps.mu.Unlock()
		return nil, nil
	}
	cur := ps.openListen(want, params)
	if late != nil {
		go ps.endedLate(late, cur, params, grace, bound)
	}
	agreed, err := ps.agreed(ctx, closed, cur, filter)
	if err == nil && old != nil {
		ps.gaps(f)
	}
	return agreed, err
}

// wanted is what the sessions' listens ask for together. Callers hold ps.mu.
func (ps *ProcessSetup) wanted() era.Filter {
	var u era.Filter
	for _, l := range ps.listeners {
		u = u.Union(l.filter)
	}
	return u
}

// openListen opens a listen of the setup's own asking for want, in the envelope of params.
func (ps *ProcessSetup) openListen(want era.Filter, params json.RawMessage) *setupListen {
	l := &setupListen{id: ps.newID(), filter: want, acked: make(chan struct{}), ended: make(chan struct{})}
	if ns, ne, ok := rawjson.Member(params, "notifications"); ok {
		params = rawjson.Replace(params, ns, ne, rawjson.Marshal(want))
	}
	ps.mu.Lock()
	ps.open = l
	ps.byID[l.id] = l
	ps.mu.Unlock()
	ps.write(stdio.Request(l.id, "subscriptions/listen", params)...)
	return l
}

// agreed waits for the acknowledgement of the listen l, and returns what of filter's URIs it
// agreed to.
func (ps *ProcessSetup) agreed(ctx context.Context, closed <-chan struct{}, l *setupListen, filter era.Filter) ([]string, error) {
	select {
	case <-l.acked:
		ps.mu.Lock()
		agreed := filter.Within(*l.agreed)
		ps.mu.Unlock()
		return agreed.URIs, nil
	case <-l.ended:
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

// gaps has every session but that of f that listens read the lists again: between the listen
// the setup ended and the one it opened, nothing was subscribed at the server, and a change
// then was told to no one.
func (ps *ProcessSetup) gaps(f any) {
	ps.mu.Lock()
	var gaps []func()
	for g, l := range ps.listeners {
		if g != f && l.gap != nil {
			gaps = append(gaps, l.gap)
		}
	}
	ps.mu.Unlock()
	for _, gap := range gaps {
		gap()
	}
}

// endedLate listens again when the listen old, whose end listen stopped waiting for, ends
// after cur was opened in its place (within bound): the go-sdk's server, letting go of old,
// ends the list subscriptions of the connection, cur's with them. A server that never answers
// a cancelled listen says nothing more.
func (ps *ProcessSetup) endedLate(old, cur *setupListen, params json.RawMessage, grace, bound time.Duration) {
	select {
	case <-old.ended:
	case <-time.After(bound):
		ps.forget(old)
		return
	}
	ps.reopen.Lock()
	defer ps.reopen.Unlock()
	ps.mu.Lock()
	still := ps.open == cur && !cur.ending
	if still {
		cur.ending = true
	}
	want := ps.wanted()
	ps.mu.Unlock()
	if !still {
		return // listened again meanwhile
	}
	ps.write(stdio.Cancelled(cur.id, "mcp-simple-aggregator listens again: the listen it replaced ended late")...)
	select {
	case <-cur.ended:
	case <-time.After(grace):
	}
	next := ps.openListen(want, params)
	select {
	case <-next.acked:
		ps.log.Debug("listened again: the listen it replaced ended late")
		ps.gaps(nil)
	case <-next.ended:
	case <-time.After(bound):
	}
}

// forget drops a listen of the setup's whose end will not come.
func (ps *ProcessSetup) forget(l *setupListen) {
	ps.mu.Lock()
	delete(ps.byID, l.id)
	ps.mu.Unlock()
}

// listenEnded takes the answer to a listen of the setup's: the server ended it, or let go of
// it once cancelled. It reports whether id was one.
func (ps *ProcessSetup) listenEnded(id string, errObj json.RawMessage) bool {
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

// ListenNotification takes a notification of the server's tagged with the ID of a listen of
// the setup's own (rest: its params without the tag), and returns the sessions it is for,
// which get it untagged: those whose listens ask for it. The acknowledgement is the setup's;
// a notification of a listen no longer open is dropped ("MUST NOT send any notification on
// the subscription before" the acknowledgement: the server's, which a session's listen waits
// for).
func (ps *ProcessSetup) ListenNotification(id, method string, rest json.RawMessage) []any {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	l := ps.open
	if l == nil || l.id != id || l.ending {
		return nil
	}
	if method == "notifications/subscriptions/acknowledged" {
		if l.agreed == nil {
			agreed, _ := era.ReadFilter(rest)
			l.agreed = &agreed
			close(l.acked)
			ps.log.Debug("listening", "subscription", id, "agreed", rawjson.Marshal(agreed))
		}
		return nil
	}
	uri, _ := rawjson.StringMember(rest, "uri")
	var to []any
	for f, ls := range ps.listeners {
		if ls.filter.Wants(method) || method == "notifications/resources/updated" && ls.filter.Covers(uri) {
			to = append(to, f)
		}
	}
	return to
}
