package child

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// command makes the exec.Cmd for spec. A bare command name is looked up in the PATH of the
// child's own environment, as Claude Desktop and the other clients do (Node's spawn searches
// options.env.PATH): a server whose "env" sets PATH finds its program there.
func command(spec Spec) (*exec.Cmd, error) {
	path, ok := envPath(spec.Env)
	if !ok || path == os.Getenv("PATH") || strings.ContainsAny(spec.Command, `/\`) || spec.Command == "" {
		return exec.Command(spec.Command, spec.Args...), nil
	}
	found, err := lookPath(spec.Command, path)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(found, spec.Args...)
	cmd.Args[0] = spec.Command // argv[0] as written, as a shell would pass it
	return cmd, nil
}

// envPath is the value of PATH in env (the last one counts; any case on Windows).
func envPath(env []string) (string, bool) {
	path, ok := "", false
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if name == "PATH" || runtime.GOOS == "windows" && strings.EqualFold(name, "PATH") {
			path, ok = value, true
		}
	}
	return path, ok
}

// lookPath finds the executable file named file in the directories of path. Relative
// directories are skipped, as exec.LookPath refuses them (exec.ErrDot).
func lookPath(file, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		// With a separator in its argument, LookPath checks that one file (adding the
		// PATHEXT extensions on Windows).
		if found, err := exec.LookPath(filepath.Join(dir, file)); err == nil {
			return found, nil
		}
	}
	return "", &exec.Error{Name: file, Err: notInPath(path)}
}

// notInPath is exec.ErrNotFound for a PATH from the server's env.
type notInPath string

func (p notInPath) Error() string {
	return fmt.Sprintf("executable file not found in the PATH set in the server's \"env\" (%s)", string(p))
}

func (notInPath) Unwrap() error { return exec.ErrNotFound }
