// Package catalogcache keeps what each server offered (its catalog: lists, capabilities,
// instructions) on disk, so that a server need not be started for the client to see what it
// offers (--lazy): one file per server identity in a directory of the program's own in the
// user's cache directory.
//
// The identity of a server is everything that decides what it says: its command, arguments,
// environment (the entry's env) and working directory, and the client it was started for (the
// initialize it is sent, or the envelope of its requests, which can change its tools). It is
// an HMAC-SHA256 under a random key kept beside the entries, so that no value of env, and no
// other secret of an entry, is in a file in the clear, nor can be guessed from a file's name.
//
// The directory is the user's alone (0700) and each file too (0600), written atomically (a
// temporary file renamed over the old one). An entry that cannot be read, is corrupt, was
// written by another version of the program, or is for another identity is not used; the
// caller says so once, and starts the server: the cache is never the reason a server is
// missing.
//
// The entries are named by HMAC under the key, so an entry written under another key can never
// be read again. A key file that is damaged (or was removed while entries stayed) is made
// again, and every entry removed with it: Open says so once (Cache.Warning), and the cache is
// empty, never left with orphans.
package catalogcache

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// format is the version of the file format; an entry of another is not used.
const format = 1

// Cache is a directory of catalogs.
type Cache struct {
	dir string
	key []byte // of the identities
	// warning is what Open found wrong with the key, and mended; "" when nothing.
	warning string
}

// Default is the directory of the program's cache in the user's cache directory.
func Default() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("the user's cache directory: %w", err)
	}
	return filepath.Join(base, "mcp-simple-aggregator", "catalogs"), nil
}

// Open opens the cache in dir, made (mode 0700) when missing. A directory that others may read
// or write is made private again: the entries are the user's. A key file that is damaged, or
// missing while entries are there, is made again and the entries are removed; Warning then says
// so, for the caller to say once.
func Open(dir string) (*Cache, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("the catalog cache %s: %w", dir, err)
	}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("the catalog cache %s: %w", dir, err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("the catalog cache %s is open to other users (mode %v) and cannot be made private: %w", dir, info.Mode().Perm(), err)
		}
	}
	c := &Cache{dir: dir}
	if c.key, err = c.loadKey(); err != nil {
		return nil, err
	}
	return c, nil
}

// Dir is the cache's directory.
func (c *Cache) Dir() string { return c.dir }

// Warning is what Open found wrong with the cache and mended: its key file was damaged (or
// missing while catalogs were cached under it), so it was made again and every cached catalog
// removed, since none could be read any more. It is "" when Open found nothing wrong. The
// cache works all the same (empty); the caller says it once, as a warning.
func (c *Cache) Warning() string { return c.warning }

const (
	// keyFile holds the key of the identities, keySize bytes.
	keyFile = "key"
	keySize = 32
)

// loadKey reads the key of the identities. When the key file is missing or damaged, a new key
// is made and the entries written under the old one are removed (they are named by HMAC under
// it: nothing could read them again), saying so in c.warning unless there was nothing to say
// (a first use, or a cache cleared).
//
// Other processes of the user may open the cache at the same time: a new key is made
// exclusively (a complete file linked into place, never replacing one), so that one key wins
// and every process uses it; a damaged file is moved aside before it is removed, and what was
// moved is put back when it is a key another process made meanwhile.
func (c *Cache) loadKey() ([]byte, error) {
	path := filepath.Join(c.dir, keyFile)
	damaged, removed := "", 0 // what this call found and did, for the warning
	for range 5 {
		key, damage := readKey(path)
		if key != nil {
			// After a try of this call's: the key another process made meanwhile. Each process
			// says what it found itself.
			c.warning = keyWarning(path, damaged, removed)
			return key, private(path)
		}
		if damage != "" {
			if damaged == "" {
				damaged = damage
			}
			mended, err := setAside(path)
			if err != nil {
				return nil, fmt.Errorf("the catalog cache %s: its key file %s is damaged (%s) and cannot be removed: %w", c.dir, path, damage, err)
			}
			if mended {
				continue // another process made the key meanwhile: it is back in place
			}
		}
		n, err := c.clearEntries()
		removed += n
		if err != nil {
			return nil, fmt.Errorf("the catalog cache %s: the catalogs cached under its old key cannot be removed: %w", c.dir, err)
		}
		key = make([]byte, keySize)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		switch err := createKey(path, key); {
		case errors.Is(err, fs.ErrExist):
			continue // another process made one first: it is the key
		case err != nil:
			return nil, fmt.Errorf("the catalog cache %s: %w", c.dir, err)
		}
		c.warning = keyWarning(path, damaged, removed)
		return key, nil
	}
	return nil, fmt.Errorf("the catalog cache %s: its key file %s keeps changing (other processes make it at the same time)", c.dir, path)
}

