package aggregator

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// A modern client's subscriptions/listen streams (basic/patterns/subscriptions.mdx): what a
// legacy client is sent unasked (list changes, updates of the resources it subscribed to)
// reaches a modern client only on a stream that asked for it, each notification tagged with
// the stream's ID. The aggregator's own list changes (a server's list changed, a reload, a
// crash) are sent as they are to a legacy client; a subscribed resource is subscribed at its
// server with resources/subscribe, once for all the streams that want it.
//
// "The server MUST send notifications/subscriptions/acknowledged as the first message carrying
// the subscription's ID ... and MUST NOT send any notification on the subscription before it."
// "The server MUST NOT send notification types the client has not explicitly requested."

// listenFilter is a SubscriptionFilter.
type listenFilter struct {
	Tools     bool     `json:"toolsListChanged,omitempty"`
	Prompts   bool     `json:"promptsListChanged,omitempty"`
	Resources bool     `json:"resourcesListChanged,omitempty"`
	URIs      []string `json:"resourceSubscriptions,omitempty"`
}

// wants reports whether the filter asked for the list_changed notification method.
func (f *listenFilter) wants(method string) bool {
	switch method {
	case "notifications/tools/list_changed":
		return f.Tools
	case "notifications/prompts/list_changed":
		return f.Prompts
	case "notifications/resources/list_changed":
		return f.Resources
	}
	return false
}

// stream is one listen of the client's, from its acknowledgement to its cancellation.
type stream struct {
	id     jsonrpc.ID
	tag    string // the _meta member that tags its notifications
	filter listenFilter
}

// streams are the client's open listens, and how many of them subscribe each resource URI.
type streams struct {
	mu   sync.Mutex
	open map[jsonrpc.ID]*stream
	refs map[string]int
}

// listen opens a subscriptions/listen stream: the resources are subscribed at their servers
// first, then the stream is acknowledged with what the aggregator agreed to, and it is open.
// It runs on its own: subscribing waits for servers.
func (a *Aggregator) listen(m *jsonrpc.Request) {
	var p struct {
		Notifications *listenFilter `json:"notifications"`
	}
	if json.Unmarshal(m.Params, &p) != nil || p.Notifications == nil {
		a.answerClient(m.ID, nil, invalidParams("subscriptions/listen needs params with the object \"notifications\" (a SubscriptionFilter)"))
		return
	}
	// A subscription ends when "the underlying transport closes": the end of the input does not
	// wait for its answer (basic/patterns/subscriptions.mdx, "Cancellation").
	a.client.Standing(m.ID)
	id := encodeID(m.ID)
	st := &stream{id: m.ID, tag: `"` + metaSubscriptionID + `":` + string(id), filter: *p.Notifications}
	go func() {
		st.filter.URIs = a.subscribeAll(st.filter.URIs)
		ack := marshal(struct {
			Notifications listenFilter               `json:"notifications"`
			Meta          map[string]json.RawMessage `json:"_meta"`
		}{st.filter, map[string]json.RawMessage{metaSubscriptionID: id}})
		a.listens.mu.Lock()
		defer a.listens.mu.Unlock()
		if a.listens.open == nil {
			a.listens.open = map[jsonrpc.ID]*stream{}
		}
		a.writeClient(notification("notifications/subscriptions/acknowledged", ack))
		a.listens.open[m.ID] = st
	}()
}

// unlisten closes the stream a client's notifications/cancelled names: its resources are
// unsubscribed where no other stream wants them. The stream gets no answer: the client ended it.
func (a *Aggregator) unlisten(m *jsonrpc.Request) {
	id, _, ok := stdio.ParseCancel(m.Params)
	if !ok {
		return
	}
	a.listens.mu.Lock()
	st := a.listens.open[id]
	delete(a.listens.open, id)
	a.listens.mu.Unlock()
	if st != nil {
		go a.unsubscribeAll(st.filter.URIs)
	}
}

