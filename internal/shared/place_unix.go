//go:build unix

package shared

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// Supported reports whether sessions can share a process here.
const Supported = true

// place is where the shared process of one build and user lives: a directory of the user's
// alone, with its socket, the lock its starts take, and its log.
type place struct {
	dir, socket, lock, log string
}

// maxSocket is the longest socket path the place may have: a Unix socket's path holds 104
// bytes on macOS and the BSDs and 108 on Linux, the NUL that ends it included.
const maxSocket = 100

// shortBase is where the short place is made when the natural one's socket path would be too
// long: macOS's TMPDIR (/var/folders/xx/…/T/) alone is about 48 characters.
var shortBase = "/tmp"

// locate is the place of the build: $XDG_RUNTIME_DIR/mcp-simple-aggregator (a per-user
// directory the system cleans), else a directory of the user's in the temporary directory;
// when its socket path would be too long for a Unix socket, a directory of the user's in
// /tmp, which is as private (the same checks).
func locate(build string) (place, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("mcp-simple-aggregator-%d", os.Getuid()))
	if base := os.Getenv("XDG_RUNTIME_DIR"); base != "" {
		dir = filepath.Join(base, "mcp-simple-aggregator")
	}
	p := at(dir, build)
	if len(p.socket) <= maxSocket {
		if err := private(dir); err != nil {
			return place{}, err
		}
		return p, nil
	}
	short := at(filepath.Join(shortBase, fmt.Sprintf("mcp-simple-aggregator-%d", os.Getuid())), build)
	if len(short.socket) > maxSocket {
		return place{}, fmt.Errorf("the socket paths %s and %s are too long for a Unix socket (at most %d bytes); set XDG_RUNTIME_DIR or TMPDIR to a shorter directory", p.socket, short.socket, maxSocket)
	}
	if err := private(short.dir); err != nil {
		return place{}, fmt.Errorf("the socket path %s is too long for a Unix socket (at most %d bytes), and the shorter place cannot be used: %w; set XDG_RUNTIME_DIR or TMPDIR to a shorter directory", p.socket, maxSocket, err)
	}
	return short, nil
}

// at is the place of the build in dir.
func at(dir, build string) place {
	name := filepath.Join(dir, "shared-"+build)
	return place{dir: dir, socket: name + ".sock", lock: name + ".lock", log: name + ".log"}
}

// private makes dir, or checks it: a directory, not a link, the user's, and no one else's
// (mode 0700, restored when looser). Anything else is refused: another user could read the
// socket's traffic, or put a socket of theirs in its place.
func private(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("the shared process's directory %s: %w", dir, err)
	}
	info, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("the shared process's directory %s: %w", dir, err)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	switch {
	case info.Mode()&fs.ModeSymlink != 0 || !info.IsDir():
		return fmt.Errorf("the shared process's directory %s is not a directory (a link, or a file): remove it", dir)
	case !ok || int(st.Uid) != os.Getuid():
		return fmt.Errorf("the shared process's directory %s belongs to another user: it is not used", dir)
	case info.Mode().Perm() != 0o700:
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("the shared process's directory %s is open to other users (mode %v) and cannot be made private: %w", dir, info.Mode().Perm(), err)
		}
	}
	return nil
}

// build identifies the program's build: sessions of other builds (an upgrade, another copy)
// use another shared process, which speaks as they do.
func build(exe, version string) string {
	h := sha256.New()
	fmt.Fprintln(h, version, exe)
	if info, err := os.Stat(exe); err == nil {
		fmt.Fprintln(h, info.Size(), info.ModTime().UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// sameUser reports whether the peer of the Unix connection c runs as this user, and refuses
// it otherwise.
func sameUser(c net.Conn) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return errors.New("not a Unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var uid int
	var cerr error
	if err := raw.Control(func(fd uintptr) { uid, cerr = peerUID(int(fd)) }); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("the peer's credentials: %w", cerr)
	}
	if uid != os.Getuid() {
		return fmt.Errorf("a connection of user %d, not %d: refused", uid, os.Getuid())
	}
	return nil
}

// detached makes the shared process a process group of its own, in the session of the client
// that started it: a signal to the client's group (a client ending its server's group, a
// terminal's Ctrl-C to its foreground job, a shell's SIGHUP to its jobs as it exits) does not
// reach it, nor does a terminal's hangup, which signals only the session's leader and its
// foreground group. Its input is /dev/null and its output the log, and it gives up the
// session's terminal as it starts (leaveTerminal). It does not lead a session of its own
// (setsid, as gopls's daemon does): on Linux a session is also a scheduling group (autogroup,
// kernel.sched_autogroup_enabled, on by default in most distributions' kernels), and in one
// apart from its clients, with its servers, every call crosses between two groups: the path
// spent about 9% more CPU a call with eight callers (BENCHMARKS.md, "Round sixteen").
func detached() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// leaveTerminal gives up the controlling terminal of the session the shared process runs in
// (that of a client started from a terminal), which a session of its own would not have had:
// no server of any session can then open that client's terminal (/dev/tty) to write to it, or
// be stopped by a read from it. TIOCNOTTY from a process that does not lead its session takes
// the terminal from that process alone (tty(4)); its servers, started after, have none.
func leaveTerminal() {
	if sid, err := unix.Getsid(0); err != nil || sid == os.Getpid() {
		return // a leader's TIOCNOTTY would hang up its session's foreground group: never started so
	}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR|syscall.O_NONBLOCK, 0) // no wait for a line
	if err != nil {
		return // it has none
	}
	defer tty.Close()
	_ = unix.IoctlSetInt(int(tty.Fd()), unix.TIOCNOTTY, 0)
}

// lockFile takes the lock of f (flock): one session starts the shared process at a time.
func lockFile(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }
