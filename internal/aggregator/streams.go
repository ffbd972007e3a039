package aggregator

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// A modern client's subscriptions/listen streams (basic/patterns/subscriptions.mdx): what a
// legacy client is sent unasked (list changes, updates of the resources it subscribed to)
// reaches a modern client only on a stream that asked for it, each notification tagged with
// the stream's ID. A stream is a standing call of the client's in the table (its cancellation
// finds it there, as any other); a subscribed resource is subscribed at its server once for
// all the streams that want it.

// stream is a modern client's subscriptions/listen: what it asked for, and the _meta member
// that tags its notifications.
type stream struct {
	filter era.Filter // the resources it asked for while opening, then those agreed to
	tag    string
	// opening is true until the stream is acknowledged: it is in the table (the client's
	// cancellation finds it) while its resources are subscribed, and gets nothing before its
	// acknowledgement. Guarded by session.streamsMu, as filter is once the stream is open.
	opening bool
}

// listen opens a subscriptions/listen stream: it is in the table at once, its resources are
// subscribed at their servers (on a goroutine: that waits for servers), then it is
// acknowledged with what the aggregator agreed to, and open. One cancelled meanwhile is never
// acknowledged, and what was subscribed for it alone is unsubscribed.
func (se *session) listen(m *jsonrpc.Request) {
	f, ok := era.ReadFilter(m.Params)
	if !ok {
		se.answerClient(m.ID, nil, invalidParams("subscriptions/listen needs params with the object \"notifications\" (a SubscriptionFilter)"))
		return
	}
	// A subscription ends when "the underlying transport closes": the end of the input does not
	// wait for its answer (basic/patterns/subscriptions.mdx, "Cancellation").
	se.client.Standing(m.ID)
	id := stdio.IDJSON(m.ID)
	st := &call{fromID: m.ID, method: m.Method, doing: "listening", stream: &stream{filter: f, tag: era.Tag(id), opening: true}}
	se.a.inflight.keep(st, standing)
	go func() {
		agreed := se.subscribeAll(st)
		se.streamsMu.Lock()
		if !se.a.inflight.holds(st) { // cancelled while its resources were subscribed
			unwanted := se.unwanted(agreed)
			se.streamsMu.Unlock()
			se.unsubscribe(unwanted)
			return
		}
		st.stream.filter.URIs = agreed
		st.stream.opening = false
		se.writeClient(stdio.Notification("notifications/subscriptions/acknowledged", era.Acknowledged(st.stream.filter, id)))
		se.streamsMu.Unlock()
	}()
}

// unlisten closes the stream st the client cancelled: its resources are unsubscribed where no
// other stream wants them. The stream gets no answer: the client ended it. One still opening
// is left to its opening, which finds it cancelled.
func (se *session) unlisten(st *call) {
	se.streamsMu.Lock()
	var unwanted []string
	if !st.stream.opening {
		unwanted = se.unwanted(st.stream.filter.URIs)
	}
	se.streamsMu.Unlock()
	go se.unsubscribe(unwanted)
}

// unwanted are the URIs of uris that no stream in the table wants (one still opening wants
// what it asked for). Callers hold streamsMu.
func (se *session) unwanted(uris []string) []string {
	wanted := map[string]bool{}
	for _, o := range se.a.inflight.streams() {
		for _, uri := range o.stream.filter.URIs {
			wanted[uri] = true
		}
	}
	var out []string
	for _, uri := range uris {
		if !wanted[uri] {
			out = append(out, uri)
		}
	}
	return out
}

// unsubscribe unsubscribes each URI at its server.
func (se *session) unsubscribe(uris []string) {
	for _, uri := range uris {
		se.subscribeAt(uri, "resources/unsubscribe")
	}
}

// subscribeAll subscribes each URI the opening stream st asks for at its server (once for
// every open stream that wants it), and returns those subscribed: a URI no server lists, or
// whose server does not offer subscriptions or refuses it, is left out of the
// acknowledgement ("Notification types the server does not support are omitted").
func (se *session) subscribeAll(st *call) []string {
	se.streamsMu.Lock()
	uris := st.stream.filter.URIs
	subscribed := map[string]bool{}
	for _, o := range se.a.inflight.streams() {
		if !o.stream.opening {
			for _, uri := range o.stream.filter.URIs {
				subscribed[uri] = true
			}
		}
	}
	se.streamsMu.Unlock()
	var agreed []string
	for _, uri := range uris {
		if subscribed[uri] || se.subscribeAt(uri, "resources/subscribe") {
			agreed = append(agreed, uri)
		}
	}
	return agreed
}

// subscribeAt subscribes (or unsubscribes) uri at the server that owns it, as its era does;
// it reports whether the server accepted it.
func (se *session) subscribeAt(uri, method string) bool {
	s, why := se.a.catalog.Load().resourceOwner(uri)
	if s == nil || !s.subscribes() {
		if s != nil {
			why = "its server does not offer resource subscriptions"
		}
		se.a.log.Debug("a resource of a subscriptions/listen is not subscribed", "uri", uri, "why", why)
		return false
	}
	ctx, cancel := context.WithTimeout(se.a.closingCtx, se.a.opts.StartupTimeout)
	defer cancel()
	if errObj := s.side().subscribe(ctx, s, method, uri); errObj != nil {
		s.failureLog()("the server refused a resource subscription of the client", "uri", uri, "method", method, "error", string(errObj))
		return false
	}
	return true
}

// subscribes reports whether the server offers resource subscriptions.
func (s *server) subscribes() bool {
	var r struct {
		Subscribe bool `json:"subscribe"`
	}
	_ = json.Unmarshal(s.caps["resources"], &r)
	return r.Subscribe
}

// streamListChanged tells a modern client that a list of the aggregator's changed, on each
// stream that asked for it.
func (se *session) streamListChanged(method string) {
	se.streamsMu.Lock()
	defer se.streamsMu.Unlock()
	for _, st := range se.a.inflight.streams() {
		if !st.stream.opening && st.stream.filter.Wants(method) {
			se.writeClient(stdio.Notification(method, era.Tagged(nil, st.stream.tag)))
		}
	}
}

// streamResourceUpdated passes a server's notifications/resources/updated to a modern client,
// on each stream that subscribed the URI, or a resource it is part of.
func (se *session) streamResourceUpdated(params json.RawMessage) {
	var p struct {
		URI *string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil || p.URI == nil {
		return
	}
	se.streamsMu.Lock()
	defer se.streamsMu.Unlock()
	for _, st := range se.a.inflight.streams() {
		if !st.stream.opening && st.stream.filter.Covers(*p.URI) {
			se.writeClient(stdio.Notification("notifications/resources/updated", era.Tagged(params, st.stream.tag)))
		}
	}
}
