package trust

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Lock is the lock file: per server key, the digests of the definitions the user approved by
// running pin. It holds nothing of the configuration but its keys, and nothing of the
// definitions but digests: no command, argument, env value or description.
//
// The file is JSON, indented, with every object's members sorted, one digest a line: a
// change of a server's definitions is a change of the lines of the members that changed,
// which a diff of the file (or a review of its commit) shows, and anyone can read it with
// jq. It names the definitions (tools, prompts, resource templates by their names and URI
// templates) so that a diff says which ones changed.
//
// A Lock is not safe for concurrent use: pin builds one, check and serving only compare.
type Lock struct {
	servers map[string]*serverLock
}

// lockVersion is the version of the file's format; a file of another version is refused
// rather than misread.
const lockVersion = 1

// lockAbout is written at the top of every lock file, for whoever opens it.
const lockAbout = "Written by mcp-simple-aggregator pin: SHA-256 digests of the canonical JSON (RFC 8785) of each member of " +
	"what each server's tools, prompts, resource templates and instructions tell the model. Serving with --pinned withholds what " +
	"differs; check shows each difference. It holds no command, argument or env value of the configuration."

// lockFile is the file's JSON.
type lockFile struct {
	About   string                 `json:"about"`
	Version int                    `json:"lockVersion"`
	Servers map[string]*serverLock `json:"servers"`
}

// serverLock is one server's entry.
type serverLock struct {
	// Instructions is the digest of the instructions; "" when it had none.
	Instructions      string         `json:"instructions,omitempty"`
	Tools             map[string]pin `json:"tools,omitempty"`
	Prompts           map[string]pin `json:"prompts,omitempty"`
	ResourceTemplates map[string]pin `json:"resourceTemplates,omitempty"`
}

// pin is one definition's members (see members), by JSON Pointer, each with its digest.
type pin map[string]string

// pinned are the kinds the lock holds. Resources are not among them: a server's resources
// are often its data (the files of a directory, the rows of a table), which change as the
// user works; a template's definition is fixed like a tool's.
var pinned = []Kind{Tool, Prompt, ResourceTemplate}

// of is the lock's map of kind k (nil for kinds it does not hold).
func (e *serverLock) of(k Kind) map[string]pin {
	switch k {
	case Tool:
		return e.Tools
	case Prompt:
		return e.Prompts
	case ResourceTemplate:
		return e.ResourceTemplates
	}
	return nil
}

func (e *serverLock) set(k Kind, m map[string]pin) {
	switch k {
	case Tool:
		e.Tools = m
	case Prompt:
		e.Prompts = m
	case ResourceTemplate:
		e.ResourceTemplates = m
	}
}

// NewLock is an empty lock.
func NewLock() *Lock { return &Lock{servers: map[string]*serverLock{}} }

// Set pins what s lists now, in place of its server's former entry: pin, for one server or
// for each. Every definition s lists is pinned, also those that a tool filter hides, so that
// showing one later needs no new pin. A definition without a name cannot be pinned (nor
// served); of two with the same name, the first is pinned and the other differs from it.
func (l *Lock) Set(s *Server) {
	e := &serverLock{}
	for _, k := range pinned {
		m := map[string]pin{}
		for _, d := range s.defs {
			if d.kind != k {
				continue
			}
			dec := d.read()
			if dec.nameless {
				continue
			}
			if _, dup := m[dec.name]; !dup {
				m[dec.name] = d.pins()
			}
		}
		if len(m) > 0 {
			e.set(k, m)
		}
	}
	for _, d := range s.defs {
		if d.kind == Instructions {
			e.Instructions = d.pins()[""]
		}
	}
	l.servers[s.key] = e
}

// Delete removes the entry of the server key (a server no longer in the configuration).
func (l *Lock) Delete(key string) { delete(l.servers, key) }

// Has reports whether the lock has an entry for the server key.
func (l *Lock) Has(key string) bool { return l.servers[key] != nil }

// Keys are the servers the lock has entries for, sorted.
func (l *Lock) Keys() []string { return slices.Sorted(maps.Keys(l.servers)) }

// LockPath is the lock file of the configuration file config, beside it: its name with
// ".lock.json" in place of ".json" (mcp.json: mcp.lock.json; .mcp.json: .mcp.lock.json;
// claude_desktop_config.json: claude_desktop_config.lock.json), or after the whole name when
// it does not end in ".json". It is the path as given: a symlinked configuration gets its lock
// beside the link.
func LockPath(config string) string {
	dir, name := filepath.Split(config)
	if base, ok := strings.CutSuffix(name, ".json"); ok && base != "" {
		name = base
	}
	return filepath.Join(dir, name+".lock.json")
}

// LockPerm is the mode for a new lock file beside config: the configuration's own, but never
// writable by others nor executable (so at most 0644). The lock holds no secret, and is meant
// to be read, diffed and committed beside its configuration; but it names the servers and
// their tools, and a user who keeps the configuration private (0600, since its env values
// may be tokens) expects the same of what is written beside it. 0644 when config cannot be
// read.
func LockPerm(config string) fs.FileMode {
	info, err := os.Stat(config)
	if err != nil {
		return 0o644
	}
	return info.Mode().Perm() & 0o644
}

// ReadLock reads the lock file path. A missing file is an error that wraps fs.ErrNotExist:
// check then has nothing to compare, and serving with --pinned has nothing pinned.
func ReadLock(path string) (*Lock, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("lock file: %w", err)
	}
	// The version first, so that a lock of another version is named as such rather than by
	// the first member this version does not know.
	var v struct {
		Version int `json:"lockVersion"`
	}
	if err := json.Unmarshal(data, &v); err == nil && v.Version != lockVersion {
		return nil, fmt.Errorf("lock file %s: lockVersion is %d, and this mcp-simple-aggregator reads version %d; run pin to write it anew", path, v.Version, lockVersion)
	}
	var f lockFile
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return nil, fmt.Errorf("lock file %s: %w; run pin to write it anew", path, err)
	}
	l := NewLock()
	for key, e := range f.Servers {
		if e == nil {
			return nil, fmt.Errorf("lock file %s: /servers/%s: null is not an entry; run pin to write it anew", path, escapeToken(key))
		}
		l.servers[key] = e
	}
	return l, nil
}

// WriteLock writes l to path atomically: into a new file beside it, renamed over it, so
// that a reader (a server starting with --pinned) sees the old lock or the new one, never
// part of one. An existing lock keeps its mode (and a symlinked one is written where the
// link points); a new one gets perm (see LockPerm).
func WriteLock(path string, l *Lock, perm fs.FileMode) error {
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	if info, err := os.Stat(path); err == nil {
		perm = info.Mode().Perm()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("lock file: %w", err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	servers := l.servers
	if servers == nil {
		servers = map[string]*serverLock{}
	}
	if err := enc.Encode(lockFile{About: lockAbout, Version: lockVersion, Servers: servers}); err != nil {
		return fmt.Errorf("lock file %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("lock file: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing there
	err = tmp.Chmod(perm)
	if err == nil {
		_, err = tmp.Write(b.Bytes())
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("lock file %s: %w", path, err)
	}
	return nil
}
