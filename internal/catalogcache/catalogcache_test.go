package catalogcache

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func open(t *testing.T) *Cache {
	t.Helper()
	c, err := Open(filepath.Join(t.TempDir(), "catalogs"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var server = Server{Command: "npx", Args: []string{"-y", "server-github"}, Env: map[string]string{"GITHUB_TOKEN": "ghp_secret123"}, Dir: "/home/u",
	Client: json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}`)}

// An entry comes back byte for byte, from a file only the user can read, with no value of env
// in it or in its name.
func TestStoreLoad(t *testing.T) {
	c := open(t)
	id := c.Identity(server)
	tool := json.RawMessage(`{ "name": "search",  "description": "a <b> & c \u00e9", "inputSchema": {"type":"object"} }`)
	e := &Entry{Identity: id, Version: "1.2.3", Written: time.Now(), Era: "legacy", Protocol: "2025-11-25", Name: "github",
		Instructions: "Use <it>.", Caps: json.RawMessage(`{"tools": {"listChanged":true}}`),
		Lists: map[string][]json.RawMessage{"tools": {tool}}, Hints: map[string]Hint{"tools": {TTLMs: 5, Public: true}}}
	if err := c.Store(e); err != nil {
		t.Fatal(err)
	}
	got, err := c.Load(id, "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Lists["tools"][0]) != string(tool) || string(got.Caps) != string(e.Caps) || got.Instructions != e.Instructions || got.Hints["tools"] != e.Hints["tools"] {
		t.Errorf("came back as %+v", got)
	}
	files, _ := os.ReadDir(c.Dir())
	for _, f := range files {
		data, _ := os.ReadFile(filepath.Join(c.Dir(), f.Name()))
		if strings.Contains(string(data), "ghp_secret123") || strings.Contains(f.Name(), "ghp_secret123") {
			t.Errorf("%s holds the env value", f.Name())
		}
		info, _ := f.Info()
		if runtime.GOOS != "windows" && info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", f.Name(), info.Mode().Perm())
		}
	}
	if info, _ := os.Stat(c.Dir()); runtime.GOOS != "windows" && info.Mode().Perm() != 0o700 {
		t.Errorf("the directory has mode %v, want 0700", info.Mode().Perm())
	}
	if of := c.Of(server); len(of) != 1 || of[0].Identity != id {
		t.Errorf("Of = %+v", of)
	}
}

// Everything that decides what a server says makes another identity: a value of env, the
// directory, the client; the same entry is the same identity in another process.
func TestIdentity(t *testing.T) {
	c := open(t)
	id := c.Identity(server)
	for _, change := range []func(s *Server){
		func(s *Server) { s.Env = map[string]string{"GITHUB_TOKEN": "other"} },
		func(s *Server) { s.Dir = "/elsewhere" },
		func(s *Server) { s.Args = []string{"-y"} },
		func(s *Server) { s.Client = json.RawMessage(`{"protocolVersion":"2025-06-18"}`) },
	} {
		s := server
		change(&s)
		if c.Identity(s) == id {
			t.Errorf("%+v has the identity of %+v", s, server)
		}
	}
	again, err := Open(c.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if again.Identity(server) != id {
		t.Error("the identity changed with the process")
	}
}

// An entry that cannot be used says why; a missing one is ErrMissing.
func TestUnusable(t *testing.T) {
	c := open(t)
	id := c.Identity(server)
	if _, err := c.Load(id, "1"); !errors.Is(err, ErrMissing) {
		t.Errorf("missing: %v", err)
	}
	c.Store(&Entry{Identity: id, Version: "1", Caps: json.RawMessage(`{}`)})
	if _, err := c.Load(id, "2"); err == nil || !strings.Contains(err.Error(), `written by version "1"`) {
		t.Errorf("another version: %v", err)
	}
	os.WriteFile(c.path(id), []byte(`{"format":1,`), 0o600)
	if _, err := c.Load(id, "1"); err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Errorf("corrupt: %v", err)
	}
	other := c.Identity(Server{Command: "x"})
	c.Store(&Entry{Identity: other, Version: "1", Caps: json.RawMessage(`{}`)})
	os.Rename(c.path(other), c.path(id))
	if _, err := c.Load(id, "1"); err == nil || !strings.Contains(err.Error(), "another server") {
		t.Errorf("another identity: %v", err)
	}
	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	if files, _ := os.ReadDir(c.Dir()); len(files) != 0 {
		t.Errorf("left after Clear: %v", files)
	}
}

// A directory open to others is made private.
func TestPrivateDir(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	dir := filepath.Join(t.TempDir(), "catalogs")
	os.MkdirAll(dir, 0o755)
	if _, err := Open(dir); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(dir); info.Mode().Perm() != 0o700 {
		t.Errorf("mode %v", info.Mode().Perm())
	}
}
