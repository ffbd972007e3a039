package config

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The bundled examples load: they are what the README points newcomers to. The only warnings
// allowed are those of the remote entries they show being skipped.
func TestExamplesLoad(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.json")
	if err != nil || len(files) < 5 {
		t.Fatalf("examples: %v %v", files, err)
	}
	env := lookupIn("HOME=/home/ada\nUSER=ada\nMY_SERVER_PORT=")
	for _, f := range files {
		cfg, warnings, err := Load(f, env)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		remote := map[string]bool{}
		for _, s := range cfg.Skipped {
			remote[s.Pointer] = s.Remote
		}
		for _, w := range warnings {
			if !remote[w.Pointer] {
				t.Errorf("%s: %s", f, w)
			}
		}
	}

	cfg, _, err := Load("../../examples/expansion.json", env)
	if err != nil {
		t.Fatal(err)
	}
	want := Server{
		Key:     "every-form",
		Command: "/home/ada/bin/my-server",
		Args: []string{
			"--home=/home/ada",
			"--config-dir=/home/ada/.config/my-server",
			"--port=8080",
			"--price=$5",
			"--literal=$5 and a $ alone stay as written",
		},
		Env: map[string]string{"API_TOKEN": "", "GREETING": "Hello ada"},
	}
	if diff := cmp.Diff(want, cfg.Servers[0]); diff != "" {
		t.Errorf("examples/expansion.json (-want +got):\n%s", diff)
	}
}

// The examples for Cline, Roo Code, Gemini CLI and VS Code users mean what the README says they mean.
func TestClientExamples(t *testing.T) {
	servers, err := filepath.Abs("../../examples/servers")
	if err != nil {
		t.Fatal(err)
	}
	env := lookupIn("USER=ada")
	tests := []struct {
		file    string
		servers []string // key, then working directory
		hidden  map[string][]string
		shown   map[string][]string
		skipped []Skipped
	}{
		{
			file:    "cline.json",
			servers: []string{"calc", "notes"},
			hidden:  map[string][]string{"calc": {"divide"}},
			shown:   map[string][]string{"calc": {"add", "sqrt"}, "notes": {"add_note", "list_notes"}},
			skipped: []Skipped{
				{Key: "docs", Pointer: "/mcpServers/docs/type", Remote: true, Reason: `remote server ("type": "streamable-http"): only stdio servers are served`},
				{Key: "github", Pointer: "/mcpServers/github/disabled", Reason: `"disabled": true`},
			},
		},
		{
			file:    "gemini-settings.json",
			servers: []string{"calc", "notes"},
			hidden:  map[string][]string{"calc": {"divide"}, "notes": {"add_note"}},
			shown:   map[string][]string{"calc": {"add", "sqrt"}, "notes": {"list_notes"}},
			skipped: []Skipped{
				{Key: "search", Pointer: "/mcpServers/search/httpUrl", Remote: true, Reason: `remote server ("httpUrl"): only stdio servers are served`},
			},
		},
		{
			// VS Code's own format; ${workspaceFolder} is examples, the directory above .vscode.
			file:    ".vscode/mcp.json",
			servers: []string{"calc", "notes"},
			hidden:  map[string][]string{"calc": {"divide"}},
			shown:   map[string][]string{"calc": {"add", "sqrt"}, "notes": {"add_note", "list_notes"}},
		},
	}
	for _, tt := range tests {
		cfg, _, err := Load(filepath.Join("../../examples", tt.file), env)
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		var keys []string
		for _, s := range cfg.Servers {
			keys = append(keys, s.Key)
			if want := filepath.Join(servers, s.Key); s.Dir != want {
				t.Errorf("%s: server %q: Dir = %q, want %q", tt.file, s.Key, s.Dir, want)
			}
			for _, name := range tt.hidden[s.Key] {
				if _, hidden := s.Tools.Hidden(name); !hidden {
					t.Errorf("%s: server %q: tool %q is shown, want it hidden", tt.file, s.Key, name)
				}
			}
			for _, name := range tt.shown[s.Key] {
				if why, hidden := s.Tools.Hidden(name); hidden {
					t.Errorf("%s: server %q: tool %q is %s, want it shown", tt.file, s.Key, name, why)
				}
			}
		}
		if diff := cmp.Diff(tt.servers, keys); diff != "" {
			t.Errorf("%s: servers (-want +got):\n%s", tt.file, diff)
		}
		if tt.file == ".vscode/mcp.json" && cfg.Servers[1].Env["NOTES_GREETING"] != "Hi from examples" {
			t.Errorf("%s: NOTES_GREETING = %q, want the user and the workspace", tt.file, cfg.Servers[1].Env["NOTES_GREETING"])
		}
		if diff := cmp.Diff(tt.skipped, cfg.Skipped); diff != "" {
			t.Errorf("%s: skipped (-want +got):\n%s", tt.file, diff)
		}
	}
}
