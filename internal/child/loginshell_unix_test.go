//go:build unix

package child

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeShell writes a login shell that behaves like a user's: rc files that print on stdout
// and stderr, and a PATH of their own (loginPath). It records each run (its arguments and the
// resolving variable) in the file it returns, then runs the script it is given.
func fakeShell(t *testing.T, loginPath, before string) (shell, record string) {
	t.Helper()
	dir := t.TempDir()
	shell, record = filepath.Join(dir, "fake-login-shell"), filepath.Join(dir, "runs")
	script := `#!/bin/sh
echo "args: $*" >> '` + record + `'
echo "resolving: $` + loginShellVar + `" >> '` + record + `'
echo "Welcome! (an rc file that talks)"
echo "rc: command not found: compinit" >&2
` + before + `
PATH='` + loginPath + `'
export PATH
[ "$1 $2 $3" = "-i -l -c" ] || exit 3
eval "$4"
echo "more noise after"
`
	if err := os.WriteFile(shell, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return shell, record
}

func TestLoginShellPathFindsTheCommand(t *testing.T) {
	aggPath, loginBin := t.TempDir(), t.TempDir()
	want := makeExecutable(t, loginBin, "npx-like")
	loginPath := pathList("/usr/bin", "/bin", loginBin)
	shell, record := fakeShell(t, loginPath, "")
	t.Setenv("PATH", aggPath)
	t.Setenv("SHELL", shell)
	for range 2 {
		cmd, got, err := command(Spec{Key: "s", Command: "npx-like", Args: []string{"--secret-arg"}, Env: []string{"HOME=/h", "PATH=" + aggPath}})
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Path != want || got != loginPath {
			t.Errorf("Path %q, login PATH %q; want %q, %q", cmd.Path, got, want, loginPath)
		}
		// The server runs with the login shell's PATH and the rest of its environment.
		if env := strings.Join(cmd.Env, "\n"); env != "HOME=/h\nPATH="+loginPath {
			t.Errorf("the child's environment:\n%s\nwant HOME and the login shell's PATH", env)
		}
	}
	runs, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	// Asked once, as an interactive login shell, told why, and shown nothing of the server.
	if n := strings.Count(string(runs), "args: "); n != 1 {
		t.Errorf("the login shell ran %d times, want once:\n%s", n, runs)
	}
	if !strings.Contains(string(runs), "args: -i -l -c echo _MCP_SIMPLE_AGGREGATOR_") || !strings.Contains(string(runs), "resolving: 1") {
		t.Errorf("the login shell's runs:\n%s", runs)
	}
	if strings.Contains(string(runs), "npx-like") || strings.Contains(string(runs), "secret") {
		t.Errorf("the login shell saw the server's command or arguments:\n%s", runs)
	}
}

func TestLoginShellPathNotFound(t *testing.T) {
	aggPath := t.TempDir()
	t.Setenv("PATH", aggPath)

	shell, _ := fakeShell(t, "/usr/bin:/bin:/nonexistent/login/bin", "")
	t.Setenv("SHELL", shell)
	_, _, err := command(Spec{Command: "nowhere-cmd", Env: []string{"PATH=" + aggPath}})
	want := `exec: "nowhere-cmd": executable file not found in the aggregator's PATH (` + aggPath + `), nor in the PATH of the login shell ` + shell + ` (/usr/bin:/bin:/nonexistent/login/bin)`
	if err == nil || err.Error() != want {
		t.Errorf("error %v\nwant %s", err, want)
	}

	t.Setenv("SHELL", "")
	_, _, err = command(Spec{Command: "nowhere-cmd", Env: []string{"PATH=" + aggPath}})
	if want := "(" + aggPath + "), and no login shell to ask for another (SHELL is not set)"; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("without SHELL: %v, want it to end in %q", err, want)
	}

	// A shell that fails without a PATH.
	broken, _ := fakeShell(t, "/x", "exit 7")
	t.Setenv("SHELL", broken)
	_, _, err = command(Spec{Command: "nowhere-cmd", Env: []string{"PATH=" + aggPath}})
	if want := "the login shell " + broken + " could not be asked for its PATH: " + broken + " -i -l -c: exit status 7"; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("a failing shell: %v, want it to end in %q", err, want)
	}
}

// A login shell that hangs (an rc file waiting for something) is ended with what it started
// once the timeout has passed.
func TestLoginShellTimeout(t *testing.T) {
	aggPath := t.TempDir()
	t.Setenv("PATH", aggPath)
	shell, _ := fakeShell(t, "/usr/bin:/bin", "/bin/sleep 30 & /bin/sleep 30")
	t.Setenv("SHELL", shell)
	old := loginShellTimeout
	loginShellTimeout = 300 * time.Millisecond
	defer func() { loginShellTimeout = old }()
	start := time.Now()
	_, _, err := command(Spec{Command: "nowhere-cmd", Env: []string{"PATH=" + aggPath}})
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %v with a timeout of 300ms", took)
	}
	if want := "could not be asked for its PATH: it did not answer within 300ms"; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("error %v, want it to end in %q", err, want)
	}
}

// A server whose "env" sets its own PATH, and a command with a path, never make the login
// shell run.
func TestLoginShellNotAskedForItsOwnPath(t *testing.T) {
	aggPath, own := t.TempDir(), t.TempDir()
	t.Setenv("PATH", aggPath)
	shell, record := fakeShell(t, "/x", "")
	t.Setenv("SHELL", shell)
	command(Spec{Command: "nowhere-cmd", Env: []string{"PATH=" + own}})
	command(Spec{Command: "./nowhere-cmd", Env: []string{"PATH=" + aggPath}})
	if _, err := os.Stat(record); err == nil {
		t.Error("the login shell was asked")
	}
}

func TestBetweenMarkers(t *testing.T) {
	for _, c := range []struct {
		out, want string
		ok        bool
	}{
		{"noise\nM\n/a:/b\nM\nmore", "/a:/b", true},
		{"M\n/a\nM\n", "/a", true},
		{"noise M\n", "", false},
		{"M\n/a", "", false},
	} {
		got, ok := between([]byte(c.out), "M")
		if got != c.want || ok != c.ok {
			t.Errorf("between(%q) = %q, %v; want %q, %v", c.out, got, ok, c.want, c.ok)
		}
	}
}