// readKey reads the key file at path: the key; or nil and why the file there is not one; or
// nil and "" when there is none.
func readKey(path string) (key []byte, damage string) {
	key, err := os.ReadFile(path)
	switch {
	case err == nil && len(key) == keySize:
		return key, ""
	case err == nil:
		return nil, fmt.Sprintf("it holds %d bytes, not %d", len(key), keySize)
	case errors.Is(err, fs.ErrNotExist):
		if _, lerr := os.Lstat(path); errors.Is(lerr, fs.ErrNotExist) {
			return nil, ""
		}
	}
	return nil, fmt.Sprintf("it cannot be read: %v", err)
}

// setAside removes the damaged key file at path: it is renamed first, and read again under
// its new name. A key that another process made in its place since it was read is put back
// (mended is true: the caller reads it again); anything else is removed.
func setAside(path string) (mended bool, err error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	aside := path + ".damaged-" + hex.EncodeToString(b[:])
	switch err := os.Rename(path, aside); {
	case errors.Is(err, fs.ErrNotExist):
		return true, nil // another process removed it: read again
	case err != nil:
		return false, err
	}
	if key, _ := readKey(aside); key != nil {
		_ = os.Link(aside, path) // fails only when yet another key is in place: that one is read
		return true, os.Remove(aside)
	}
	return false, os.RemoveAll(aside)
}

// keyWarning says that the key file at path was made again because it was damaged (damage says
// how) or missing, and how many catalogs cached under the old key were removed; "" for a
// missing key that had none (a first use, or a cache cleared).
func keyWarning(path, damage string, removed int) string {
	lost := "no catalog was cached under it"
	if removed > 0 {
		lost = fmt.Sprintf("the %d catalogs cached under the old key were removed, since none could be read any more: with --lazy, each of their servers starts with its next session once, and is cached again", removed)
	}
	switch {
	case damage != "":
		return fmt.Sprintf("the catalog cache's key file %s was damaged (%s): a new key was made, and %s", path, damage, lost)
	case removed > 0:
		return fmt.Sprintf("the catalog cache's key file %s was missing: a new key was made, and %s", path, lost)
	}
	return ""
}

// staleAfter is the age after which a temporary file of the cache's is a leftover of a process
// that ended in the middle of a write; a younger one may be another process's write under way.
const staleAfter = time.Minute

// clearEntries removes every entry of the cache's directory, and the temporary files that
// processes left when they ended in the middle of a write, and returns how many entries it
// removed. The key, and temporary files being written, stay.
func (c *Cache) clearEntries() (int, error) {
	files, err := os.ReadDir(c.dir)
	if err != nil {
		return 0, err
	}
	removed := 0
	for _, f := range files {
		entry := strings.HasSuffix(f.Name(), ".json")
		if f.Name() == keyFile || f.IsDir() {
			continue
		}
		if !entry {
			if info, err := f.Info(); err != nil || time.Since(info.ModTime()) < staleAfter {
				continue
			}
		}
		switch err := os.Remove(filepath.Join(c.dir, f.Name())); {
		case err == nil && entry:
			removed++
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return removed, err
		}
	}
	return removed, nil
}

