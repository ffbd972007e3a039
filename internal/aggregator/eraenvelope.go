package aggregator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// The modern era's envelope (2026-07-28), read and written in one place, and translated for the
// other era: a modern client's request _meta is read (parseEnvelope); a modern server's requests
// get one (buildEnvelope); results carry resultType and, where cacheable, ttlMs and cacheScope
// (modernAnswer, withCacheHint, pageHint), which a legacy client does not get (legacyAnswer).
// The routing core decides where a message goes; what changes with the next revision of the
// envelope is here.

// envelope is the modern _meta of one request.
type envelope struct {
	version  string
	caps     map[string]json.RawMessage
	info     json.RawMessage // nil when the client sent none
	logLevel string          // "" when none: no notifications/message for the request
}

// logLevels rank the logging levels (RFC 5424, as MCP names them); 0 is no level.
var logLevels = map[string]int{"debug": 1, "info": 2, "notice": 3, "warning": 4, "error": 5, "critical": 6, "alert": 7, "emergency": 8}

// parseEnvelope reads and checks the _meta of a modern request; errObj is the error to answer
// with when it is malformed (-32602, naming the key, with data.envelope as the TypeScript SDK
// gives it) or names a version not served (-32022).
func parseEnvelope(params json.RawMessage) (env envelope, errObj json.RawMessage) {
	ms, me, ok := rawjson.Member(params, "_meta")
	if last := lastEnvelope.Load(); ok && last != nil && bytes.Equal(last.raw, params[ms:me]) {
		return last.env, nil
	}
	var raw json.RawMessage
	if ok {
		raw = params[ms:me]
	}
	env, errObj = readEnvelope(raw)
	if errObj == nil && ok {
		env.info = bytes.Clone(env.info)
		lastEnvelope.Store(&parsedEnvelope{raw: bytes.Clone(params[ms:me]), env: env})
	}
	return env, errObj
}

// lastEnvelope is the last _meta parseEnvelope found good, and what it read: a client sends the
// same envelope with each request, which is then read once. Its env is shared: read only.
var lastEnvelope atomic.Pointer[parsedEnvelope]

type parsedEnvelope struct {
	raw []byte
	env envelope
}

// readEnvelope reads and checks the _meta object raw (nil when the request has none).
func readEnvelope(raw json.RawMessage) (env envelope, errObj json.RawMessage) {
	var meta map[string]json.RawMessage
	if raw != nil && json.Unmarshal(raw, &meta) != nil {
		return env, envelopeError("_meta", "not an object")
	}
	v, ok := meta[metaProtocolVersion]
	if !ok {
		return env, envelopeError(metaProtocolVersion, "missing")
	}
	if json.Unmarshal(v, &env.version) != nil {
		return env, envelopeError(metaProtocolVersion, "not a string")
	}
	if !slices.Contains(modernVersions, env.version) {
		data := marshal(struct {
			Supported []string `json:"supported"`
			Requested string   `json:"requested"`
		}{slices.Concat(modernVersions, protocolVersions), env.version})
		return env, rpcError(codeUnsupportedVersion, data, "Unsupported protocol version: %s (mcp-simple-aggregator serves %s per request, and %s after initialize)",
			env.version, quoteList(modernVersions), quoteList(protocolVersions))
	}
	caps, ok := meta[metaCapabilities]
	if !ok {
		return env, envelopeError(metaCapabilities, "missing")
	}
	if json.Unmarshal(caps, &env.caps) != nil || env.caps == nil {
		return env, envelopeError(metaCapabilities, "not an object")
	}
	if info, ok := meta[metaClientInfo]; ok {
		var impl struct {
			Name    *string `json:"name"`
			Version *string `json:"version"`
		}
		if json.Unmarshal(info, &impl) != nil || impl.Name == nil || impl.Version == nil {
			return env, envelopeError(metaClientInfo, "not an Implementation (an object with the strings name and version)")
		}
		env.info = info
	}
	if level, ok := meta[metaLogLevel]; ok {
		if json.Unmarshal(level, &env.logLevel) != nil || logLevels[env.logLevel] == 0 {
			return env, envelopeError(metaLogLevel, "not a logging level (debug, info, notice, warning, error, critical, alert, emergency)")
		}
	}
	return env, nil
}

// envelopeError is the -32602 of a malformed _meta envelope.
func envelopeError(key, problem string) json.RawMessage {
	data := marshal(map[string]map[string]string{"envelope": {"key": key, "problem": problem}})
	return rpcError(jsonrpc.CodeInvalidParams, data, "Invalid params: _meta %q is %s; a request of protocol version %s carries %q, %q and %q in its _meta (or send initialize first, for an earlier version)",
		key, problem, modernVersions[0], metaProtocolVersion, metaCapabilities, metaClientInfo)
}

