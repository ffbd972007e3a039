package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTreeCheck runs .ci/tree-check, which CI runs on the repository, on trees of its own: it
// fails on a tracked built program and on a file over 1 MiB outside testdata/, and passes
// scripts, large test data and ordinary sources.
func TestTreeCheck(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	script, err := filepath.Abs("../../.ci/tree-check")
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 1<<20+1)
	for _, tc := range []struct {
		name  string
		files map[string]string // path: content; a path ending in * is made executable
		bad   []string          // the paths the check must name; none when it passes
	}{
		{"clean", map[string]string{
			"main.go":                        "package main\n",
			"run*":                           "#!/usr/bin/env bash\necho hi\n",
			"testdata/large.json":            big,
			"internal/x/testdata/large.json": big,
		}, nil},
		{"elf", map[string]string{"main.go": "package main\n", "server": "\x7fELF\x02\x01\x01rest"}, []string{"server"}},
		{"mach-o", map[string]string{"tool": "\xcf\xfa\xed\xfe rest"}, []string{"tool"}},
		{"pe", map[string]string{"tool.exe": "MZ\x90\x00rest"}, []string{"tool.exe"}},
		{"executable that is not a script", map[string]string{"blob*": "data"}, []string{"blob"}},
		{"large outside testdata", map[string]string{"docs/big.txt": big, "testdata/ok.txt": big}, []string{"docs/big.txt"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			git := func(args ...string) {
				t.Helper()
				cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			git("init", "-q")
			for name, content := range tc.files {
				mode := os.FileMode(0o644)
				if strings.HasSuffix(name, "*") {
					name, mode = strings.TrimSuffix(name, "*"), 0o755
				}
				path := filepath.Join(dir, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(content), mode); err != nil {
					t.Fatal(err)
				}
			}
			git("add", ".")
			cmd := exec.Command("bash", script)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			if len(tc.bad) == 0 {
				if err != nil {
					t.Fatalf("the check failed on a clean tree: %v\n%s", err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("the check passed a tree with %v:\n%s", tc.bad, out)
			}
			for _, b := range tc.bad {
				if !strings.Contains(string(out), ": "+b) {
					t.Errorf("the check does not name %s:\n%s", b, out)
				}
			}
			if got, want := strings.Count(string(out), "\n"), len(tc.bad); got != want {
				t.Errorf("the check named %d files, want %d:\n%s", got, want, out)
			}
		})
	}
}