// subscribeAll subscribes each URI at its server (once for every stream that wants it), and
// returns those subscribed: a URI no server lists, or whose server does not offer
// subscriptions or refuses it, is left out of the acknowledgement ("Notification types the
// server does not support are omitted").
func (a *Aggregator) subscribeAll(uris []string) []string {
	var agreed []string
	for _, uri := range uris {
		a.listens.mu.Lock()
		if a.listens.refs[uri] > 0 {
			a.listens.refs[uri]++
			a.listens.mu.Unlock()
			agreed = append(agreed, uri)
			continue
		}
		a.listens.mu.Unlock()
		if !a.subscribeAt(uri, "resources/subscribe") {
			continue
		}
		a.listens.mu.Lock()
		if a.listens.refs == nil {
			a.listens.refs = map[string]int{}
		}
		a.listens.refs[uri]++
		a.listens.mu.Unlock()
		agreed = append(agreed, uri)
	}
	return agreed
}

// unsubscribeAll takes the streams' interest in uris back, and unsubscribes those no stream
// wants any more.
func (a *Aggregator) unsubscribeAll(uris []string) {
	for _, uri := range uris {
		a.listens.mu.Lock()
		a.listens.refs[uri]--
		last := a.listens.refs[uri] == 0
		if last {
			delete(a.listens.refs, uri)
		}
		a.listens.mu.Unlock()
		if last {
			a.subscribeAt(uri, "resources/unsubscribe")
		}
	}
}

// subscribeAt sends resources/subscribe (or unsubscribe) for uri to the server that owns it,
// and notes it to be done again on the server's new processes; it reports whether the server
// accepted it.
func (a *Aggregator) subscribeAt(uri, method string) bool {
	s, why := a.catalog.Load().resourceOwner(uri)
	if s == nil || !s.subscribes() {
		if s != nil {
			why = "its server does not offer resource subscriptions"
		}
		a.log.Debug("a resource of a subscriptions/listen is not subscribed", "uri", uri, "why", why)
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.opts.StartupTimeout)
	defer cancel()
	if s.era == modern {
		a.setup.subscribed(method, uri, s.key)
		if errObj := a.subscribeOnListen(ctx, s, uri, method); errObj != nil {
			s.failureLog()("the server refused a resource subscription of the client", "uri", uri, "method", method, "error", string(errObj))
			return false
		}
		return true
	}
	params, _ := json.Marshal(map[string]string{"uri": uri})
	if _, err := a.call(ctx, s, method, method+" for a subscriptions/listen of the client", params); err != nil {
		s.failureLog()("the server refused a resource subscription of the client", "uri", uri, "method", method, "error", err)
		return false
	}
	a.setup.subscribed(method, uri, s.key)
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

// listChanged tells the client that a list of the aggregator's changed: a legacy client by the
// notification, a modern one on each stream that asked for it.
func (a *Aggregator) listChanged(method string) {
	if !a.modernClient() {
		a.writeClient(notification(method, nil))
		return
	}
	a.listens.mu.Lock()
	defer a.listens.mu.Unlock()
	for _, st := range a.listens.open {
		if st.filter.wants(method) {
			a.writeClient(notification(method, []byte("{\"_meta\":{"+st.tag+"}}")))
		}
	}
}

// resourceUpdated passes a server's notifications/resources/updated to the client: to a modern
// one on each stream that subscribed the URI, or a resource it is part of ("This might be a
// sub-resource of the one that the client actually subscribed to").
func (a *Aggregator) resourceUpdated(params json.RawMessage) {
	if !a.modernClient() {
		a.toClient(notification("notifications/resources/updated", params))
		return
	}
	uri, ok := rawjson.StringMember(params, "uri")
	if !ok {
		return
	}
	a.listens.mu.Lock()
	defer a.listens.mu.Unlock()
	for _, st := range a.listens.open {
		for _, sub := range st.filter.URIs {
			if uri == sub || strings.HasPrefix(uri, strings.TrimSuffix(sub, "/")+"/") {
				a.writeClient(notification("notifications/resources/updated", tagged(params, st.tag)))
				break
			}
		}
	}
}

// tagged is a notification's params with member added to its _meta.
func tagged(params json.RawMessage, member string) json.RawMessage {
	if ms, me, ok := rawjson.Member(params, "_meta"); ok {
		return rawjson.Replace(params, ms, me, rawjson.Prepend(params[ms:me], member))
	}
	return rawjson.Prepend(params, `"_meta":{`+member+`}`)
}
