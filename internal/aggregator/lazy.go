package aggregator

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/catalogcache"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
)

// Servers by use. With --lazy (Options.Lazy) a server whose catalog the cache holds from an
// earlier run (internal/catalogcache) is not started with the session: its slot is dormant,
// listed from the cache, byte for byte what the server last listed, and the client's
// initialize (or server/discover), and its lists, are answered at once. The first request that
// needs the server (a call, prompts/get, resources/read, a subscription, a completion, a task
// of its) starts it (hold and wake): that request waits for it, up to --startup-timeout, and
// requests for other servers never wait. A server with no entry (the first run, a changed
// entry) starts with the session, and its catalog is written to the cache. When a server
// started on first use lists something else than its cache, the catalog follows and the client
// is told (publish), as after a restart; a call for a tool it no longer lists says so. A crash
// makes it dormant again: its next request starts it, and --max-restarts bounds failures in a
// row (fallLocked).
//
// With --idle-stop D (Options.IdleStop), with or without --lazy, a server that has had no
// request of the client's for D, and has nothing in flight, no resource subscription of the
// client's and no task, is stopped the way shutdown stops servers, and is dormant: its entries
// stay listed from its last lists, and its next request starts it again. A stateful server (a
// browser, an in-memory store) loses its state so: the README and check say it.

// identity is the cache's identity of the entry cfg for the client params (the servers'
// initialize, whose capabilities and clientInfo also make a modern server's envelope).
func (a *Aggregator) identity(cfg config.Server, params []byte) catalogcache.Identity {
	return a.opts.Cache.Identity(catalogcache.Server{Command: cfg.Command, Args: cfg.Args, Env: cfg.Env, Dir: a.dirOf(cfg), Client: params})
}

// dirOf is the working directory the server of cfg runs in: its entry's, or the session's
// (a server that reads its directory serves another one elsewhere).
func (a *Aggregator) dirOf(cfg config.Server) string {
	if cfg.Dir != "" {
		return cfg.Dir
	}
	if a.opts.Dir != "" {
		return a.opts.Dir
	}
	dir, _ := os.Getwd()
	return dir
}

// deferOrSpawn makes the slots that have no process yet (--lazy, --share: before the session)
// dormant when the cache holds their catalog for the client params, and spawns the others,
// whose handshakes follow (initAll). An entry that cannot be used costs one warning, and its server starts.
// Callers hold roster.mu.
func (a *Aggregator) deferOrSpawn(params []byte) {
	for _, sl := range a.roster.sorted() {
		if sl.state != dormant || sl.listed != nil {
			continue
		}
		if a.opts.Cache != nil {
			if s := a.fromCache(sl.cfg, params); s != nil {
				sl.listed, sl.cached = s, s.cachedAt
				a.log.Debug("not started: its catalog is in the cache", "server", sl.key, "written", s.cachedAt.Format(time.RFC3339))
				continue
			}
		}
		res := startResult{cfg: sl.cfg}
		res.srv, res.err = a.spawn(sl.cfg, params)
		*sl = *newSlot(res)
	}
}

// fromCache is the catalog the cache holds for the entry cfg and the client params, as a
// server that is not running (nil when it holds none that can be used).
func (a *Aggregator) fromCache(cfg config.Server, params []byte) *server {
	e, err := a.opts.Cache.Load(a.identity(cfg, params), a.opts.Version)
	if err != nil {
		if !errors.Is(err, catalogcache.ErrMissing) {
			a.log.Warn(fmt.Sprintf("server %q: its cached catalog is not used, and it is started: %v", cfg.Key, err))
		}
		return nil
	}
	s := &server{key: cfg.Key, command: cfg.Command, cfg: cfg, filter: cfg.Tools, pins: a.pins, listed: make(chan struct{}), readDone: make(chan struct{}),
		retired: make(chan struct{}), stopped: make(chan struct{}), log: a.log.With("server", cfg.Key),
		protocol: e.Protocol, name: e.Name, instructions: e.Instructions, tasks: e.Tasks, cachedAt: e.Written}
	s.gate = gateClosed // not running: a call for it is held, and starts it
	close(s.listed)
	close(s.retired)
	close(s.stopped)
	if json.Unmarshal(e.Caps, &s.caps) != nil || s.caps == nil {
		s.caps = map[string]json.RawMessage{}
	}
	if e.Era == era.Modern.String() {
		s.setSide(&modernServer{a: a})
	} else {
		s.setSide(legacyServer{a})
	}
	for k := range numKinds {
		s.lists[k] = e.Lists[kinds[k].field]
		h := e.Hints[kinds[k].field]
		s.hints[k] = era.CacheHint{TTLMs: h.TTLMs, Public: h.Public}
	}
	return s
}

