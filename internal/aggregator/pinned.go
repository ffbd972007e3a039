package aggregator

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/trust"
)

// Pinned definitions (--pinned). The pin command starts the servers as check does and writes
// the lock file beside the configuration (trust.LockPath): per server key, the digests of each
// member of what its tools, prompts and resource templates tell the model, and of its
// instructions. Serving with --pinned, a definition that differs from the lock (changed, new,
// or under a name the lock does not have: a renamed tool is a new one) is withheld exactly as
// one that breaks the MCP schema is (withheld.go: one mechanism, two reasons): left out of the
// lists, named once on stderr and to the client, and its calls answered with what changed and
// how to accept it. A server without an entry has everything withheld; a definition that was
// pinned and is no longer listed is nothing to withhold. Resources are not pinned (they are a
// server's data, which changes as the user works); templates are.
//
// The lock is read at the start and again at every reload, and a change of the lock file
// reloads like one of the configuration (Files): pin run for a server while the aggregator
// serves makes what it accepted served at once.

// pins is the lock in force with --pinned: one per aggregator, shared by its servers
// (server.pins; nil without --pinned). lock and missing are guarded by roster.mu.
type pins struct {
	config string // the configuration file as given: for the commands the messages suggest
	path   string // the lock file beside it
	lock   *trust.Lock
	// missing: there is no lock file; lock is empty, and every definition is withheld.
	missing bool
	data    []byte // the file as last read: a reload that finds it the same changes nothing
}

// readPins reads the lock file of the configuration file with --pinned (it does nothing
// without). No lock file is no error: every definition is withheld, which is said once, with
// how to write one. A lock that cannot be read is: serving it unpinned would defeat the flag.
func (a *Aggregator) readPins(file string) error {
	if !a.opts.Pinned {
		return nil
	}
	p := &pins{config: file, path: trust.LockPath(file)}
	lock, data, err := readLock(p.path)
	if err != nil {
		return fmt.Errorf("--pinned: %w", err)
	}
	p.lock, p.missing, p.data = lock, data == nil, data
	if p.missing {
		a.log.Warn(p.noLock())
	}
	a.pins = p
	return nil
}

// readLock reads the lock file path: an empty lock (and nil data) when there is none.
func readLock(path string) (*trust.Lock, []byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return trust.NewLock(), nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("lock file: %w", err)
	}
	lock, err := trust.ReadLock(path)
	if errors.Is(err, fs.ErrNotExist) { // removed meanwhile
		return trust.NewLock(), nil, nil
	}
	return lock, data, err
}

// noLock says that there is no lock file, and what to do.
func (p *pins) noLock() string {
	return fmt.Sprintf("--pinned: there is no lock file %s, so every definition is withheld; to pin what the servers list now, run %s",
		p.path, pinCommand(p.config, ""))
}

// reloadPins reads the lock file again for a reload and, once the servers serve, publishes
// with it: what pin accepted meanwhile is served, and the client is told which lists changed.
// A lock that cannot be read leaves the one in force, with an error that says so.
func (a *Aggregator) reloadPins() {
	p := a.pins
	if p == nil {
		return
	}
	lock, data, err := readLock(p.path)
	if err != nil {
		a.report("error", fmt.Sprintf("reload: --pinned: %v; the lock read before stays in force", err))
		return
	}
	r := &a.roster
	r.mu.Lock()
	defer r.mu.Unlock()
	if bytes.Equal(data, p.data) && (data == nil) == p.missing {
		return
	}
	if data == nil && !p.missing {
		a.log.Warn(p.noLock())
	}
	p.lock, p.missing, p.data = lock, data == nil, data
	if a.catalog.Load() != nil {
		_ = a.publish() // withholding more, or less, cannot make names collide that did not
	}
}

// pinKey names a definition of a server as internal/trust does: its kind and its place in its
// list (the instructions: trust.Instructions, 0).
type pinKey struct {
	kind  trust.Kind
	index int
}

// unpinned are the definitions of s that --pinned withholds, by kind and place: those that
// differ from the lock in force (trust.Difference.Withheld). They are compared once per list
// read and lock (the first comparison makes the digests, about a millisecond per server), as
// the schema's verdicts are checked once per list read. nil without --pinned. Callers hold
// roster.mu or own s.
func (s *server) unpinned() map[pinKey]trust.Difference {
	if s.pins == nil {
		return nil
	}
	if lock := s.pins.lock; s.trust.lock != lock {
		s.trust.lock, s.trust.unpinned = lock, nil
		for _, d := range lock.Compare(s.trusted()) {
			if !d.Withheld() {
				continue
			}
			if s.trust.unpinned == nil {
				s.trust.unpinned = map[pinKey]trust.Difference{}
			}
			s.trust.unpinned[pinKey{d.Kind, d.Index}] = d
		}
	}
	return s.trust.unpinned
}

// pinCommand is the command that pins the server key of the configuration file config (every
// server when key is ""), quoted for a shell.
func pinCommand(config, key string) string {
	cmd := "mcp-simple-aggregator pin --config " + shellQuote(config)
	if key != "" {
		cmd += " --server " + shellQuote(key)
	}
	return cmd
}

// plainWord is what a POSIX shell takes as one word without quotes.
var plainWord = regexp.MustCompile(`^[A-Za-z0-9_./:@%+=,~-]+$`)

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if plainWord.MatchString(s) && !strings.HasPrefix(s, "~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
