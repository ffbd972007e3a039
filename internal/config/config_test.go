package config

import (
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
//	config.json  the configuration file
//	env          optional: the environment, one NAME=value per line
//	want         what Parse returns, as rendered by render
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
			env, _ := section(ar, "env")
			got := render(Parse("config.json", data, lookupIn(string(env))))
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
		return b.String()
	}
	for _, s := range cfg.Servers {
		fmt.Fprintf(&b, "server %q\n  command %q\n", s.Key, s.Command)
		for _, a := range s.Args {
			fmt.Fprintf(&b, "  arg %q\n", a)
		}
		for _, name := range slices.Sorted(maps.Keys(s.Env)) {
			fmt.Fprintf(&b, "  env %s=%q\n", name, s.Env[name])
		}
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
	got := slices.Sorted(maps.Keys(knownServerFields))
	if want := []string{"args", "command", "env", "type"}; !slices.Equal(got, want) {
		t.Errorf("server fields in the schema = %v, want %v", got, want)
	}
}
