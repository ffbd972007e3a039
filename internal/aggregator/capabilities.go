package aggregator

import "encoding/json"

// What the aggregator offers a client: the union of its servers' capabilities.

// unionCapabilities is what the aggregator offers, encoded for its answer to initialize. A
// client can only be told of changes to what it was offered at initialize, and a reload may
// add servers: so tools, prompts, resources and logging are always offered, with list changes
// (a list no server serves is empty; logging/setLevel is answered here and passed to the
// servers that log). Resource subscriptions and completions are offered when some server
// offers them, tasks as the union of the servers' tasks capabilities, and extensions (MCP
// Apps, ...) as the union of theirs. Built as JSON: the SDK's types have no tasks.
func unionCapabilities(servers []*server, tasks json.RawMessage) json.RawMessage {
	resources := map[string]bool{"listChanged": true}
	caps := map[string]any{
		"tools":     map[string]bool{"listChanged": true},
		"prompts":   map[string]bool{"listChanged": true},
		"resources": resources,
		"logging":   struct{}{},
	}
	for _, s := range servers {
		if r, ok := s.caps["resources"]; ok {
			var sub struct {
				Subscribe bool `json:"subscribe"`
			}
			_ = json.Unmarshal(r, &sub)
			if sub.Subscribe {
				resources["subscribe"] = true
			}
		}
		if s.offers("completions") {
			caps["completions"] = struct{}{}
		}
		var ext map[string]any
		if json.Unmarshal(s.caps["extensions"], &ext) == nil && len(ext) > 0 {
			merged, _ := caps["extensions"].(map[string]any)
			caps["extensions"] = mergeObjects(merged, ext)
		}
	}
	if tasks != nil {
		caps["tasks"] = tasks
	}
	b, _ := json.Marshal(caps)
	return b
}

// unionTasks is the tasks capability the aggregator offers: the union of the servers' (nil
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
