package era

import (
	"encoding/json"
	"testing"
	"time"
)

// Any _meta: the envelope is accepted only with a version served and capabilities that are an
// object, and refused with -32602 or -32022, as valid JSON.
func FuzzEnvelope(f *testing.F) {
	f.Add([]byte(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`))
	f.Add([]byte(`{"io.modelcontextprotocol/protocolVersion":"2025-11-25"}`))
	f.Add([]byte(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"x","io.modelcontextprotocol/clientInfo":{"name":"a","version":"1"}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, meta []byte) {
		env, errObj := ReadEnvelope(meta)
		if errObj == nil {
			if Of(env.Version) != Modern || !Speaks(env.Version) || env.Caps == nil {
				t.Fatalf("accepted %s: %+v", meta, env)
			}
			return
		}
		var e struct{ Code int }
		if json.Unmarshal(errObj, &e) != nil || e.Code != -32602 && e.Code != -32022 {
			t.Fatalf("%s refused with %s", meta, errObj)
		}
	})
}

// No requestState but the one minted verifies. The time is fixed: the fuzzing workers are
// processes of their own, and each mints the state again, which must be the coordinator's.
func FuzzRequestState(f *testing.F) {
	key := []byte("a key of the process, 32 bytes..")
	now := time.Date(2026, 7, 28, 12, 0, 0, 0, time.UTC)
	minted := Mint(key, State{ID: "x", Method: "tools/call", Digest: ParamsDigest("tools/call", []byte(`{"name":"x"}`)), Expires: now.Add(time.Minute).UnixMilli()})
	f.Add(minted)
	f.Add(minted[:len(minted)-1] + "A")
	f.Add(minted[:len(minted)-1] + string(minted[len(minted)-1]^1)) // the last character's spare bits
	f.Add(StatePrefix + "e30.")
	f.Fuzz(func(t *testing.T, state string) {
		st, err := Verify(key, state, now)
		if err == nil && state != minted {
			t.Fatalf("verified %q (%+v), minted %q", state, st, minted)
		}
	})
}

// Untag takes the tag out of any params and leaves them valid, with the other members.
func FuzzUntag(f *testing.F) {
	f.Add([]byte(`{"uri":"u","_meta":{"io.modelcontextprotocol/subscriptionId":"agg-3","x":1}}`))
	f.Add([]byte(`{"_meta":{"io.modelcontextprotocol/subscriptionId":7}}`))
	f.Fuzz(func(t *testing.T, params []byte) {
		var before map[string]json.RawMessage
		if json.Unmarshal(params, &before) != nil || before == nil {
			return
		}
		_, rest, ok := Untag(params)
		if !ok {
			return
		}
		var after map[string]json.RawMessage
		if err := json.Unmarshal(rest, &after); err != nil {
			t.Fatalf("Untag(%s) = %s: %v", params, rest, err)
		}
		if len(after) < len(before)-1 {
			t.Fatalf("Untag(%s) = %s lost members", params, rest)
		}
	})
}

func BenchmarkReadEnvelope(b *testing.B) {
	meta := json.RawMessage(`{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}},"sampling":{},"roots":{"listChanged":true}},"io.modelcontextprotocol/clientInfo":{"name":"claude-code","version":"2.1.0"},"progressToken":7}`)
	for b.Loop() {
		if _, errObj := ReadEnvelope(meta); errObj != nil {
			b.Fatal(string(errObj))
		}
	}
}
