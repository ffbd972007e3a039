package aggregator

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"
)

// Any params: the envelope is accepted only with a version served and capabilities that are an
// object, and refused with -32602 or -32022, as valid JSON.
func FuzzEnvelope(f *testing.F) {
	f.Add([]byte(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`))
	f.Add([]byte(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}}`))
	f.Add([]byte(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"x","io.modelcontextprotocol/clientInfo":{"name":"a","version":"1"}}}`))
	f.Add([]byte(`{"_meta":[]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, params []byte) {
		env, errObj := parseEnvelope(params)
		if errObj == nil {
			if !slices.Contains(modernVersions, env.version) || env.caps == nil {
				t.Fatalf("accepted %s: %+v", params, env)
			}
			return
		}
		var e struct{ Code int }
		if json.Unmarshal(errObj, &e) != nil || e.Code != -32602 && e.Code != -32022 {
			t.Fatalf("%s refused with %s", params, errObj)
		}
	})
}

// No requestState but the one minted verifies.
func FuzzRequestState(f *testing.F) {
	a := &Aggregator{stateKey: newStateKey()}
	sus := &suspension{method: "tools/call", digest: paramsDigest("tools/call", []byte(`{"name":"x"}`))}
	sus.round(time.Minute)
	minted := a.mintState(sus)
	f.Add(minted)
	f.Add(minted[:len(minted)-1] + "A")
	f.Add(statePrefix + "e30.")
	f.Fuzz(func(t *testing.T, state string) {
		p, err := a.verifyState(state)
		if err == nil && state != minted {
			t.Fatalf("verified %q (%+v), minted %q", state, p, minted)
		}
	})
}

// without leaves a valid object with every member but the ones taken out, as they were.
func FuzzWithout(f *testing.F) {
	f.Add([]byte(`{"a":1,"_meta":{"x":[1,2]},"b":"\u00e9"}`), "_meta")
	f.Add([]byte(`{}`), "a")
	f.Add([]byte(`{"a":{"a":1},"a":2}`), "a")
	f.Fuzz(func(t *testing.T, obj []byte, key string) {
		var before map[string]any
		if json.Unmarshal(obj, &before) != nil || before == nil {
			return
		}
		out := without(obj, key)
		var after map[string]any
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("without(%s, %q) = %s: %v", obj, key, out, err)
		}
		delete(before, key)
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("without(%s, %q) = %s", obj, key, out)
		}
	})
}

// BenchmarkParseEnvelope reads the envelope of a modern request as a client sends it, the same
// with each request (the cached path), and a new one each time (read in full).
func BenchmarkParseEnvelope(b *testing.B) {
	params := json.RawMessage(`{"name":"a:echo","arguments":{"x":1},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}},"sampling":{},"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"claude-code","version":"2.1.0"},"progressToken":7}}`)
	b.Run("same", func(b *testing.B) {
		for b.Loop() {
			if _, errObj := parseEnvelope(params); errObj != nil {
				b.Fatal(string(errObj))
			}
		}
	})
	b.Run("new", func(b *testing.B) {
		for b.Loop() {
			lastEnvelope.Store(nil)
			if _, errObj := parseEnvelope(params); errObj != nil {
				b.Fatal(string(errObj))
			}
		}
	})
}
