package main

// Issue #30, the scan: hidden characters of each class, in each place of a definition that the
// model reads, found end to end (check --json, and the warning at start-up and after a list
// change), and none in what real servers list.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// hiddenText holds one character of each class of hidden character, between letters: a tag run
// (spelling "IG"), a bidi override, a zero-width space, a variation selector after a letter, an
// escape, a soft hyphen.
const hiddenText = "a\U000E0049\U000E0047b\u202Ec\u200Bd\uFE0Fe\u001Bf\u00ADg"

// allClasses are the classes hiddenText holds.
var allClasses = []string{"bidi", "control", "format", "tag", "variation-selector", "zero-width"}

// visibleText is text whose invisible characters have a visible purpose: a flag of tags,
// emoji sequences, a Persian non-joiner, an ideographic variant. No finding.
const visibleText = "England 🏴\U000E0067\U000E0062\U000E0065\U000E006E\U000E0067\U000E007F, family 👨\u200D👩\u200D👧, ❤\uFE0F, 1\uFE0F\u20E3, می\u200Cخواهم, 葛\U000E0100"

func marshalJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// place is where a finding is expected: the definition and the pointer of the text.
type place struct{ kind, name, pointer string }

func TestHiddenCharactersEndToEnd(t *testing.T) {
	h := hiddenText
	obj := map[string]any{"type": "object"}
	tools := []any{
		map[string]any{"name": "name_" + h, "inputSchema": obj},
		map[string]any{"name": "titled", "title": h, "inputSchema": obj},
		map[string]any{"name": "described", "description": h, "inputSchema": obj},
		map[string]any{"name": "keyed", "inputSchema": map[string]any{"type": "object", "properties": map[string]any{h: map[string]any{"type": "string"}}}},
		map[string]any{"name": "nested", "inputSchema": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{
			"type": "string", "description": h, "enum": []any{h}, "default": h}}, "$defs": map[string]any{"x": map[string]any{"description": h}}}},
		map[string]any{"name": "output", "inputSchema": obj, "outputSchema": map[string]any{"type": "object", "description": h}},
		map[string]any{"name": "annotated", "inputSchema": obj, "annotations": map[string]any{"title": h}},
		map[string]any{"name": "visible", "description": visibleText, "inputSchema": obj, "_meta": map[string]any{"note": h}},
		map[string]any{"name": "quiet", "description": h, "inputSchema": obj}, // hidden by the filter: not reported
	}
	prompts := []any{
		map[string]any{"name": "prompt_" + h},
		map[string]any{"name": "told", "description": h, "arguments": []any{map[string]any{"name": "city", "description": h}}},
	}
	resources := []any{
		map[string]any{"uri": "fixture://hidden/" + h, "name": "uri"},
		map[string]any{"uri": "fixture://hidden/named", "name": h, "description": h},
	}
	templates := []any{
		map[string]any{"uriTemplate": "fixture://t/" + h + "/{id}", "name": "tpl", "description": h},
	}
	dir := t.TempDir()
	defs := filepath.Join(dir, "defs.json")
	writeFile(t, defs, marshalJSON(map[string]any{"tools": tools, "prompts": prompts, "resources": resources, "resourceTemplates": templates}))
	config := filepath.Join(dir, "c.json")
	quoted, _ := json.Marshal(fixtureBin)
	writeFile(t, config, `{"mcpServers": {
		"fx": {"command": `+string(quoted)+`, "args": ["-full", "-defs", `+jsonString(defs)+`, "-instructions", `+jsonString("Use it. "+h)+`], "excludeTools": ["quiet"]},
		"ok": {"command": `+string(quoted)+`, "args": ["-full", "-instructions", `+jsonString(visibleText)+`]}
	}}`)

	want := []place{
		{"tool", "name_" + h, "/name"},
		{"tool", "titled", "/title"},
		{"tool", "described", "/description"},
		{"tool", "keyed", "/inputSchema/properties/" + h},
		{"tool", "nested", "/inputSchema/$defs/x/description"},
		{"tool", "nested", "/inputSchema/properties/q/default"},
		{"tool", "nested", "/inputSchema/properties/q/description"},
		{"tool", "nested", "/inputSchema/properties/q/enum/0"},
		{"tool", "output", "/outputSchema/description"},
		{"tool", "annotated", "/annotations/title"},
		{"prompt", "prompt_" + h, "/name"},
		{"prompt", "told", "/arguments/0/description"},
		{"prompt", "told", "/description"},
		{"resource", "fixture://hidden/" + h, "/uri"},
		{"resource", "fixture://hidden/named", "/description"},
		{"resource", "fixture://hidden/named", "/name"},
		{"resource template", "fixture://t/" + h + "/{id}", "/description"},
		{"resource template", "fixture://t/" + h + "/{id}", "/uriTemplate"},
		{"instructions", "", ""},
	}
	out, errOut, code := runProgram(t, "check", "--config", config, "--json")
	var rep struct {
		Servers []struct {
			Key              string `json:"key"`
			HiddenCharacters []struct {
				Kind       string   `json:"kind"`
				Name       string   `json:"name"`
				Pointer    string   `json:"pointer"`
				Key        bool     `json:"key"`
				Class      string   `json:"class"`
				CodePoints []string `json:"codePoints"`
				Text       string   `json:"text"`
			} `json:"hiddenCharacters"`
		} `json:"servers"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 {
		t.Fatalf("check --json: status %d, %v\n%s\n%s", code, err, out, errOut)
	}
	classes := map[place][]string{}
	for _, s := range rep.Servers {
		if s.Key == "ok" && len(s.HiddenCharacters) > 0 {
			t.Errorf("findings on the server whose characters are all visible in their place: %+v", s.HiddenCharacters)
		}
		if s.Key != "fx" {
			continue
		}
		for _, f := range s.HiddenCharacters {
			p := place{f.Kind, f.Name, f.Pointer}
			classes[p] = append(classes[p], f.Class)
			if f.Class == "tag" && (f.Text != "IG" || !slices.Equal(f.CodePoints, []string{"U+E0049", "U+E0047"})) {
				t.Errorf("%v: the tag run spells %q (%v), want IG", p, f.Text, f.CodePoints)
			}
			if f.Key != strings.HasPrefix(f.Pointer, "/inputSchema/properties/a") {
				t.Errorf("%v: key %v", p, f.Key)
			}
		}
	}
	for _, p := range want {
		got := classes[p]
		slices.Sort(got)
		if !slices.Equal(got, allClasses) {
			t.Errorf("%s %q %s: classes %q, want every one", p.kind, p.name, p.pointer, got)
		}
		delete(classes, p)
	}
	for p, c := range classes {
		t.Errorf("a finding nobody expected: %s %q %s %q", p.kind, p.name, p.pointer, c)
	}

	// The text report names each finding on a line.
	out, _, _ = runProgram(t, "check", "--config", config)
	if !strings.Contains(out, "\nserver \"fx\": tool \"described\" /description: 1 zero-width character (U+200B) at character 7\n") ||
		!strings.Contains(out, "; 114 runs of hidden characters.\n") {
		t.Errorf("check's text report:\n%s", out)
	}

	// Serving: one warning per server at start-up, and after a list change, its new findings only.
	agg := startPeer(t, aggBinary, "--config", config)
	agg.initialize("test")
	warnings := func() []string {
		var out []string
		for _, line := range strings.Split(agg.stderr.String(), "\n") {
			if strings.Contains(line, "hidden characters in what the model reads") {
				out = append(out, line)
			}
		}
		return out
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(warnings()) == 0 && time.Now().Before(deadline) { // stderr is written by a goroutine of its own
		time.Sleep(20 * time.Millisecond)
	}
	first := warnings()
	if len(first) != 1 || !strings.HasPrefix(first[0], `mcp-simple-aggregator: warning: server "fx": hidden characters in what the model reads: tool "name_a<U+E0049><U+E0047>b<U+202E>c<U+200B>d<U+FE0F>e<U+001B>f<U+00AD>g" /name: 2 tag characters (U+E0049 U+E0047) at character 7, spelling "IG"; `) ||
		!strings.HasSuffix(first[0], "; and 109 more (check lists them all)") {
		t.Errorf("the start-up warnings:\n%s", strings.Join(first, "\n"))
	}
	tools = append(tools, map[string]any{"name": "later", "description": "a\u2066b", "inputSchema": obj})
	writeFile(t, defs, marshalJSON(map[string]any{"tools": tools, "prompts": prompts, "resources": resources, "resourceTemplates": templates}))
	agg.call("tools/call", `{"name":"fx:grow","arguments":{}}`)
	deadline = time.Now().Add(10 * time.Second)
	for len(warnings()) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if w := warnings(); len(w) != 2 || w[1] != `mcp-simple-aggregator: warning: server "fx": hidden characters in what the model reads: tool "later" /description: 1 bidi character (U+2066) at character 2` {
		t.Errorf("after the list change, the warnings:\n%s", strings.Join(w, "\n"))
	}
	told := 0
	for wait := time.After(5 * time.Second); told < 2; {
		select {
		case m := <-agg.notes:
			if m.Method == "notifications/message" && strings.Contains(string(m.Params), "hidden characters in what the model reads") {
				told++
			}
		case <-wait:
			t.Fatalf("the client was told of hidden characters %d times, want 2 (start-up, list change)", told)
		}
	}
}

// No finding in what the real servers list: the recorded tools/list of 24 npm servers
// (testdata/toolsearch/servers), served by fixtures, through check. (internal/trust checks the
// rest of what they list, and the interop suite the reference servers running.)
func TestNoHiddenCharactersInRecordedServers(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "toolsearch", "servers", "*.json"))
	if err != nil || len(files) < 20 {
		t.Fatalf("recorded servers: %v %v", files, err)
	}
	var entries []string
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		entries = append(entries, jsonString(name)+": "+recordedServer(t, name, ""))
	}
	path := writeConfig(t, `{"mcpServers": {`+strings.Join(entries, ",\n")+`}}`)
	out, errOut, code := runProgram(t, "check", "--config", path, "--json")
	var rep struct {
		OK      bool `json:"ok"`
		Servers []struct {
			Key              string            `json:"key"`
			Tools            int               `json:"tools"`
			HiddenCharacters []json.RawMessage `json:"hiddenCharacters"`
		} `json:"servers"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || len(rep.Servers) != len(files) {
		t.Fatalf("check --json: status %d, %v\n%.2000s\n%s", code, err, out, errOut)
	}
	for _, s := range rep.Servers {
		if s.Tools == 0 || len(s.HiddenCharacters) > 0 {
			t.Errorf("server %q: %d tools, findings %s", s.Key, s.Tools, s.HiddenCharacters)
		}
	}
	_ = os.Remove(path)
}
