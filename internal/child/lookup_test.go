package child

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// makeExecutable creates an executable file dir/name (name.exe on Windows) and returns the
// path LookPath finds for it.
func makeExecutable(t *testing.T, dir, name string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/false\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func pathList(dirs ...string) string { return strings.Join(dirs, string(os.PathListSeparator)) }

func TestEnvPath(t *testing.T) {
	for _, tc := range []struct {
		env    []string
		want   string
		wantOK bool
	}{
		{nil, "", false},
		{[]string{"HOME=/h", "PATHX=/x", "XPATH=/y"}, "", false},
		{[]string{"PATH=/a"}, "/a", true},
		{[]string{"PATH="}, "", true},
		{[]string{"PATH=/a", "HOME=/h", "PATH=/b"}, "/b", true},
		{[]string{"PATH=/a=b"}, "/a=b", true},
		// Any case counts on Windows, where environment names are case-insensitive.
		{[]string{"PATH=/a", "Path=/b"}, map[bool]string{true: "/b", false: "/a"}[runtime.GOOS == "windows"], true},
	} {
		got, ok := envPath(tc.env)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("envPath(%q) = %q, %v; want %q, %v", tc.env, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestCommandLooksUpTheEnvPath(t *testing.T) {
	empty, withDir, found := t.TempDir(), t.TempDir(), t.TempDir()
	// A directory of the same name is no executable.
	if err := os.Mkdir(filepath.Join(withDir, "prog"), 0o755); err != nil {
		t.Fatal(err)
	}
	want := makeExecutable(t, found, "prog")
	// An executable of the same name in the process's PATH must not be taken.
	t.Setenv("PATH", t.TempDir())
	makeExecutable(t, os.Getenv("PATH"), "prog")

	spec := Spec{Command: "prog", Args: []string{"a", "b c"}, Env: []string{"PATH=" + pathList("", "relative", empty, withDir, found, empty)}}
	cmd, _, err := command(spec)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Path != want {
		t.Errorf("Path = %q, want %q", cmd.Path, want)
	}
	// argv[0] as written.
	if diff := cmp.Diff([]string{"prog", "a", "b c"}, cmd.Args); diff != "" {
		t.Errorf("Args (-want +got):\n%s", diff)
	}
}

func TestCommandSkipsRelativePathEntries(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	makeExecutable(t, "rel", "prog")
	makeExecutable(t, ".", "prog")
	t.Setenv("PATH", t.TempDir())
	path := pathList("rel", ".", "")
	_, _, err := command(Spec{Command: "prog", Env: []string{"PATH=" + path}})
	if !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("command() error = %v, want one that wraps exec.ErrNotFound", err)
	}

	// An absolute entry after them is searched.
	want := makeExecutable(t, filepath.Join(dir, "abs"), "prog")
	cmd, _, err := command(Spec{Command: "prog", Env: []string{"PATH=" + pathList("rel", filepath.Join(dir, "abs"))}})
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Path != want {
		t.Errorf("Path = %q, want %q", cmd.Path, want)
	}
}

func TestCommandNotFoundNamesTheEnvPath(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	t.Setenv("PATH", t.TempDir())
	path := pathList(a, b)
	_, _, err := command(Spec{Command: "prog", Env: []string{"HOME=/h", "PATH=" + path}})
	if !errors.Is(err, exec.ErrNotFound) {
		t.Fatalf("command() error = %v, want one that wraps exec.ErrNotFound", err)
	}
	want := `exec: "prog": executable file not found in the PATH set in the server's "env" (` + path + `)`
	if got := err.Error(); got != want {
		t.Errorf("error = %q, want %q", got, want)
	}

	// Start gives the same error, and no process.
	p, err := Start(Spec{Key: "srv", Command: "prog", Env: []string{"PATH=" + path}}, nil)
	if p != nil || !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("Start() = %v, %v; want nil and an error that wraps exec.ErrNotFound", p, err)
	}
}

func TestCommandWithASeparatorIsUsedAsIs(t *testing.T) {
	dir := t.TempDir()
	makeExecutable(t, dir, filepath.Join("sub", "prog"))
	t.Setenv("PATH", t.TempDir())
	for _, name := range []string{
		filepath.Join("sub", "prog"),
		filepath.Join(dir, "sub", "prog"),
		filepath.Join(dir, "missing", "prog"),
	} {
		cmd, _, err := command(Spec{Command: name, Args: []string{"x"}, Env: []string{"PATH=" + dir}})
		if err != nil {
			t.Errorf("command(%q): %v", name, err)
			continue
		}
		if cmd.Path != name {
			t.Errorf("command(%q): Path = %q, want it as written", name, cmd.Path)
		}
		if diff := cmp.Diff([]string{name, "x"}, cmd.Args); diff != "" {
			t.Errorf("command(%q): Args (-want +got):\n%s", name, diff)
		}
	}
}

func TestCommandWithoutItsOwnPathUsesTheProcessPath(t *testing.T) {
	dir := t.TempDir()
	want := makeExecutable(t, dir, "prog")
	t.Setenv("PATH", dir)
	for _, env := range [][]string{
		{"HOME=/h"},
		// The same PATH as the process's.
		{"PATH=" + dir},
	} {
		cmd, _, err := command(Spec{Command: "prog", Env: env})
		if err != nil {
			t.Errorf("env %q: %v", env, err)
			continue
		}
		if cmd.Path != want {
			t.Errorf("env %q: Path = %q, want %q", env, cmd.Path, want)
		}
	}
}
