package child

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// A desktop app started from the Dock, Finder or a desktop launcher gets a short PATH
// (/usr/bin:/bin:/usr/sbin:/sbin on macOS), without the directories of Homebrew, nvm, volta
// or asdf that the user's shell adds, so "npx" or "uvx" is not found. As VS Code does for the
// same reason, the aggregator then asks the user's login shell for its PATH, once, and looks
// the command up there. The shell only prints its PATH: it never runs a server and never sees
// a value of the configuration.

// loginShellTimeout bounds how long the login shell may take to print its PATH (its rc files
// may be slow, or wait for something).
var loginShellTimeout = 5 * time.Second

// loginShellVar is set for the login shell, so that rc files can tell this run apart (VS Code
// sets VSCODE_RESOLVING_ENVIRONMENT the same way).
const loginShellVar = "MCP_SIMPLE_AGGREGATOR_RESOLVING_ENVIRONMENT"

// loginShell is what the user's login shell said of its PATH.
type loginShell struct {
	// Shell is the program asked ($SHELL).
	Shell string
	// Path is its PATH; "" when it could not be had (Err says why).
	Path string
	Err  error
	// Took is how long the shell took.
	Took time.Duration
}

var (
	loginMu    sync.Mutex
	loginCache = map[string]*loginShell{} // by shell: each is asked once
	logger     *slog.Logger
)

// SetLog sets where the child package logs what it learns of the login shell (at debug
// level): which shell was asked, what PATH it gave, and which server's command was found in
// it. Without it, nothing is logged.
func SetLog(l *slog.Logger) {
	loginMu.Lock()
	defer loginMu.Unlock()
	logger = l
}

func debugLog(msg string, args ...any) {
	loginMu.Lock()
	l := logger
	loginMu.Unlock()
	if l != nil {
		l.Debug(msg, args...)
	}
}

// loginShellPath asks the login shell $SHELL for its PATH, once per shell for the life of
// the process (later calls get the first answer). ok is false when there is no shell to ask.
func loginShellPath() (ls *loginShell, ok bool) {
	shell := os.Getenv("SHELL")
	if shell == "" || !loginShellSupported {
		return nil, false
	}
	loginMu.Lock()
	defer loginMu.Unlock()
	if ls, ok := loginCache[shell]; ok {
		return ls, true
	}
	ls = askLoginShell(shell, loginShellTimeout)
	loginCache[shell] = ls
	if l := logger; l != nil {
		if ls.Err != nil {
			l.Debug("cannot learn the login shell's PATH", "shell", shell, "error", ls.Err, "took", ls.Took)
		} else {
			l.Debug("the login shell's PATH", "shell", shell, "PATH", ls.Path, "took", ls.Took)
		}
	}
	return ls, true
}

// askLoginShell runs shell as an interactive login shell (-i -l, so that it reads the files
// a terminal's shell reads) that prints its PATH between two markers; whatever its rc files
// print around them, and on stderr, is ignored. It is given no input, and is ended with
// everything it started when it takes longer than timeout.
func askLoginShell(shell string, timeout time.Duration) *loginShell {
	start := time.Now()
	ls := &loginShell{Shell: shell}
	var b [8]byte
	rand.Read(b[:])
	mark := "_MCP_SIMPLE_AGGREGATOR_" + hex.EncodeToString(b[:]) + "_"
	// echo and printenv behave alike in sh, bash, zsh and fish; printenv prints the exported
	// PATH with ":" whatever the shell's own list syntax.
	script := "echo " + mark + "; printenv PATH; echo " + mark
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, shell, "-i", "-l", "-c", script)
	cmd.Env = append(os.Environ(), loginShellVar+"=1")
	var out limitedBuffer
	cmd.Stdout = &out // no Stdin: it reads from the null device
	prepareLoginShell(cmd)
	cmd.WaitDelay = time.Second // a background job of an rc file may hold stdout
	err := cmd.Run()
	ls.Took = time.Since(start)
	if ctx.Err() != nil {
		ls.Err = fmt.Errorf("it did not answer within %v", timeout)
		return ls
	}
	if path, ok := between(out.Bytes(), mark); ok && path != "" {
		ls.Path = path
		return ls
	}
	if err != nil {
		ls.Err = fmt.Errorf("%s -i -l -c: %v", shell, err)
	} else {
		ls.Err = fmt.Errorf("%s -i -l -c printed no PATH", shell)
	}
	return ls
}

// between returns the text between the first two lines that are mark.
func between(out []byte, mark string) (string, bool) {
	_, rest, ok := bytes.Cut(out, []byte(mark+"\n"))
	if !ok {
		return "", false
	}
	text, _, ok := bytes.Cut(rest, []byte(mark))
	if !ok {
		return "", false
	}
	return strings.TrimSpace(string(text)), true
}

// limitedBuffer keeps the first 1 MiB written to it: a noisy rc file cannot fill memory.
type limitedBuffer struct{ bytes.Buffer }

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := 1<<20 - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