// createKey writes key to path (mode 0600), failing with fs.ErrExist when there is a file
// there already: the key is written whole to a temporary file first, then linked into place,
// so that no process ever reads a part of it. Where the file system has no hard links, the
// temporary file is renamed into place instead (which replaces).
func createKey(path string, key []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-key-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := writeClose(tmp, key); err != nil {
		return err
	}
	err = os.Link(tmp.Name(), path)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrExist):
		return fs.ErrExist
	case errors.Is(err, fs.ErrNotExist):
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// private makes the file at path the user's alone (0600) when others may read or write it.
func private(path string) error {
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if err := os.Chmod(path, 0o600); err != nil {
		return fmt.Errorf("the catalog cache's key file %s is open to other users (mode %v) and cannot be made private: %w", path, info.Mode().Perm(), err)
	}
	return nil
}

// Server is what decides what a server says, for its identity.
type Server struct {
	Command string
	Args    []string
	Env     map[string]string
	// Dir is the working directory it runs in: its entry's, or the aggregator's own.
	Dir string
	// Client is the initialize it is sent (whose capabilities and clientInfo also make the
	// envelope of a modern server's requests).
	Client json.RawMessage
}

// Identity is a server's identity: the name of its entry in the cache. Its first half names
// the entry of the configuration (command, arguments, env, directory), the second the client.
type Identity string

// Identity is the identity of s.
func (c *Cache) Identity(s Server) Identity {
	entry := hmac.New(sha256.New, c.key)
	enc := json.NewEncoder(entry)
	_ = enc.Encode(s.Command)
	_ = enc.Encode(s.Args)
	keys := make([]string, 0, len(s.Env))
	for k := range s.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		_ = enc.Encode([2]string{k, s.Env[k]})
	}
	_ = enc.Encode(s.Dir)
	client := hmac.New(sha256.New, c.key)
	client.Write(s.Client)
	return Identity(hex.EncodeToString(entry.Sum(nil)[:16]) + "-" + hex.EncodeToString(client.Sum(nil)[:16]))
}

// Entry is the catalog of a server, as it last listed it. Definitions, capabilities and
// instructions are kept as the server wrote them, byte for byte.
type Entry struct {
	Identity Identity
	// Version is the version of the program that wrote it.
	Version string
	Written time.Time
	// Era is the protocol era the server spoke ("legacy" or "modern"), Protocol its version.
	Era, Protocol string
	// Name is its serverInfo.name; Instructions its instructions.
	Name, Instructions string
	// Caps are its capabilities, Tasks its tasks capability (nil when none).
	Caps  json.RawMessage
	Tasks json.RawMessage
	// Lists are its tools, prompts, resources and resource templates, by the field that holds
	// each in a list result ("tools", "prompts", "resources", "resourceTemplates").
	Lists map[string][]json.RawMessage
	// Hints are the cache hints of its lists (a modern server's), by the same fields.
	Hints map[string]Hint
}

// Hint is a list's ttlMs and cacheScope.
type Hint struct {
	TTLMs  int64 `json:"ttlMs"`
	Public bool  `json:"public"`
}

// file is an entry as written: raw values as strings, so that they come back byte for byte
// (encoding/json would compact them and escape <, > and &).
type file struct {
	Format       int                 `json:"format"`
	Identity     Identity            `json:"identity"`
	Version      string              `json:"version"`
	Written      time.Time           `json:"written"`
	Era          string              `json:"era"`
	Protocol     string              `json:"protocol"`
	Name         string              `json:"name"`
	Instructions string              `json:"instructions"`
	Caps         string              `json:"capabilities"`
	Tasks        string              `json:"tasks,omitempty"`
	Lists        map[string][]string `json:"lists"`
	Hints        map[string]Hint     `json:"hints,omitempty"`
}

