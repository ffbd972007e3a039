package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Every unset variable of every server is reported at once, each with the file, the JSON
// Pointer of every value that uses it and the server's key; the error carries the
// configuration of the servers that need none, for check to go on with.
func TestLoadEveryUnsetVariable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "servers.json")
	env := filepath.Join(dir, "fine.env")
	if err := os.WriteFile(env, []byte("FROM_FILE=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := `{"mcpServers": {
  "sqlite": {"command": "uvx", "args": ["mcp-server-sqlite", "--db-path", "${DB_DIR}/test.db"]},
  "github": {"command": "$NPX", "args": ["-y", "server-github"], "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}", "AGAIN": "$NPX"}},
  "files": {"command": "x", "cwd": "${WORK_DIR}", "envFile": "$ENV_DIR/.env"},
  "fine": {"command": "${FINE_CMD:-fine-server}", "envFile": "fine.env"},
  "off": {"command": "$NEVER_LOOKED_AT", "disabled": true}
}}`
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := Load(path, lookupIn(""))
	if cfg != nil {
		t.Errorf("Load returned a configuration with its error: %+v", cfg)
	}
	var unusable *UnusableServersError
	if !errors.As(err, &unusable) {
		t.Fatalf("Load error = %#v, want an *UnusableServersError", err)
	}
	want := strings.Join([]string{
		path + `: /mcpServers/files/cwd: server "files": environment variable WORK_DIR is not set`,
		path + `: /mcpServers/files/envFile: server "files": environment variable ENV_DIR is not set`,
		path + `: /mcpServers/github/command: server "github": environment variable NPX is not set`,
		path + `: /mcpServers/github/env/AGAIN: server "github": environment variable NPX is not set`,
		path + `: /mcpServers/github/env/GITHUB_TOKEN: server "github": environment variable GITHUB_TOKEN is not set`,
		path + `: /mcpServers/sqlite/args/2: server "sqlite": environment variable DB_DIR is not set`,
		`set the missing variables in the environment that starts mcp-simple-aggregator, or give a default in the configuration as ${NAME:-default}`,
	}, "\n")
	if err.Error() != want {
		t.Errorf("error:\n%s\nwant:\n%s", err, want)
	}
	wantMissing := map[string][]string{"files": {"WORK_DIR", "ENV_DIR"}, "github": {"NPX", "GITHUB_TOKEN"}, "sqlite": {"DB_DIR"}}
	if diff := cmp.Diff(wantMissing, unusable.Missing); diff != "" {
		t.Errorf("Missing (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"files", "github", "sqlite"}, unusable.Unusable); diff != "" {
		t.Errorf("Unusable (-want +got):\n%s", diff)
	}
	var byServer []string
	for _, key := range append(unusable.Unusable, "fine") {
		for _, p := range unusable.ProblemsOf(key) {
			byServer = append(byServer, Warning{File: unusable.Err.File, Problem: p}.String())
		}
	}
	if diff := cmp.Diff(want[:strings.LastIndexByte(want, '\n')], strings.Join(byServer, "\n")); diff != "" {
		t.Errorf("ProblemsOf, server by server (-want +got):\n%s", diff)
	}
	wantUsable := &Config{File: path,
		Servers: []Server{{Key: "fine", Command: "fine-server", Env: map[string]string{"FROM_FILE": "1"}, EnvFile: env}},
		Skipped: []Skipped{{Key: "off", Pointer: "/mcpServers/off/disabled", Reason: `"disabled": true`}}}
	if diff := cmp.Diff(wantUsable, unusable.Usable, cmp.AllowUnexported(Filter{})); diff != "" {
		t.Errorf("Usable (-want +got):\n%s", diff)
	}
	// What handled config.Error before still does.
	var cerr *Error
	if !errors.As(err, &cerr) || len(cerr.Problems) != 6 || cerr.File != path {
		t.Errorf("errors.As(*Error) = %#v", cerr)
	}

	// With every variable set, the same file loads.
	set := lookupIn("DB_DIR=/d\nNPX=npx\nGITHUB_TOKEN=t\nWORK_DIR=" + dir + "\nENV_DIR=" + dir)
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("A=b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg, _, err := Load(path, set); err != nil || len(cfg.Servers) != 4 {
		t.Errorf("with every variable set: %v, %+v", err, cfg)
	}
}

// A file every server of which needs a variable gives an empty usable configuration, and a file
// that breaks the schema or is not JSON is no UnusableServersError: nothing of it is usable.
func TestUnusableServersErrorBounds(t *testing.T) {
	_, _, err := Parse("c.json", []byte(`{"mcpServers": {"a": {"command": "$A"}, "b": {"command": "$B"}}}`), lookupIn(""))
	var unusable *UnusableServersError
	if !errors.As(err, &unusable) || len(unusable.Usable.Servers) != 0 || len(unusable.Missing) != 2 {
		t.Errorf("every server unusable: %#v", err)
	}
	for _, doc := range []string{
		`{"mcpServers": {"a": {"command": "$A"}, "b": {"args": ["no command"]}}}`,
		`{"mcpServers": {"a": {"command": "$A"},}}`,
	} {
		_, _, err := Parse("c.json", []byte(doc), lookupIn(""))
		if err == nil || errors.As(err, &unusable) {
			t.Errorf("%s: error %#v, want one that is no UnusableServersError", doc, err)
		}
	}
}
