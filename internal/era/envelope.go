package era

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// The envelope of a modern request: "Every request ... MUST include the protocol version,
// client capabilities, and ... client info in _meta" and "A request missing any required field
// is malformed; the server MUST reject it with JSON-RPC error code -32602 (Invalid params)"
// (basic/index.mdx).

// Envelope is the modern _meta of one request.
type Envelope struct {
	Version string
	Caps    map[string]json.RawMessage
	// Info is the clientInfo as written; nil when the request has none.
	Info json.RawMessage
	// LogLevel is the level the request asks log messages at; "" for none ("If absent, the
	// server MUST NOT send any notifications/message ... for this request", schema.ts
	// RequestMetaObject).
	LogLevel string
}

// Opens reports whether a request opens the modern era: server/discover, or a request whose
// _meta carries a protocol version (checked further by ReadEnvelope).
func Opens(method string, params json.RawMessage) bool {
	if method == "server/discover" {
		return true
	}
	ms, me, ok := rawjson.Member(params, "_meta")
	return ok && rawjson.Has(params[ms:me], MetaProtocolVersion)
}

// ReadEnvelope reads and checks the _meta object meta of a modern request (nil when it has
// none); errObj is the error to answer with when it is malformed (-32602 naming the key, with
// data.envelope as the TypeScript SDK gives it) or names a version not served (-32022).
func ReadEnvelope(meta json.RawMessage) (env Envelope, errObj json.RawMessage) {
	var members map[string]json.RawMessage
	if meta != nil && json.Unmarshal(meta, &members) != nil {
		return env, EnvelopeError("_meta", "not an object")
	}
	v, ok := members[MetaProtocolVersion]
	if !ok {
		return env, EnvelopeError(MetaProtocolVersion, "missing")
	}
	if json.Unmarshal(v, &env.Version) != nil {
		return env, EnvelopeError(MetaProtocolVersion, "not a string")
	}
	if Of(env.Version) != Modern || !Speaks(env.Version) {
		return env, unsupported(env.Version)
	}
	caps, ok := members[MetaCapabilities]
	if !ok {
		return env, EnvelopeError(MetaCapabilities, "missing")
	}
	if json.Unmarshal(caps, &env.Caps) != nil || env.Caps == nil {
		return env, EnvelopeError(MetaCapabilities, "not an object")
	}
	if info, ok := members[MetaClientInfo]; ok {
		var impl struct {
			Name    *string `json:"name"`
			Version *string `json:"version"`
		}
		if json.Unmarshal(info, &impl) != nil || impl.Name == nil || impl.Version == nil {
			return env, EnvelopeError(MetaClientInfo, "not an Implementation (an object with the strings name and version)")
		}
		env.Info = info
	}
	if level, ok := members[MetaLogLevel]; ok {
		if json.Unmarshal(level, &env.LogLevel) != nil || LogRank(env.LogLevel) == 0 {
			return env, EnvelopeError(MetaLogLevel, "not a logging level (debug, info, notice, warning, error, critical, alert, emergency)")
		}
	}
	return env, nil
}

// unsupported is the -32022 of a request for a version the aggregator does not serve, listing
// every version it does (data.supported, data.requested: basic/versioning.mdx).
func unsupported(version string) json.RawMessage {
	data, _ := json.Marshal(struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}{Versions, version})
	modern, legacy := VersionsOf(Modern), VersionsOf(Legacy)
	return stdio.ErrorObject(CodeUnsupportedVersion, data, fmt.Sprintf("Unsupported protocol version: %s (mcp-simple-aggregator serves %s per request, and %s after initialize)",
		version, quoteList(modern), quoteList(legacy)))
}

// EnvelopeError is the -32602 of a malformed _meta envelope.
func EnvelopeError(key, problem string) json.RawMessage {
	data, _ := json.Marshal(map[string]map[string]string{"envelope": {"key": key, "problem": problem}})
	return stdio.ErrorObject(int64(jsonrpc.CodeInvalidParams), data, fmt.Sprintf(
		"Invalid params: _meta %q is %s; a request of protocol version %s carries %q, %q and %q in its _meta (or send initialize first, for an earlier version)",
		key, problem, Latest(Modern), MetaProtocolVersion, MetaCapabilities, MetaClientInfo))
}

// BuildEnvelope is the request _meta of the modern era as the members of an object: the
// protocol version, the client's capabilities ("Servers MUST NOT infer capabilities from prior
// requests": every request carries them) and its clientInfo.
func BuildEnvelope(version string, caps, info json.RawMessage) string {
	if len(caps) == 0 || caps[0] != '{' {
		caps = json.RawMessage(`{}`)
	}
	env := `"` + MetaProtocolVersion + `":` + strconv.Quote(version) + `,"` + MetaCapabilities + `":` + string(caps)
	if len(info) > 0 && info[0] == '{' {
		env += `,"` + MetaClientInfo + `":` + string(info)
	}
	return env
}

// WithLogLevel is the members of an envelope env with the logging level added.
func WithLogLevel(env, level string) string {
	if level == "" {
		return env
	}
	return env + `,"` + MetaLogLevel + `":` + strconv.Quote(level)
}

// Envelop puts the envelope members env into the _meta of params (made when it has none); params
// that carry an envelope already pass as they are.
func Envelop(params json.RawMessage, env string) json.RawMessage {
	if len(params) == 0 || string(params) == "null" {
		params = json.RawMessage(`{}`)
	}
	ms, me, ok := rawjson.Member(params, "_meta")
	switch {
	case ok && rawjson.Has(params[ms:me], MetaProtocolVersion):
		return params
	case ok && params[ms] == '{':
		return rawjson.Replace(params, ms, me, rawjson.Prepend(params[ms:me], env))
	}
	return rawjson.Prepend(params, `"_meta":{`+env+`}`)
}

// Unenvelop is params without the modern envelope's members in their _meta (a legacy server
// gets a modern client's request so: a go-sdk server restricted to legacy versions answers one
// that carries it with -32022), and, for a retry that is not the aggregator's own, without
// inputResponses and requestState: a legacy server answers "the request again ... afresh"
// ("respond with a new InputRequiredResult requesting the missing information again",
// basic/patterns/mrtr.mdx). Params without an envelope are returned as they are.
func Unenvelop(method string, params json.RawMessage) json.RawMessage {
	ms, me, ok := rawjson.Member(params, "_meta")
	if !ok {
		return params
	}
	params = rawjson.Replace(params, ms, me, rawjson.Without(params[ms:me], MetaProtocolVersion, MetaCapabilities, MetaClientInfo, MetaLogLevel))
	if InputMethods[method] && (rawjson.Has(params, "inputResponses") || rawjson.Has(params, "requestState")) {
		params = rawjson.Without(params, "inputResponses", "requestState")
	}
	return params
}

// LogLevelOf is the logging level a modern request's _meta asks for; "" for none.
func LogLevelOf(params json.RawMessage) string {
	ms, me, ok := rawjson.Member(params, "_meta")
	if !ok {
		return ""
	}
	level, _ := rawjson.StringMember(params[ms:me], MetaLogLevel)
	return level
}

// quoteList quotes versions for messages.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// hasAny reports whether list holds any of vs.
func hasAny(list, vs []string) bool {
	return slices.ContainsFunc(list, func(v string) bool { return slices.Contains(vs, v) })
}
