package config

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The bundled examples load: they are what the README points newcomers to.
func TestExamplesLoad(t *testing.T) {
	files, err := filepath.Glob("../../examples/*.json")
	if err != nil || len(files) < 3 {
		t.Fatalf("examples: %v %v", files, err)
	}
	env := lookupIn("HOME=/home/ada\nUSER=ada\nMY_SERVER_PORT=")
	for _, f := range files {
		if _, warnings, err := Load(f, env); err != nil || len(warnings) > 0 {
			t.Errorf("%s: %v %v", f, err, warnings)
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