// modernAnswer puts an answer to a modern client in the modern envelope: a result without
// resultType gets "complete" ("Every result MUST include resultType", basic/index.mdx); the
// legacy resource-not-found code -32002 becomes -32602 ("servers MUST NOT emit -32002"), and
// a -32042 that could not be made an InputRequiredResult -32603.
func modernAnswer(result, errObj json.RawMessage) (json.RawMessage, json.RawMessage) {
	if errObj != nil {
		if cs, ce, ok := rawjson.Member(errObj, "code"); ok {
			switch string(errObj[cs:ce]) {
			case strconv.Itoa(codeResourceNotFound):
				errObj = rawjson.Replace(errObj, cs, ce, []byte(strconv.Itoa(int(jsonrpc.CodeInvalidParams))))
			case strconv.Itoa(codeURLElicitationRequired):
				// One that names no URL to ask for (urlRequired): "MUST NOT emit -32042".
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

// legacyAnswer is a modern server's result as a legacy client has it: without the members of
// the modern result envelope (resultType, ttlMs, cacheScope, and the serverInfo in _meta,
// whose _meta goes when nothing else is in it); the rest as the server wrote it.
func legacyAnswer(result json.RawMessage) json.RawMessage {
	if ms, me, ok := rawjson.Member(result, "_meta"); ok && rawjson.Has(result[ms:me], metaServerInfo) {
		meta := without(result[ms:me], metaServerInfo)
		if string(meta) == "{}" {
			result = without(result, "_meta")
		} else {
			result = rawjson.Replace(result, ms, me, meta)
		}
	}
	if rawjson.Has(result, "resultType") || rawjson.Has(result, "ttlMs") || rawjson.Has(result, "cacheScope") {
		result = without(result, "resultType", "ttlMs", "cacheScope")
	}
	return result
}

// withCacheHint adds ttlMs and cacheScope to a cacheable result that has none
// (server/utilities/caching.mdx: "required" on the list results and resources/read).
func withCacheHint(result json.RawMessage, h cacheHint) json.RawMessage {
	if rawjson.Has(result, "ttlMs") || inputRequired(result) {
		return result // a modern server's own, or an interim result, which carries none
	}
	scope := "private"
	if h.public {
		scope = "public"
	}
	return rawjson.Prepend(result, fmt.Sprintf(`"ttlMs":%d,"cacheScope":%q`, h.ttlMs, scope))
}

// inputRequired reports whether a result is an InputRequiredResult.
func inputRequired(result json.RawMessage) bool {
	rt, _ := rawjson.StringMember(result, "resultType")
	return rt == "input_required"
}

// merge is the cache hint of a result made of parts: the smallest ttlMs, private when any part
// is ("Servers MUST apply the same cacheScope to all response pages", caching.mdx).
func (h cacheHint) merge(o cacheHint) cacheHint {
	return cacheHint{ttlMs: min(h.ttlMs, o.ttlMs), public: h.public && o.public}
}

// without is the object obj without the members keys, the others as they were written.
func without(obj []byte, keys ...string) []byte {
	out := []byte{'{'}
	rawjson.Object(obj, func(k []byte, start, end int) bool {
		if slices.Contains(keys, string(k)) {
			return true
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, marshal(string(k))...), ':'), obj[start:end]...)
		return true
	})
	return append(out, '}')
}

// unsupportedVersions are the versions in the data.supported of an error; nil when none.
func unsupportedVersions(e *jsonrpc.Error) []string {
	var data struct {
		Supported []string `json:"supported"`
	}
	_ = json.Unmarshal(e.Data, &data)
	return data.Supported
}

// buildEnvelope is the request _meta of the modern era (basic/index.mdx, "Request _meta"), as the
// members of an object: the protocol version, the client's capabilities ("Servers MUST NOT
// infer capabilities from prior requests": every request carries them) and its clientInfo.
func buildEnvelope(version string, caps, info json.RawMessage) string {
	if len(caps) == 0 || caps[0] != '{' {
		caps = json.RawMessage(`{}`)
	}
	env := `"` + metaProtocolVersion + `":` + strconv.Quote(version) + `,"` + metaCapabilities + `":` + string(caps)
	if len(info) > 0 && info[0] == '{' {
		env += `,"` + metaClientInfo + `":` + string(info)
	}
	return env
}

// envelopeWith is env with its protocol version set to version.
func envelopeWith(env, version string) string {
	obj := []byte("{" + env + "}")
	s, e, _ := rawjson.Member(obj, metaProtocolVersion)
	obj = rawjson.Replace(obj, s, e, []byte(strconv.Quote(version)))
	return string(obj[1 : len(obj)-1])
}

// pageHint reads the cache hints of a modern child's list page into h: the smallest ttlMs of
// the pages, and private when any page is (server/utilities/caching.mdx: "Servers MUST apply
// the same cacheScope to all response pages").
func pageHint(h *cacheHint, first bool, raw map[string]json.RawMessage) {
	var ttl int64
	_ = json.Unmarshal(raw["ttlMs"], &ttl)
	var scope string
	_ = json.Unmarshal(raw["cacheScope"], &scope)
	page := cacheHint{ttlMs: max(ttl, 0), public: scope == "public"}
	if !first {
		page = h.merge(page)
	}
	*h = page
}