// ErrMissing is the error of an identity with no entry: the server was never listed.
var ErrMissing = errors.New("no entry")

// Load reads the entry of id written by version. It fails with ErrMissing when there is none,
// and with an error saying why for one that cannot be used.
func (c *Cache) Load(id Identity, version string) (*Entry, error) {
	data, err := os.ReadFile(c.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrMissing
	}
	if err != nil {
		return nil, err
	}
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s is corrupt: %v", c.path(id), err)
	}
	switch {
	case f.Format != format:
		return nil, fmt.Errorf("%s is of format %d, and this program reads %d", c.path(id), f.Format, format)
	case f.Version != version:
		return nil, fmt.Errorf("%s was written by version %q, and this is %q", c.path(id), f.Version, version)
	case f.Identity != id:
		return nil, fmt.Errorf("%s is for another server", c.path(id))
	}
	e := &Entry{Identity: f.Identity, Version: f.Version, Written: f.Written, Era: f.Era, Protocol: f.Protocol, Name: f.Name,
		Instructions: f.Instructions, Caps: json.RawMessage(f.Caps), Lists: map[string][]json.RawMessage{}, Hints: f.Hints}
	if f.Tasks != "" {
		e.Tasks = json.RawMessage(f.Tasks)
	}
	if !json.Valid(e.Caps) || e.Tasks != nil && !json.Valid(e.Tasks) {
		return nil, fmt.Errorf("%s is corrupt: its capabilities are not JSON", c.path(id))
	}
	for field, defs := range f.Lists {
		for i, d := range defs {
			if !json.Valid([]byte(d)) {
				return nil, fmt.Errorf("%s is corrupt: %s #%d is not JSON", c.path(id), field, i+1)
			}
			e.Lists[field] = append(e.Lists[field], json.RawMessage(d))
		}
	}
	return e, nil
}

// Store writes e atomically (mode 0600).
func (c *Cache) Store(e *Entry) error {
	f := file{Format: format, Identity: e.Identity, Version: e.Version, Written: e.Written.UTC(), Era: e.Era, Protocol: e.Protocol,
		Name: e.Name, Instructions: e.Instructions, Caps: string(e.Caps), Tasks: string(e.Tasks), Lists: map[string][]string{}, Hints: e.Hints}
	for field, defs := range e.Lists {
		out := make([]string, len(defs))
		for i, d := range defs {
			out[i] = string(d)
		}
		f.Lists[field] = out
	}
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return writeAtomic(c.path(e.Identity), data)
}

// Of are the entries written for the configuration entry of s (whatever the client), newest
// first: what check reports.
func (c *Cache) Of(s Server) []*Entry {
	id := c.Identity(s)
	prefix, _, _ := strings.Cut(string(id), "-")
	paths, _ := filepath.Glob(filepath.Join(c.dir, prefix+"-*.json"))
	var out []*Entry
	for _, p := range paths {
		id := Identity(strings.TrimSuffix(filepath.Base(p), ".json"))
		var f file
		data, err := os.ReadFile(p)
		if err != nil || json.Unmarshal(data, &f) != nil || f.Identity != id {
			continue
		}
		out = append(out, &Entry{Identity: id, Version: f.Version, Written: f.Written, Era: f.Era, Protocol: f.Protocol, Name: f.Name})
	}
	slices.SortFunc(out, func(a, b *Entry) int { return b.Written.Compare(a.Written) })
	return out
}

// Clear removes every entry (and the key: the next identities are new).
func (c *Cache) Clear() error {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(c.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (c *Cache) path(id Identity) string { return filepath.Join(c.dir, string(id)+".json") }

// writeAtomic writes data to path (mode 0600) through a temporary file in its directory,
// renamed over it: a reader sees the old file or the new one, never a part.
func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename
	if err := writeClose(tmp, data); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// writeClose makes tmp the user's alone (0600), writes data to it, syncs and closes it.
func writeClose(tmp *os.File, data []byte) error {
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	return tmp.Close()
}
