//go:build unix

package shared

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The place of the shared process: a directory of the user's alone, made so when it is not,
// and refused when it cannot be.

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return info.Mode()
}

func TestPrivate(t *testing.T) {
	t.Run("made", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "place")
		if err := private(dir); err != nil {
			t.Fatal(err)
		}
		if m := mode(t, dir); !m.IsDir() || m.Perm() != 0o700 {
			t.Errorf("made with mode %v, want a directory of mode 0700", m)
		}
		if err := private(dir); err != nil { // and again: it is checked on every use
			t.Errorf("the second use: %v", err)
		}
	})
	t.Run("looser", func(t *testing.T) {
		for _, perm := range []os.FileMode{0o755, 0o777, 0o710, 0o701, 0o500} {
			dir := filepath.Join(t.TempDir(), "place")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, perm); err != nil {
				t.Fatal(err)
			}
			if err := private(dir); err != nil {
				t.Errorf("mode %v: %v", perm, err)
			}
			if m := mode(t, dir); m.Perm() != 0o700 {
				t.Errorf("mode %v was left %v, want 0700", perm, m.Perm())
			}
		}
	})
	refused := map[string]func(t *testing.T, path string){
		"a link to a private directory": func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "target")
			if err := os.Mkdir(target, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		},
		"a dangling link": func(t *testing.T, path string) {
			if err := os.Symlink(filepath.Join(t.TempDir(), "nothing"), path); err != nil {
				t.Fatal(err)
			}
		},
		"a file": func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, make := range refused {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "place")
			make(t, path)
			err := private(path)
			if err == nil || !strings.Contains(err.Error(), path+" is not a directory (a link, or a file): remove it") {
				t.Errorf("private: %v; want the place refused as not a directory", err)
			}
			if m := mode(t, path); m.IsDir() {
				t.Errorf("the place was replaced: %v", m)
			}
		})
	}
	t.Run("another user's", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("only root can give a directory to another user")
		}
		dir := filepath.Join(t.TempDir(), "place")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		if err := private(dir); err == nil || !strings.Contains(err.Error(), dir+" belongs to another user") {
			t.Errorf("private: %v; want the directory refused as another user's", err)
		}
	})
	t.Run("no parent", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "missing", "place")
		if err := private(dir); err == nil || !strings.Contains(err.Error(), "the shared process's directory "+dir) {
			t.Errorf("private: %v; want the directory named", err)
		}
	})
}

