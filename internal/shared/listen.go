package shared

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// Listens of a modern server. Every session that has the server opens a subscriptions/listen
// for its list changes and resource updates. The specification lets one connection hold many
// ("A client MAY have multiple active subscriptions concurrently", basic/patterns/
// subscriptions.mdx), but the go-sdk's server keeps one per kind and connection (the latest)
// and ends a kind's subscription when any listen of the connection ends: relayed as they come,
// the sessions' listens would take each other's notifications away. So the server hears one
// listen of the shared process's own, asking for what the sessions ask together; each
// session's listen is acknowledged with what of its own filter that one was agreed to, and
// gets the notifications its filter asks for, tagged with its own ID. A session that asks for
// more than the open listen has makes the shared process listen again: the old one is ended
// first, and its end awaited (the go-sdk answers a cancelled listen once it let go of it; a
// server that says nothing more gets listenGrace), before the new one is opened. A session's
// listen that ends costs the server nothing: the open one asks for at least as much.

// listenGrace is how long the end of a cancelled listen is awaited before the next is opened.
const listenGrace = 2 * time.Second

// sessionListen is a session's listen.
type sessionListen struct {
	a      *Attachment
	id     jsonrpc.ID
	tag    json.RawMessage // its ID, encoded: what its notifications are tagged with
	filter era.Filter
	acking bool // its acknowledgement is made (acks)
	acked  bool // and handed to its session: notifications follow it
}

// ownListen is the shared process's listen at the server.
type ownListen struct {
	did    string
	filter era.Filter  // what it asked for
	agreed *era.Filter // what the acknowledgement agreed to; nil before it
	ending bool        // cancelled: the next opens once it has ended
	timer  *time.Timer
	// again says it replaced one that was ended to ask for more: between the two, nothing was
	// subscribed at the server, and a change then was told to no one.
	again bool
}

// listen takes a session's subscriptions/listen for a modern server. Callers hold p.mu; it
// unlocks it.
func (p *proc) listen(a *Attachment, m *jsonrpc.Request) {
	f, _ := era.ReadFilter(m.Params)
	p.listens = append(p.listens, &sessionListen{a: a, id: m.ID, tag: stdio.IDJSON(m.ID), filter: f})
	p.listenParams = m.Params
	var send [][]byte
	switch {
	case p.own == nil:
		send = p.openListen()
	case p.own.ending:
		// The next opens with the union once the old has ended.
	case !p.own.filter.Includes(p.wanted()):
		send = p.endListen()
	}
	acks := p.acks()
	p.mu.Unlock()
	if send != nil {
		p.conn.Send(nil, send...)
	}
	for _, o := range acks {
		// Made on the session's goroutine: posted, and acked as it is handed over, so that no
		// notification of the listen reaches the session before it.
		o.a.post(o.msg, func() {
			p.mu.Lock()
			o.l.acked = true
			p.mu.Unlock()
		})
	}
}

// wanted is what the sessions' listens ask for together. Callers hold p.mu.
func (p *proc) wanted() era.Filter {
	var u era.Filter
	for _, l := range p.listens {
		u = u.Union(l.filter)
	}
	return u
}

// openListen opens the shared process's listen with what the sessions want, in the envelope
// of the latest session's listen; it returns the line to send. Callers hold p.mu.
func (p *proc) openListen() [][]byte {
	p.seq++
	own := &ownListen{did: "s-listen-" + strconv.FormatUint(p.seq, 10), filter: p.wanted()}
	p.own = own
	params := p.listenParams
	if ns, ne, ok := rawjson.Member(params, "notifications"); ok {
		params = rawjson.Replace(params, ns, ne, rawjson.Marshal(own.filter))
	}
	return stdio.Request(own.did, "subscriptions/listen", params)
}

// endListen cancels the shared process's listen, so that the next one asks for more; it
// returns the line to send. Callers hold p.mu.
func (p *proc) endListen() [][]byte {
	own := p.own
	own.ending = true
	own.timer = time.AfterFunc(listenGrace, func() { p.listenEnded(own.did, deliverNow, nil) })
	return stdio.Cancelled(own.did, "mcp-simple-aggregator's shared process listens again with more subscriptions")
}

// listenEnded takes the end of the shared process's listen did (its answer, or the grace after
// its cancellation: answer is nil): the sessions' listens are answered as it was (give hands
// the answers over) when the server ended it, else the next one opens when a session still
// listens. It reports whether did was the listen.
func (p *proc) listenEnded(did string, give func(*Attachment, jsonrpc.Message), answer *jsonrpc.Response) bool {
	p.mu.Lock()
	own := p.own
	if own == nil || own.did != did {
		p.mu.Unlock()
		return false
	}
	if own.timer != nil {
		own.timer.Stop()
	}
	p.own = nil
	var ended []*sessionListen
	var send [][]byte
	switch {
	case !own.ending: // the server ended it: so do the sessions' listens
		ended, p.listens = p.listens, nil
	case len(p.listens) > 0:
		send = p.openListen()
		p.own.again = true
	}
	p.mu.Unlock()
	if send != nil {
		p.conn.Send(nil, send...)
	}
	for _, l := range ended {
		give(l.a, &jsonrpc.Response{ID: l.id, Result: answer.Result, Error: answer.Error})
	}
	return true
}

// unlisten ends a session's listen that its session cancelled, and answers it (as the go-sdk
// answers a cancelled listen, which the session awaits before it listens again); it reports
// whether id was one. Callers hold p.mu.
func (p *proc) unlisten(a *Attachment, id jsonrpc.ID) bool {
	i := slices.IndexFunc(p.listens, func(l *sessionListen) bool { return l.a == a && l.id == id })
	if i < 0 {
		return false
	}
	p.listens = slices.Delete(p.listens, i, i+1)
	a.post(&jsonrpc.Response{ID: id, Result: json.RawMessage(`{}`)}, nil)
	return true
}

// dropListens forgets the listens of a session that detached. Callers hold p.mu.
func (p *proc) dropListens(a *Attachment) {
	p.listens = slices.DeleteFunc(p.listens, func(l *sessionListen) bool { return l.a == a })
}

// listenNotification takes a notification tagged with the shared process's listen did: the
// acknowledgement acknowledges the sessions' listens, the others go to the listens whose
// filters ask for them, under their own tags. A notification of a listen no longer open is
// dropped. rest is the params without the tag.
func (p *proc) listenNotification(did, method string, rest json.RawMessage) {
	p.mu.Lock()
	if p.own == nil || p.own.did != did || p.own.ending {
		p.mu.Unlock()
		return
	}
	if method == "notifications/subscriptions/acknowledged" {
		agreed, _ := era.ReadFilter(rest)
		p.own.agreed = &agreed
		acks := p.acks()
		for _, o := range acks {
			o.l.acked = true // handed over below, before anything else this reader reads
		}
		if p.own.again {
			acks = append(acks, p.mayHaveChanged(agreed)...)
		}
		p.mu.Unlock()
		p.handAll(acks)
		return
	}
	var out []outgoing
	uri := stringParam(rest, "uri")
	for _, l := range p.listens {
		if !l.acked {
			continue // "MUST NOT send any notification on the subscription before it"
		}
		if l.filter.Wants(method) || method == "notifications/resources/updated" && l.filter.Covers(uri) {
			out = append(out, outgoing{a: l.a, msg: &jsonrpc.Request{Method: method, Params: era.Tagged(rest, era.Tag(l.tag))}})
		}
	}
	p.mu.Unlock()
	p.handAll(out)
}

// acks acknowledges the sessions' listens that the open listen covers, once it is
// acknowledged: each with what of its filter was agreed to. The caller sets each listen's acked
// as its acknowledgement is handed over. Callers hold p.mu.
func (p *proc) acks() []outgoing {
	own := p.own
	if own == nil || own.ending || own.agreed == nil {
		return nil
	}
	var out []outgoing
	for _, l := range p.listens {
		if !l.acking && own.filter.Includes(l.filter) {
			l.acking = true
			out = append(out, outgoing{a: l.a, l: l, msg: &jsonrpc.Request{Method: "notifications/subscriptions/acknowledged", Params: era.Acknowledged(l.filter.Within(*own.agreed), l.tag)}})
		}
	}
	return out
}

// mayHaveChanged tells every acknowledged listen, once the shared process listens again, that
// the lists it listens for may have changed while nothing was subscribed at the server: a
// list_changed for each. Its session reads them again, and tells its client of what did
// change, and only of that. Not resources/updated: a session passes it on to its client as it
// is, which would tell of an update that may not have been. Callers hold p.mu.
func (p *proc) mayHaveChanged(agreed era.Filter) []outgoing {
	var out []outgoing
	for _, l := range p.listens {
		if !l.acked {
			continue
		}
		f := l.filter.Within(agreed)
		for _, c := range []struct {
			on     bool
			method string
		}{{f.Tools, "notifications/tools/list_changed"}, {f.Prompts, "notifications/prompts/list_changed"}, {f.Resources, "notifications/resources/list_changed"}} {
			if c.on {
				out = append(out, outgoing{a: l.a, msg: &jsonrpc.Request{Method: c.method, Params: era.Tagged(json.RawMessage(`{}`), era.Tag(l.tag))}})
			}
		}
	}
	return out
}

// outgoing is a message for a session; l is the listen it acknowledges, if it does.
type outgoing struct {
	a   *Attachment
	l   *sessionListen
	msg jsonrpc.Message
}

// handAll hands each its message, from readChild.
func (p *proc) handAll(ms []outgoing) {
	for _, m := range ms {
		p.hand(m.a, m.msg)
	}
}

// deliverNow hands a a message outside readChild (a timer's).
func deliverNow(a *Attachment, msg jsonrpc.Message) { a.deliver(msg, false) }
