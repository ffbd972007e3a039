package era

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// Answers across the eras: only the envelope is translated. A result of one era reaches a peer
// of the same era byte for byte; a legacy result gets the modern result envelope for a modern
// client, and a modern result loses it for a legacy one.

// Translate is the answer (a result, or an error object) to a request of method of a peer of
// era from, as a peer of era to has it. The aggregator's own answers are of the legacy era's
// shape. A legacy resources/read result gets the cache hint that is "required" of it in the
// modern era (server/utilities/caching.mdx): stale at once, private.
func Translate(method string, from, to Era, result, errObj json.RawMessage) (json.RawMessage, json.RawMessage) {
	switch {
	case from == to:
		return result, errObj
	case to == Modern:
		if errObj == nil && method == "resources/read" {
			result = WithCacheHint(result, CacheHint{})
		}
		return ModernAnswer(result, errObj)
	case errObj != nil:
		return nil, errObj
	}
	return LegacyAnswer(result), nil
}

// ModernAnswer puts a legacy answer in the modern envelope: a result without resultType gets
// "complete" ("Every result MUST include resultType", basic/index.mdx); the legacy
// resource-not-found code -32002 becomes -32602 ("servers MUST NOT emit -32002"), and a -32042
// that names no URL to ask for -32603 ("MUST NOT emit -32042").
func ModernAnswer(result, errObj json.RawMessage) (json.RawMessage, json.RawMessage) {
	if errObj != nil {
		if cs, ce, ok := rawjson.Member(errObj, "code"); ok {
			switch string(errObj[cs:ce]) {
			case strconv.Itoa(CodeResourceNotFound):
				errObj = rawjson.Replace(errObj, cs, ce, []byte(strconv.Itoa(int(jsonrpc.CodeInvalidParams))))
			case strconv.Itoa(CodeURLElicitationRequired):
				errObj = rawjson.Replace(errObj, cs, ce, []byte(strconv.Itoa(int(jsonrpc.CodeInternalError))))
			}
		}
		return nil, errObj
	}
	if !rawjson.Has(result, "resultType") {
		result = rawjson.Prepend(result, `"resultType":"complete"`)
	}
	return result, nil
}

// LegacyAnswer is a modern result as a legacy client has it: without the members of the modern
// result envelope (resultType, ttlMs, cacheScope, and the serverInfo in _meta, whose _meta goes
// when nothing else is in it); the rest as the server wrote it.
func LegacyAnswer(result json.RawMessage) json.RawMessage {
	if ms, me, ok := rawjson.Member(result, "_meta"); ok && rawjson.Has(result[ms:me], MetaServerInfo) {
		meta := rawjson.Without(result[ms:me], MetaServerInfo)
		if string(meta) == "{}" {
			result = rawjson.Without(result, "_meta")
		} else {
			result = rawjson.Replace(result, ms, me, meta)
		}
	}
	if rawjson.Has(result, "resultType") || rawjson.Has(result, "ttlMs") || rawjson.Has(result, "cacheScope") {
		result = rawjson.Without(result, "resultType", "ttlMs", "cacheScope")
	}
	return result
}

// ResultType is the resultType of a modern result: "complete", "input_required", "task"; ""
// when it has none (a legacy result).
func ResultType(result json.RawMessage) string {
	rt, _ := rawjson.StringMember(result, "resultType")
	return rt
}

// CacheHint is the ttlMs and cacheScope of a cacheable result (server/utilities/caching.mdx).
// The zero value is what a legacy server's result stands for: stale at once (ttlMs 0), and
// private, since nothing says its data is the same for every user.
type CacheHint struct {
	TTLMs  int64
	Public bool
}

// Merge is the cache hint of a result made of parts: the smallest ttlMs, private when any part
// is ("Servers MUST apply the same cacheScope to all response pages", caching.mdx).
func (h CacheHint) Merge(o CacheHint) CacheHint {
	return CacheHint{TTLMs: min(h.TTLMs, o.TTLMs), Public: h.Public && o.Public}
}

// PageHint is the cache hint of one page of a modern server's list result.
func PageHint(page map[string]json.RawMessage) CacheHint {
	var ttl int64
	_ = json.Unmarshal(page["ttlMs"], &ttl)
	var scope string
	_ = json.Unmarshal(page["cacheScope"], &scope)
	return CacheHint{TTLMs: max(ttl, 0), Public: scope == "public"}
}

// WithCacheHint adds ttlMs and cacheScope to a cacheable result that has none ("required" on
// the list results and resources/read, caching.mdx): a modern server's own pass, and an
// interim result (input_required) carries none.
func WithCacheHint(result json.RawMessage, h CacheHint) json.RawMessage {
	if rawjson.Has(result, "ttlMs") || ResultType(result) == "input_required" {
		return result
	}
	scope := "private"
	if h.Public {
		scope = "public"
	}
	return rawjson.Prepend(result, fmt.Sprintf(`"ttlMs":%d,"cacheScope":%q`, h.TTLMs, scope))
}

// List is a list result of the aggregator's (the servers' lists joined) as a client of era to
// gets it: a modern one with resultType and the cache hint h.
func List(to Era, result json.RawMessage, h CacheHint) json.RawMessage {
	if to == Legacy {
		return result
	}
	return rawjson.Prepend(WithCacheHint(result, h), `"resultType":"complete"`)
}

// Tool is a tool definition of a server of era from as a client of era to gets it: a modern
// client gets a legacy server's tool without "execution" (the legacy tasks' taskSupport:
// 2026-07-28 has tasks as an extension, and no such member). hidden says why a tool is not
// given at all: one that runs only as a legacy task, which a modern client cannot ask for.
func Tool(from, to Era, def json.RawMessage) (out json.RawMessage, hidden string) {
	if from != Legacy || to != Modern {
		return def, ""
	}
	es, ee, ok := rawjson.Member(def, "execution")
	if !ok {
		return def, ""
	}
	if support, _ := rawjson.StringMember(def[es:ee], "taskSupport"); support == "required" {
		return def, `run only as a task of protocol 2025-11-25 (its execution.taskSupport is "required"), which a client of 2026-07-28 cannot ask for`
	}
	return rawjson.Without(def, "execution"), ""
}

// TaskID is the ID of the task a tools/call result created: the task member's taskId of the
// 2025-11-25 CreateTaskResult, or the taskId of the tasks extension's, which is flat (its
// resultType is "task"); "" when the result created none.
func TaskID(result json.RawMessage) string {
	// One pass over the result, which a shared server's every tools/call answer takes.
	var task, resultType, taskID []byte
	rawjson.Object(result, func(k []byte, s, e int) bool {
		switch string(k) {
		case "task":
			task = result[s:e]
		case "resultType":
			resultType = result[s:e]
		case "taskId":
			taskID = result[s:e]
		}
		return true
	})
	switch {
	case task != nil:
		id, _ := rawjson.StringMember(task, "taskId")
		return id
	case taskID != nil:
		if rt, _ := rawjson.Decode(resultType); rt == "task" {
			id, _ := rawjson.Decode(taskID)
			return id
		}
	}
	return ""
}
