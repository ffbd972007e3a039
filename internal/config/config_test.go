package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rogpeppe/go-internal/txtar"
)

var update = flag.Bool("update", false, "rewrite the golden sections of testdata/load/*.txtar")

// TestLoad runs every case in testdata/load. A case is a txtar archive with:
//
//	config.json    the configuration file
//	env            optional: the environment, one NAME=value per line
//	files/<path>   optional: a file written at <path> beside config.json (a directory is
//	               made for a path ending in "/")
//	want           what Parse returns, as rendered by render
//
// The files are written in a new directory; in env and want it is written $WORK, and
// $WORK/config.json is written config.json.
func TestLoad(t *testing.T) {
	files, err := filepath.Glob("testdata/load/*.txtar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cases in testdata/load: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
			ar, err := txtar.ParseFile(file)
			if err != nil {
				t.Fatal(err)
			}
			data, ok := section(ar, "config.json")
			if !ok {
				t.Fatal("no config.json section")
			}
			work := t.TempDir()
			for _, f := range ar.Files {
				name, ok := strings.CutPrefix(f.Name, "files/")
				if !ok {
					continue
				}
				path := filepath.Join(work, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if strings.HasSuffix(name, "/") {
					if err := os.MkdirAll(path, 0o755); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := os.WriteFile(path, f.Data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			env, _ := section(ar, "env")
			env = bytes.ReplaceAll(env, []byte("$WORK"), []byte(work))
			got := render(Parse(filepath.Join(work, "config.json"), data, lookupIn(string(env))))
			got = strings.ReplaceAll(got, filepath.Join(work, "config.json"), "config.json")
			got = strings.ReplaceAll(got, work, "$WORK")
			want, _ := section(ar, "want")
			if *update {
				setSection(ar, "want", []byte(got))
				if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("Parse mismatch (-want +got), rerun with -update to accept:\n%s", diff)
			}
		})
	}
}

// render writes the outcome of Parse in a stable, readable form.
func render(cfg *Config, warnings []Warning, err error) string {
	var b strings.Builder
	for _, w := range warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	if err != nil {
		fmt.Fprintf(&b, "error:\n%s\n", err)
		var unusable *UnusableServersError
		if !errors.As(err, &unusable) {
			return b.String()
		}
		fmt.Fprintf(&b, "unusable: %q\n", unusable.Unusable)
		for _, key := range slices.Sorted(maps.Keys(unusable.Missing)) {
			fmt.Fprintf(&b, "missing for %q: %q\n", key, unusable.Missing[key])
		}
		b.WriteString("usable:\n")
		cfg = unusable.Usable
	}
	for _, s := range cfg.Servers {
		fmt.Fprintf(&b, "server %q\n  command %q\n", s.Key, s.Command)
		for _, a := range s.Args {
			fmt.Fprintf(&b, "  arg %q\n", a)
		}
		for _, name := range slices.Sorted(maps.Keys(s.Env)) {
			fmt.Fprintf(&b, "  env %s=%q\n", name, s.Env[name])
		}
		if s.Dir != "" {
			fmt.Fprintf(&b, "  dir %q\n", s.Dir)
		}
		if s.EnvFile != "" {
			fmt.Fprintf(&b, "  envFile %q\n", s.EnvFile)
		}
		if s.AlwaysLoad {
			b.WriteString("  alwaysLoad\n")
		}
		if s.Tools.include != nil && len(s.Tools.include) == 0 {
			b.WriteString("  tools: includeTools is empty, every tool is hidden\n")
		}
		for _, p := range slices.Concat(s.Tools.include, s.Tools.exclude) {
			fmt.Fprintf(&b, "  tools: %s %q at %s\n", p.field, p.text, p.pointer)
		}
	}
	for _, s := range cfg.Skipped {
		kind := "disabled"
		if s.Remote {
			kind = "remote"
		}
		fmt.Fprintf(&b, "skipped %q (%s) at %s: %s\n", s.Key, kind, s.Pointer, s.Reason)
	}
	return b.String()
}

func lookupIn(env string) LookupFunc {
	vars := map[string]string{}
	for _, line := range strings.Split(env, "\n") {
		if name, value, ok := strings.Cut(line, "="); ok {
			vars[name] = value
		}
	}
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func section(ar *txtar.Archive, name string) ([]byte, bool) {
	for _, f := range ar.Files {
		if f.Name == name {
			return f.Data, true
		}
	}
	return nil, false
}

func setSection(ar *txtar.Archive, name string, data []byte) {
	for i, f := range ar.Files {
		if f.Name == name {
			ar.Files[i].Data = data
			return
		}
	}
	ar.Files = append(ar.Files, txtar.File{Name: name, Data: data})
}

func TestLoadReadError(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.json")
	_, _, err := Load(missing, lookupIn(""))
	want := missing + ": cannot read the configuration file: no such file or directory"
	if runtime.GOOS == "windows" {
		want = missing + ": cannot read the configuration file: The system cannot find the file specified."
	}
	if err == nil || err.Error() != want {
		t.Errorf("Load(%q) error = %v, want %q", missing, err, want)
	}

	dir := t.TempDir()
	if _, _, err := Load(dir, lookupIn("")); err == nil || !strings.HasPrefix(err.Error(), dir+": cannot read the configuration file: ") {
		t.Errorf("Load(directory) error = %v, want it to name %s", err, dir)
	}
}

func TestLoadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(path, []byte(`{"mcpServers": {"a": {"command": "$CMD"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := Load(path, lookupIn("CMD=/bin/a"))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{File: path, Servers: []Server{{Key: "a", Command: "/bin/a", Env: map[string]string{}}}}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("Load mismatch (-want +got):\n%s", diff)
	}

	var cerr *Error
	_, _, err = Load(path, lookupIn(""))
	if !errors.As(err, &cerr) || cerr.File != path || len(cerr.Problems) != 1 || cerr.Problems[0].Pointer != "/mcpServers/a/command" {
		t.Errorf("Load without CMD: error = %#v, want one problem at /mcpServers/a/command", err)
	}
}

// The schema is the contract: every server field it describes must be one the loader reads.
func TestKnownServerFields(t *testing.T) {
	got := slices.Sorted(maps.Keys(knownServerFields()))
	want := []string{
		"alwaysAllow", "alwaysLoad", "args", "autoApprove", "command", "cwd", "description",
		"dev", "disabled", "disabledTools", "enabled", "env", "envFile", "excludeTools", "httpUrl",
		"includeTools", "serverUrl", "tags", "tcp", "timeout", "transportType", "trust", "type",
		"url", "watchPaths",
	}
	if !slices.Equal(got, want) {
		t.Errorf("server fields in the schema = %v, want %v", got, want)
	}
}

// ${workspaceFolder} is the workspace a VS Code or Cursor file belongs to: the directory above
// .vscode or .cursor, else the file's own directory.
func TestWorkspaceFolder(t *testing.T) {
	root := t.TempDir()
	for _, c := range []struct{ dir, want string }{
		{filepath.Join(root, "proj", ".vscode"), filepath.Join(root, "proj")},
		{filepath.Join(root, "other", ".cursor"), filepath.Join(root, "other")},
		{filepath.Join(root, "plain"), filepath.Join(root, "plain")},
	} {
		if err := os.MkdirAll(c.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(c.dir, "mcp.json")
		data := `{"servers": {"a": {"type": "stdio", "command": "x", "args": ["${workspaceFolder}", "${workspaceFolderBasename}"]}}}`
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := Load(path, lookupIn(""))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := cfg.Servers[0].Args, []string{c.want, filepath.Base(c.want)}; !slices.Equal(got, want) {
			t.Errorf("%s: ${workspaceFolder}, ${workspaceFolderBasename} = %q, want %q", path, got, want)
		}
	}
}
