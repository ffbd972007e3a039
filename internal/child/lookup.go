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
// options.env.PATH): a server whose "env" sets PATH finds its program there. When the child
// has the aggregator's own PATH and the command is not in it, the login shell's PATH is tried
// (see loginshell.go), and the child then runs with that PATH, which loginPath is.
func command(spec Spec) (cmd *exec.Cmd, loginPath string, err error) {
	path, ok := envPath(spec.Env)
	bare := !strings.ContainsAny(spec.Command, `/\`) && spec.Command != ""
	own := !ok || path == os.Getenv("PATH")
	if !ok {
		path = os.Getenv("PATH") // exec.Command's lookup, as before
	}
	if !bare || own && !loginShellSupported {
		return exec.Command(spec.Command, spec.Args...), "", nil
	}
	var found string
	if own {
		found, loginPath, err = lookPathOrLoginShell(spec, path)
	} else {
		found, err = lookPath(spec.Command, path)
	}
	if err != nil {
		return nil, "", err
	}
	cmd = exec.Command(found, spec.Args...)
	cmd.Args[0] = spec.Command // argv[0] as written, as a shell would pass it
	if loginPath != "" {
		cmd.Env = withPath(spec.Env, loginPath)
	}
	return cmd, loginPath, nil
}

// lookPathOrLoginShell finds the command of spec in path, the aggregator's own PATH, or else
// in the login shell's, which it then returns as loginPath: the child's PATH.
func lookPathOrLoginShell(spec Spec, path string) (found, loginPath string, err error) {
	if found, err := lookPathIn(spec.Command, path); err == nil {
		return found, "", nil
	}
	ls, asked := loginShellPath()
	var why error
	switch {
	case !asked:
		why = notFound{path: path, shell: ", and no login shell to ask for another (SHELL is not set)"}
	case ls.Err != nil:
		why = notFound{path: path, shell: fmt.Sprintf("; the login shell %s could not be asked for its PATH: %v", ls.Shell, ls.Err)}
	default:
		if found, err := lookPathIn(spec.Command, ls.Path); err == nil {
			debugLog("command not in the aggregator's PATH; found in the login shell's PATH, which the server gets",
				"server", spec.Key, "command", spec.Command, "found", found, "shell", ls.Shell, "PATH", ls.Path)
			return found, ls.Path, nil
		}
		why = notFound{path: path, shell: fmt.Sprintf(", nor in the PATH of the login shell %s (%s)", ls.Shell, ls.Path)}
	}
	return "", "", &exec.Error{Name: spec.Command, Err: why}
}

// withPath is env with path as its PATH.
func withPath(env []string, path string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); name != "PATH" {
			out = append(out, kv)
		}
	}
	return append(out, "PATH="+path)
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

// lookPath finds the executable file named file in the directories of path, the PATH set in
// the server's "env".
func lookPath(file, path string) (string, error) {
	found, err := lookPathIn(file, path)
	if err != nil {
		return "", &exec.Error{Name: file, Err: notInPath(path)}
	}
	return found, nil
}

// lookPathIn finds the executable file named file in the directories of path. Relative
// directories are skipped, as exec.LookPath refuses them (exec.ErrDot).
func lookPathIn(file, path string) (string, error) {
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
	return "", &exec.Error{Name: file, Err: exec.ErrNotFound}
}

// notInPath is exec.ErrNotFound for a PATH from the server's env.
type notInPath string

func (p notInPath) Error() string {
	return fmt.Sprintf("executable file not found in the PATH set in the server's \"env\" (%s)", string(p))
}

func (notInPath) Unwrap() error { return exec.ErrNotFound }

// notFound is exec.ErrNotFound for a command that is neither in the aggregator's PATH nor in
// the login shell's; shell says what became of the login shell.
type notFound struct{ path, shell string }

func (e notFound) Error() string {
	return fmt.Sprintf("executable file not found in the aggregator's PATH (%s)%s", e.path, e.shell)
}

func (notFound) Unwrap() error { return exec.ErrNotFound }
