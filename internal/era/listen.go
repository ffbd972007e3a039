package era

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// Subscriptions (basic/patterns/subscriptions.mdx): in the modern era a client gets list
// changes and resource updates only on a subscriptions/listen request that asked for them,
// each notification tagged with the request's ID. "The server MUST send
// notifications/subscriptions/acknowledged as the first message carrying the subscription's
// ID ... and MUST NOT send any notification on the subscription before it." "The server MUST
// NOT send notification types the client has not explicitly requested."

// Filter is a SubscriptionFilter: what a listen asks for.
type Filter struct {
	Tools     bool     `json:"toolsListChanged,omitempty"`
	Prompts   bool     `json:"promptsListChanged,omitempty"`
	Resources bool     `json:"resourcesListChanged,omitempty"`
	URIs      []string `json:"resourceSubscriptions,omitempty"`
}

// ReadFilter reads the params of subscriptions/listen; ok is false when they have no filter.
func ReadFilter(params json.RawMessage) (f Filter, ok bool) {
	var p struct {
		Notifications *Filter `json:"notifications"`
	}
	if json.Unmarshal(params, &p) != nil || p.Notifications == nil {
		return f, false
	}
	return *p.Notifications, true
}

// Wants reports whether the filter asked for the list_changed notification method.
func (f *Filter) Wants(method string) bool {
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

// Covers reports whether the filter subscribed the resource uri, or a resource it is part of
// (PartOf).
func (f *Filter) Covers(uri string) bool {
	for _, sub := range f.URIs {
		if PartOf(uri, sub) {
			return true
		}
	}
	return false
}

// PartOf reports whether an update of the resource uri is one of the subscribed resource sub:
// uri is sub, or a resource under it (the updated URI "might be a sub-resource of the one that
// the client actually subscribed to", schema.ts ResourceUpdatedNotificationParams).
func PartOf(uri, sub string) bool {
	return uri == sub || strings.HasPrefix(uri, strings.TrimSuffix(sub, "/")+"/")
}

// Acknowledged is the params of notifications/subscriptions/acknowledged for the listen whose
// ID is id (encoded): what was agreed to.
func Acknowledged(f Filter, id json.RawMessage) json.RawMessage {
	return rawjson.Marshal(struct {
		Notifications Filter                     `json:"notifications"`
		Meta          map[string]json.RawMessage `json:"_meta"`
	}{f, map[string]json.RawMessage{MetaSubscriptionID: id}})
}

// Tag is the _meta member that tags the notifications of the listen whose ID is id (encoded).
func Tag(id json.RawMessage) string { return `"` + MetaSubscriptionID + `":` + string(id) }

// Tagged is a notification's params with the tag member added to its _meta.
func Tagged(params json.RawMessage, tag string) json.RawMessage {
	if len(params) == 0 {
		return json.RawMessage(`{"_meta":{` + tag + `}}`)
	}
	if ms, me, ok := rawjson.Member(params, "_meta"); ok {
		return rawjson.Replace(params, ms, me, rawjson.Prepend(params[ms:me], tag))
	}
	return rawjson.Prepend(params, `"_meta":{`+tag+`}`)
}

// Untag reads the subscription ID a notification's params are tagged with, and returns the
// params without the tag (without _meta when nothing else is in it); ok is false when the
// params carry no tag.
func Untag(params json.RawMessage) (id, rest json.RawMessage, ok bool) {
	ms, me, found := rawjson.Member(params, "_meta")
	if !found {
		return nil, params, false
	}
	is, ie, found := rawjson.Member(params[ms:me], MetaSubscriptionID)
	if !found {
		return nil, params, false
	}
	id = params[ms+is : ms+ie]
	meta := rawjson.Without(params[ms:me], MetaSubscriptionID)
	if string(meta) == "{}" {
		return id, rawjson.Without(params, "_meta"), true
	}
	return id, rawjson.Replace(params, ms, me, meta), true
}

// ListenFilter is what the aggregator asks a modern server's listen for: the list changes its
// capabilities announce (listChanged), and the resources uris.
func ListenFilter(caps map[string]json.RawMessage, uris []string) Filter {
	var f Filter
	announces := func(capability string) bool {
		var c struct {
			ListChanged bool `json:"listChanged"`
		}
		return json.Unmarshal(caps[capability], &c) == nil && c.ListChanged
	}
	f.Tools, f.Prompts, f.Resources, f.URIs = announces("tools"), announces("prompts"), announces("resources"), uris
	return f
}

// Empty reports whether the filter asks for nothing.
func (f Filter) Empty() bool { return !f.Tools && !f.Prompts && !f.Resources && len(f.URIs) == 0 }

// ListenParams are the params of subscriptions/listen for the filter.
func ListenParams(f Filter) json.RawMessage {
	return rawjson.Marshal(map[string]Filter{"notifications": f})
}

// Union is what f and g ask for together.
func (f Filter) Union(g Filter) Filter {
	u := Filter{Tools: f.Tools || g.Tools, Prompts: f.Prompts || g.Prompts, Resources: f.Resources || g.Resources}
	u.URIs = append(u.URIs, f.URIs...)
	for _, uri := range g.URIs {
		if !slices.Contains(u.URIs, uri) {
			u.URIs = append(u.URIs, uri)
		}
	}
	return u
}

// Includes reports whether f asks for everything g asks for.
func (f Filter) Includes(g Filter) bool {
	if g.Tools && !f.Tools || g.Prompts && !f.Prompts || g.Resources && !f.Resources {
		return false
	}
	for _, uri := range g.URIs {
		if !slices.Contains(f.URIs, uri) {
			return false
		}
	}
	return true
}

// Within is what of f the agreed filter g honours (an acknowledgement's filter, for a listen
// that asked for f).
func (f Filter) Within(g Filter) Filter {
	w := Filter{Tools: f.Tools && g.Tools, Prompts: f.Prompts && g.Prompts, Resources: f.Resources && g.Resources}
	for _, uri := range f.URIs {
		if slices.Contains(g.URIs, uri) {
			w.URIs = append(w.URIs, uri)
		}
	}
	return w
}