// dirOfLength makes a directory whose path is n bytes long, under the temporary directory
// when it is short enough, else under /tmp, and removes it at the end of the test.
func dirOfLength(t *testing.T, n int) string {
	t.Helper()
	parent := os.TempDir()
	if len(parent) > n-12 {
		parent = "/tmp"
	}
	dir, err := os.MkdirTemp(parent, "p")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if len(dir) > n-2 {
		t.Fatalf("%s is already longer than %d bytes", dir, n-2)
	}
	dir += "/" + strings.Repeat("x", n-len(dir)-1)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// aBuild is a build of the test's own, so that a place it shares with the user's (the short
// one, in /tmp) holds no other socket of its name.
func aBuild(t *testing.T) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// works checks that p is a place where the shared process can listen: a private directory, and
// a socket path a Unix socket takes.
func works(t *testing.T, p place) {
	t.Helper()
	if len(p.socket) > maxSocket {
		t.Errorf("the socket path %s is %d bytes, more than %d", p.socket, len(p.socket), maxSocket)
	}
	if m := mode(t, p.dir); !m.IsDir() || m.Perm() != 0o700 {
		t.Errorf("the place %s has mode %v, want a directory of mode 0700", p.dir, m)
	}
	ln, err := net.Listen("unix", p.socket)
	if err != nil {
		t.Fatalf("listening on %s: %v", p.socket, err)
	}
	ln.Close() // and the socket with it
}

func TestLocate(t *testing.T) {
	uid := fmt.Sprintf("mcp-simple-aggregator-%d", os.Getuid())
	short := filepath.Join(shortBase, uid)
	t.Run("XDG_RUNTIME_DIR", func(t *testing.T) {
		base := dirOfLength(t, 30)
		t.Setenv("XDG_RUNTIME_DIR", base)
		p, err := locate("0123456789abcdef")
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(base, "mcp-simple-aggregator")
		want := place{dir: dir, socket: dir + "/shared-0123456789abcdef.sock", lock: dir + "/shared-0123456789abcdef.lock", log: dir + "/shared-0123456789abcdef.log"}
		if p != want {
			t.Errorf("locate: %+v, want %+v", p, want)
		}
		works(t, p)
	})
	t.Run("TMPDIR", func(t *testing.T) {
		base := dirOfLength(t, 30)
		t.Setenv("XDG_RUNTIME_DIR", "")
		t.Setenv("TMPDIR", base)
		p, err := locate("0123456789abcdef")
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(base, uid); p.dir != want {
			t.Errorf("the place is %s, want %s", p.dir, want)
		}
		works(t, p)
	})
	// A long TMPDIR (macOS's is about 48 characters) and no XDG_RUNTIME_DIR: the place is the
	// short one, as private.
	for _, n := range []int{48, 60} {
		t.Run(fmt.Sprintf("TMPDIR of %d characters", n), func(t *testing.T) {
			tmp := dirOfLength(t, n-1) + "/" // n characters, as macOS spells it
			t.Setenv("XDG_RUNTIME_DIR", "")
			os.Unsetenv("XDG_RUNTIME_DIR")
			t.Setenv("TMPDIR", tmp)
			build := aBuild(t)
			want := short
			if natural := at(filepath.Join(tmp, uid), build); len(natural.socket) <= maxSocket {
				want = natural.dir // a short uid (root's) leaves room at 48
			}
			p, err := locate(build)
			if err != nil {
				t.Fatal(err)
			}
			if p.dir != want || filepath.Base(p.socket) != "shared-"+build+".sock" {
				t.Errorf("the place is %+v, want the socket shared-%s.sock in %s", p, build, want)
			}
			works(t, p)
			if another := aBuild(t); func() bool { q, _ := locate(another); return q.socket == p.socket }() {
				t.Errorf("two builds have one socket %s", p.socket)
			}
		})
	}
	t.Run("XDG_RUNTIME_DIR too long", func(t *testing.T) {
		base := dirOfLength(t, 80)
		t.Setenv("XDG_RUNTIME_DIR", base)
		build := aBuild(t)
		p, err := locate(build)
		if err != nil {
			t.Fatal(err)
		}
		if p.dir != short {
			t.Errorf("the place is %s, want %s", p.dir, short)
		}
		works(t, p)
		if _, err := os.Stat(filepath.Join(base, "mcp-simple-aggregator")); err == nil {
			t.Errorf("the place too long was made too")
		}
	})
	t.Run("refused", func(t *testing.T) {
		base := dirOfLength(t, 30)
		t.Setenv("XDG_RUNTIME_DIR", base)
		if err := os.Symlink(t.TempDir(), filepath.Join(base, "mcp-simple-aggregator")); err != nil {
			t.Fatal(err)
		}
		if _, err := locate("0123456789abcdef"); err == nil || !strings.Contains(err.Error(), "is not a directory") {
			t.Errorf("locate: %v; want the link refused", err)
		}
	})
	// The short place is not the user's: it is refused, saying why, and what to do.
	t.Run("short place refused", func(t *testing.T) {
		base := dirOfLength(t, 30)
		old := shortBase
		shortBase = base
		t.Cleanup(func() { shortBase = old })
		if err := os.Symlink(t.TempDir(), filepath.Join(base, uid)); err != nil {
			t.Fatal(err)
		}
		t.Setenv("XDG_RUNTIME_DIR", dirOfLength(t, 80))
		_, err := locate("0123456789abcdef")
		if err == nil || !strings.Contains(err.Error(), "is too long for a Unix socket (at most 100 bytes), and the shorter place cannot be used: the shared process's directory "+filepath.Join(base, uid)+" is not a directory (a link, or a file): remove it; set XDG_RUNTIME_DIR or TMPDIR to a shorter directory") {
			t.Errorf("locate: %v; want the short place refused, and what to set", err)
		}
	})
	t.Run("too long", func(t *testing.T) {
		base := dirOfLength(t, 90)
		old := shortBase
		shortBase = base
		t.Cleanup(func() { shortBase = old })
		t.Setenv("XDG_RUNTIME_DIR", base)
		_, err := locate("0123456789abcdef")
		if err == nil || !strings.Contains(err.Error(), "are too long for a Unix socket (at most 100 bytes); set XDG_RUNTIME_DIR or TMPDIR to a shorter directory") {
			t.Errorf("locate in %s: %v; want the path too long, and what to set", base, err)
		}
	})
}

// Another build is another shared process: its version or its executable differ.
func TestBuild(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "program")
	if err := os.WriteFile(exe, []byte("one"), 0o700); err != nil {
		t.Fatal(err)
	}
	a := build(exe, "v1.0.0")
	if len(a) != 16 || build(exe, "v1.0.0") != a {
		t.Fatalf("build %q is not 16 hex digits, or not stable", a)
	}
	if build(exe, "v1.0.1") == a || build(exe+"2", "v1.0.0") == a {
		t.Error("another version or executable is the same build")
	}
	if err := os.WriteFile(exe, []byte("a rebuilt one"), 0o700); err != nil { // another size
		t.Fatal(err)
	}
	if build(exe, "v1.0.0") == a {
		t.Error("a rebuilt executable is the same build")
	}
}
