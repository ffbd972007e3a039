package era

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// Multi round-trip requests (basic/patterns/mrtr.mdx): a modern server that needs the client's
// input answers with an InputRequiredResult ("resultType": "input_required", inputRequests,
// requestState), and the client retries the request with inputResponses and the requestState.

// InputRequest is one request of an InputRequiredResult's inputRequests.
type InputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
}

// InputRequired is an InputRequiredResult asking for requests, by key, with state (none when
// ""): "Servers MUST include at least one of inputRequests or requestState".
func InputRequired(requests map[string]InputRequest, state string) json.RawMessage {
	b := []byte(`{"resultType":"input_required","inputRequests":{`)
	for i, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range requests {
			if !yield(k) {
				return
			}
		}
	}) {
		if i > 0 {
			b = append(b, ',')
		}
		r := requests[k]
		m, _ := json.Marshal(r.Method)
		b = append(append(append(b, strconv.Quote(k)...), `:{"method":`...), m...)
		if len(r.Params) > 0 {
			b = append(append(b, `,"params":`...), r.Params...) // as the server wrote them
		}
		b = append(b, '}')
	}
	b = append(b, '}')
	if state != "" {
		b = append(append(b, `,"requestState":`...), strconv.Quote(state)...)
	}
	return append(b, '}')
}

// ReadInputRequired reads an InputRequiredResult: its requests by key, and its requestState
// (nil when it has none).
func ReadInputRequired(result json.RawMessage) (map[string]InputRequest, *string, error) {
	var ir struct {
		InputRequests map[string]InputRequest `json:"inputRequests"`
		RequestState  *string                 `json:"requestState"`
	}
	err := json.Unmarshal(result, &ir)
	return ir.InputRequests, ir.RequestState, err
}

// RetryParams are the params of a request retried with the client's answers: the params of
// the first attempt (as the server got them) with inputResponses and requestState in place of
// those of an earlier round ("same method and original params + inputResponses +
// requestState"); the state byte for byte, none when the server gave none.
func RetryParams(first json.RawMessage, responses map[string]json.RawMessage, state *string) json.RawMessage {
	var p map[string]json.RawMessage
	_ = json.Unmarshal(first, &p)
	delete(p, "inputResponses")
	delete(p, "requestState")
	if p == nil {
		p = map[string]json.RawMessage{}
	}
	if len(responses) > 0 {
		p["inputResponses"] = rawjson.Marshal(responses)
	}
	if state != nil {
		p["requestState"] = rawjson.Marshal(*state)
	}
	return rawjson.Marshal(p)
}

// Retry reads the retry of a request: its inputResponses (nil when none) and requestState ("",
// false when none); err when inputResponses is not an object of answers by key.
func Retry(params json.RawMessage) (responses map[string]json.RawMessage, state string, hasState bool, err error) {
	state, hasState = rawjson.StringMember(params, "requestState")
	if rs, re, ok := rawjson.Member(params, "inputResponses"); ok && json.Unmarshal(params[rs:re], &responses) != nil {
		return nil, state, hasState, errors.New("inputResponses is not an object of answers by key")
	}
	return responses, state, hasState, nil
}

// MissingCapability is the -32021 error for a request whose own _meta does not declare the
// capability a server's request for input needs ("Servers MUST NOT infer capabilities from
// prior requests"; "Servers MUST NOT send an inputRequests that the client has not declared
// support for in its capabilities"); nil when it does. URL elicitation needs "url" in the
// elicitation capability.
func MissingCapability(env Envelope, method string, params json.RawMessage) json.RawMessage {
	name := ServerRequests[method]
	declared, ok := env.Caps[name]
	needed := "{}"
	if ok && method == "elicitation/create" && URLMode(params) && !rawjson.Has(declared, "url") {
		ok, needed = false, `{"url":{}}`
	}
	if ok {
		return nil
	}
	data := json.RawMessage(`{"requiredCapabilities":{"` + name + `":` + needed + `}}`)
	return stdio.ErrorObject(CodeMissingCapability, data, fmt.Sprintf(
		"Missing required client capability: a server asked for %s while serving this request, and the request's _meta %q does not declare %q; the request came through mcp-simple-aggregator",
		method, MetaCapabilities, name))
}

// URLMode reports whether the params of elicitation/create ask for URL mode.
func URLMode(params json.RawMessage) bool {
	mode, ok := rawjson.StringMember(params, "mode")
	return ok && mode == "url"
}

// URLElicitations are the URL elicitations of a legacy URLElicitationRequiredError (-32042), as
// the elicitation/create params a modern client is asked (without elicitationId, removed in
// 2026-07-28: changelog m11); nil when errObj is not such an error or names none.
func URLElicitations(errObj json.RawMessage) []json.RawMessage {
	var e struct {
		Code int64 `json:"code"`
		Data struct {
			Elicitations []map[string]json.RawMessage `json:"elicitations"`
		} `json:"data"`
	}
	if json.Unmarshal(errObj, &e) != nil || e.Code != CodeURLElicitationRequired {
		return nil
	}
	var out []json.RawMessage
	for _, el := range e.Data.Elicitations {
		delete(el, "elicitationId")
		params, _ := json.Marshal(el)
		out = append(out, params)
	}
	return out
}

// The requestState the aggregator mints when it answers a modern client's request with an
// InputRequiredResult of its own. "Servers MUST treat requestState as an attacker-controlled
// input ... MUST protect its integrity (e.g. HMAC or AEAD) and MUST reject state that fails
// verification", and SHOULD bind it to "a short expiry (TTL)" and "an identifier for the
// originating request, e.g. the method name and a digest of its salient parameters". It is
// HMAC-SHA256-signed with a key of the caller's, and names what it stands for (an ID of the
// caller's), the method, a digest of the params (without _meta, inputResponses and
// requestState) and its expiry.

// StatePrefix starts the aggregator's requestState; a state without it is a server's own.
const StatePrefix = "mcpagg1."

// State is what a requestState of the aggregator's says.
type State struct {
	ID      string `json:"i"`
	Method  string `json:"m"`
	Digest  string `json:"d"`
	Expires int64  `json:"e"` // Unix milliseconds
}

// Ours reports whether a requestState is one the aggregator minted (by its form; Verify says
// whether it is genuine).
func Ours(state string) bool { return strings.HasPrefix(state, StatePrefix) }

// Mint is the requestState of st, signed with key.
func Mint(key []byte, st State) string {
	payload, _ := json.Marshal(st)
	mac := hmac.New(sha256.New, key)
	mac.Write(payload)
	return StatePrefix + base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Verify checks a requestState against key and the time now, and returns what it says, or why
// it is refused.
func Verify(key []byte, state string, now time.Time) (State, error) {
	var st State
	rest, ours := strings.CutPrefix(state, StatePrefix)
	body, sig, ok := strings.Cut(rest, ".")
	payload, err1 := base64.RawURLEncoding.DecodeString(body)
	got, err2 := base64.RawURLEncoding.DecodeString(sig)
	// A state verifies only spelled as it was minted: the decoder skips newlines and a last
	// character's spare bits, so other spellings of one state decode alike.
	canonical := base64.RawURLEncoding.EncodeToString(payload) == body && base64.RawURLEncoding.EncodeToString(got) == sig
	if !ours || !ok || err1 != nil || err2 != nil || !canonical {
		return st, errors.New("the requestState is not one mcp-simple-aggregator gave (malformed)")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(payload)
	if !hmac.Equal(got, mac.Sum(nil)) || json.Unmarshal(payload, &st) != nil {
		return st, errors.New("the requestState failed verification (it was altered, or not made by this mcp-simple-aggregator process)")
	}
	if now.UnixMilli() > st.Expires {
		return st, errors.New("the requestState expired; send the request again without it")
	}
	return st, nil
}

// ParamsDigest is the digest of a request's salient params: every member but _meta,
// inputResponses and requestState, each value in canonical JSON, so that a retry that
// re-encodes the params matches.
func ParamsDigest(method string, params json.RawMessage) string {
	var members map[string]any
	_ = json.Unmarshal(params, &members)
	delete(members, "_meta")
	delete(members, "inputResponses")
	delete(members, "requestState")
	canon, _ := json.Marshal(members) // map keys sorted
	sum := sha256.Sum256(append([]byte(method+"\n"), canon...))
	return hex.EncodeToString(sum[:])
}
