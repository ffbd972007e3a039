package catalogcache

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// filled is a cache in a new directory with two entries, and a temporary file of a write that
// did not finish, two minutes ago.
func filled(t *testing.T) *Cache {
	t.Helper()
	c := open(t)
	if w := c.Warning(); w != "" {
		t.Errorf("a new cache warns: %s", w)
	}
	for _, s := range []Server{server, {Command: "other"}} {
		if err := c.Store(&Entry{Identity: c.Identity(s), Version: "1", Written: time.Now(), Caps: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	left := filepath.Join(c.Dir(), ".tmp-123")
	if err := os.WriteFile(left, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(left, time.Time{}, time.Now().Add(-2*staleAfter)); err != nil {
		t.Fatal(err)
	}
	return c
}

// names are the names of the files in dir, sorted.
func names(t *testing.T, dir string) []string {
	t.Helper()
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		out = append(out, f.Name())
	}
	return out
}

// private checks that the directory is 0700 and each file in it 0600.
func checkPrivate(t *testing.T, dir string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		return
	}
	if info, err := os.Stat(dir); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("the directory: %v, mode %v, want 0700", err, info.Mode().Perm())
	}
	files, _ := os.ReadDir(dir)
	for _, f := range files {
		info, err := f.Info()
		if err != nil || info.Mode().Perm() != 0o600 || !info.Mode().IsRegular() {
			t.Errorf("%s: %v, mode %v, want a file of mode 0600", f.Name(), err, info.Mode())
		}
	}
}

// A damaged key file costs one warning, saying what was wrong and what was lost: a new key,
// and every entry removed (none could be read under the new key: no orphan stays), the files
// the user's alone; the next Open finds nothing wrong and the same key.
func TestDamagedKey(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		damage     func(path string) error
	}{
		{"truncated", "it holds 16 bytes, not 32", func(path string) error {
			return os.Truncate(path, 16)
		}},
		{"empty", "it holds 0 bytes, not 32", func(path string) error {
			return os.Truncate(path, 0)
		}},
		{"too long", "it holds 65 bytes, not 32", func(path string) error {
			return os.WriteFile(path, []byte(strings.Repeat("k", 64)+"\n"), 0o600)
		}},
		{"a directory", "it cannot be read", func(path string) error {
			if err := os.Remove(path); err != nil {
				return err
			}
			if err := os.Mkdir(path, 0o700); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(path, "x"), nil, 0o600)
		}},
		{"a dangling link", "it cannot be read", func(path string) error {
			if runtime.GOOS == "windows" {
				return os.WriteFile(path, []byte("short"), 0o600)
			}
			if err := os.Remove(path); err != nil {
				return err
			}
			return os.Symlink(filepath.Join(filepath.Dir(path), "nowhere"), path)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := filled(t)
			old := c.Identity(server)
			path := filepath.Join(c.Dir(), keyFile)
			if err := tc.damage(path); err != nil {
				t.Fatal(err)
			}
			again, err := Open(c.Dir())
			if err != nil {
				t.Fatalf("Open with a damaged key: %v", err)
			}
			w := again.Warning()
			if !strings.Contains(w, "key file "+path+" was damaged ("+tc.want) || !strings.Contains(w, "the 2 catalogs cached under the old key were removed") {
				t.Errorf("warning: %q", w)
			}
			if got := names(t, c.Dir()); !slices.Equal(got, []string{keyFile}) {
				t.Errorf("left in the cache: %v, want only the new key", got)
			}
			checkPrivate(t, c.Dir())
			if again.Identity(server) == old {
				t.Errorf("the identity under the new key is the old one")
			}
			e := &Entry{Identity: again.Identity(server), Version: "1", Caps: json.RawMessage(`{}`)}
			if err := again.Store(e); err != nil {
				t.Fatal(err)
			}
			checkPrivate(t, c.Dir())
			third, err := Open(c.Dir())
			if err != nil || third.Warning() != "" || third.Identity(server) != e.Identity {
				t.Fatalf("the Open after: %v, warning %q, identity kept %v", err, third.Warning(), third.Identity(server) == e.Identity)
			}
			if _, err := third.Load(e.Identity, "1"); err != nil {
				t.Errorf("the entry written under the new key: %v", err)
			}
		})
	}
}

// A key file that was removed while entries stayed is made again, and the entries written under
// the old key are removed, with a warning; a first use, and a cache cleared, have nothing to
// say.
func TestMissingKey(t *testing.T) {
	c := filled(t)
	path := filepath.Join(c.Dir(), keyFile)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	again, err := Open(c.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if w := again.Warning(); !strings.Contains(w, "key file "+path+" was missing") || !strings.Contains(w, "the 2 catalogs cached under the old key were removed") {
		t.Errorf("warning: %q", w)
	}
	if got := names(t, c.Dir()); !slices.Equal(got, []string{keyFile}) {
		t.Errorf("left in the cache: %v, want only the new key", got)
	}
	checkPrivate(t, c.Dir())

	if err := again.Clear(); err != nil {
		t.Fatal(err)
	}
	if cleared, err := Open(c.Dir()); err != nil || cleared.Warning() != "" {
		t.Errorf("the Open after a clear: %v, warning %q", err, cleared.Warning())
	}
}

// A key file others may read is made the user's alone, and kept.
func TestKeyMadePrivate(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	c := filled(t)
	path := filepath.Join(c.Dir(), keyFile)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := Open(c.Dir())
	if err != nil || again.Warning() != "" || again.Identity(server) != c.Identity(server) {
		t.Fatalf("Open: %v, warning %q", err, again.Warning())
	}
	os.Remove(filepath.Join(c.Dir(), ".tmp-123"))
	checkPrivate(t, c.Dir())
}

// Two processes that open a cache with a damaged key at once end with the same key: one makes
// it, the other uses it.
func TestDamagedKeyRace(t *testing.T) {
	for range 20 {
		c := filled(t)
		if err := os.Truncate(filepath.Join(c.Dir(), keyFile), 3); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var ids [2]Identity
		var warnings [2]string
		for i := range ids {
			wg.Go(func() {
				o, err := Open(c.Dir())
				if err != nil {
					t.Error(err)
					return
				}
				ids[i], warnings[i] = o.Identity(server), o.Warning()
			})
		}
		wg.Wait()
		if ids[0] != ids[1] {
			t.Fatalf("two keys: warnings %q", warnings)
		}
		if warnings[0] == "" && warnings[1] == "" {
			t.Fatalf("no warning")
		}
		final, err := Open(c.Dir())
		if err != nil || final.Identity(server) != ids[0] {
			t.Fatalf("the key on disk is not the one both use: %v", err)
		}
		if got := names(t, c.Dir()); !slices.Equal(got, []string{keyFile}) {
			t.Fatalf("left in the cache: %v", got)
		}
	}
}