// remember writes the catalog of s, which serves, to the cache (with --lazy), in the
// background: a write that fails is a warning, and the server serves all the same. Callers
// hold roster.mu (the lists are copied under it).
func (a *Aggregator) remember(s *server) {
	if a.opts.Cache == nil || s.proc == nil {
		return
	}
	e := &catalogcache.Entry{Identity: a.identity(s.cfg, a.roster.params), Version: a.opts.Version, Written: time.Now(),
		Era: s.side().era().String(), Protocol: s.protocol, Name: s.name, Instructions: s.instructions, Tasks: s.tasks,
		Caps: marshal(s.caps), Lists: map[string][]json.RawMessage{}, Hints: map[string]catalogcache.Hint{}}
	for k := range numKinds {
		e.Lists[kinds[k].field] = s.lists[k]
		e.Hints[kinds[k].field] = catalogcache.Hint{TTLMs: s.hints[k].TTLMs, Public: s.hints[k].Public}
	}
	a.writes.Add(1)
	go func() {
		defer a.writes.Done()
		if err := a.opts.Cache.Store(e); err != nil {
			s.log.Warn("its catalog could not be written to the cache: " + err.Error())
		}
	}()
}

// wake starts a dormant slot for a request that needs it (hold): a start on first use, like a
// restart's try (restart.go), whose calls are held until it serves. Callers hold roster.mu.
func (a *Aggregator) wake(sl *slot) {
	gen, ok := a.claim(sl)
	if !ok {
		return
	}
	why := "a request needs it"
	if !sl.cached.IsZero() {
		why += fmt.Sprintf(" (its catalog came from the cache, written %v ago)", time.Since(sl.cached).Round(time.Second))
	}
	a.move(sl, starting, why)
	sl.expectBack()
	cfg, params, prev := sl.cfg, a.roster.params, sl.prev
	go func() {
		defer a.starts.Done()
		if prev != nil {
			<-prev.stopped // never two processes of a key at once
		}
		a.log.Debug("starting on first use", "server", sl.key)
		res := a.start(sl, gen, cfg, params)
		if res.err != nil && !errors.Is(res.err, errReplaced) && !errors.Is(res.err, errShuttingDown) {
			a.report("error", fmt.Sprintf("server %q could not be started for a request: %v", sl.key, res.err))
		}
	}()
}

// idleLoop stops the servers that are idle (--idle-stop), looking a few times per period.
func (a *Aggregator) idleLoop() {
	every := max(a.opts.IdleStop/4, 10*time.Millisecond)
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-a.closingCtx.Done():
			return
		case <-ticker.C:
		}
		a.roster.mu.Lock()
		var idle []*slot
		for _, sl := range a.roster.sorted() {
			if sl.state == serving && time.Since(time.Unix(0, sl.proc.lastUse.Load())) >= a.opts.IdleStop {
				idle = append(idle, sl)
			}
		}
		a.roster.mu.Unlock()
		for _, sl := range idle {
			a.idleStop(sl)
		}
	}
}

// idleStop stops the process of a slot that had no request of the client's for --idle-stop,
// unless it has something in flight, a resource subscription of the client's or a task under
// way: the slot is dormant, listed from the process's lists, and its next request starts it.
func (a *Aggregator) idleStop(sl *slot) {
	r := &a.roster
	r.mu.Lock()
	s := sl.proc
	switch {
	case r.closed || sl.state != serving || time.Since(time.Unix(0, s.lastUse.Load())) < a.opts.IdleStop:
		r.mu.Unlock()
		return
	case a.setup.holds(s.key):
		r.mu.Unlock()
		return // the client's subscriptions are the server's to keep
	case !a.inflight.closeIfIdle(s):
		r.mu.Unlock()
		return // in flight, or a task of its under way
	}
	why := fmt.Sprintf("was stopped after %v without a request (--idle-stop); its next request starts it again", a.opts.IdleStop)
	a.move(sl, dormant, why)
	sl.proc, sl.prev = nil, s
	r.mu.Unlock()
	a.log.Debug("stopped when idle", "server", sl.key, "pid", s.proc.PID(), "idle", a.opts.IdleStop)
	a.retire(s, "was stopped when idle (--idle-stop)", "")
}
