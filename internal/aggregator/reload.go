package aggregator

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
)

// A reload (the configuration file saved, or SIGHUP) applies the new file per server key,
// without losing what is in flight:
//
//	added                       started
//	removed, or now disabled    drained and stopped
//	changed (command, args,     drained and stopped, then started again: the old and the new
//	env, envFile, cwd)          process never run at once (servers hold locks and ports);
//	                            calls that arrive meanwhile wait for the new one
//	down, or waiting to restart started again at once: a reload is how a server that failed
//	                            or was given up comes back
//	only its filters changed    its list is filtered anew, the process is untouched
//	unchanged and running       untouched
//
// Draining: the server gets no new calls (decided under the in-flight table's lock, so that no
// call slips in); what it has in flight (calls to it, its requests to the client) is given
// drainTime to end, then fails with an error saying why; then it stops. Each key is published
// (its new server in the catalog, its waiting calls released) as soon as it is done, not when
// the whole reload is. While a reload runs, list changes and crashes of other servers leave the
// catalog to it. The client is told once per list that changed, after the reload has settled.

// drainTime is how long a server to be stopped by a reload is given to answer what it has in
// flight.
const drainTime = 5 * time.Second

// Files are the files a reload depends on: the configuration file (as given, not the target of
// a link: the watcher follows links itself, and sees one re-pointed), the "envFile" of each
// server, and with --pinned the lock file (pinned.go), as absolute paths.
func (a *Aggregator) Files() []string {
	a.roster.mu.Lock()
	cfg := a.roster.cfg
	a.roster.mu.Unlock()
	file, err := filepath.Abs(cfg.File)
	if err != nil {
		file = cfg.File
	}
	files := []string{file}
	for _, sc := range cfg.Servers {
		if sc.EnvFile != "" && !slices.Contains(files, sc.EnvFile) {
			files = append(files, sc.EnvFile)
		}
	}
	if a.pins != nil {
		if lock, err := filepath.Abs(a.pins.path); err == nil {
			files = append(files, lock)
		}
	}
	return files
}

// Reload reads the configuration file again and applies the difference; it returns once the
// reload has settled. Concurrent calls are serialised. A reload never ends the aggregator: a
// file that cannot be used changes nothing, and its problems, like a server that fails to
// start, are reported on the log and to the client. After Close it does nothing.
func (a *Aggregator) Reload() {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	if a.closing.Load() {
		return
	}
	a.reloadPins() // pinned.go
	a.roster.mu.Lock()
	file := a.roster.cfg.File
	a.roster.mu.Unlock()
	cfg, warnings, err := config.Load(file, a.lookupEnv)
	for _, w := range warnings {
		a.log.Warn(w.String())
	}
	if err != nil {
		a.report("error", fmt.Sprintf("reload: %v\nthe servers keep running as they were", err))
		return
	}
	a.roster.mu.Lock()
	started := a.roster.started
	current := map[string]slotView{}
	for key, sl := range a.roster.slots {
		current[key] = slotView{cfg: sl.cfg, state: sl.state}
	}
	a.roster.mu.Unlock()
	actions := plan(current, cfg.Servers)
	if !started {
		a.applyBeforeClient(cfg, actions)
	} else {
		a.apply(cfg, actions)
	}
	counts := map[action]int{}
	for key, act := range actions {
		counts[act]++
		a.log.Debug("reload", "server", key, "action", act.String())
	}
	a.log.Info(fmt.Sprintf("reload: %d added, %d removed, %d restarted, %d refiltered, %d unchanged",
		counts[add], counts[remove], counts[restart], counts[refilter], counts[keep]))
}

// action is what a reload does to one server key.
type action int

const (
	keep action = iota
	add
	remove
	restart
	refilter
)

var actionNames = [...]string{keep: "keep", add: "add", remove: "remove", restart: "restart", refilter: "refilter"}

func (act action) String() string { return actionNames[act] }

// slotView is what a reload's plan needs of a slot of the roster.
type slotView struct {
	cfg   config.Server
	state state
}

// plan is what a reload does to each key, from the roster (each key's entry and state) and the
// new file's entries: a key that is new is added, one that is gone removed; one whose process
// would differ (command, args, env, envFile, cwd), or that is down or waiting to restart, is
// restarted; one whose filters or "alwaysLoad" alone changed is refiltered (its process
// stays); the rest are kept.
func plan(current map[string]slotView, next []config.Server) map[string]action {
	actions := map[string]action{}
	for _, sc := range next {
		cur, ok := current[sc.Key]
		switch {
		case !ok:
			actions[sc.Key] = add
		case cur.state == down || cur.state == waiting || !sameProcess(cur.cfg, sc):
			actions[sc.Key] = restart
		case !cur.cfg.Tools.Equal(sc.Tools) || cur.cfg.AlwaysLoad != sc.AlwaysLoad:
			actions[sc.Key] = refilter
		default:
			actions[sc.Key] = keep
		}
	}
	for key := range current {
		if _, ok := actions[key]; !ok {
			actions[key] = remove
		}
	}
	return actions
}

// sameProcess reports whether two entries start the same process: the same command,
// arguments, environment (envFile's values included) and working directory.
func sameProcess(x, y config.Server) bool {
	return x.Command == y.Command && slices.Equal(x.Args, y.Args) && maps.Equal(x.Env, y.Env) && x.Dir == y.Dir && x.EnvFile == y.EnvFile
}

// applyBeforeClient applies a reload before the client's initialize: the servers have no
// handshake yet and nothing in flight, so what changes is stopped, and then started again (the
// old and the new process of a key never run at once). Callers hold reloadMu.
func (a *Aggregator) applyBeforeClient(cfg *config.Config, actions map[string]action) {
	entries := entriesOf(cfg)
	r := &a.roster
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return // Close has stopped what runs: nothing starts any more
	}
	r.cfg = cfg
	var stopping []*server
	var starting []config.Server
	for key, act := range actions {
		sl := r.slots[key]
		switch act {
		case remove, restart:
			if sl.proc != nil {
				stopping = append(stopping, sl.proc)
			}
			delete(r.slots, key)
			if act == restart {
				starting = append(starting, entries[key])
			}
		case add:
			starting = append(starting, entries[key])
		case refilter:
			sl.setEntry(entries[key])
		}
	}
	r.mu.Unlock()
	for _, s := range stopping {
		a.retire(s, "was stopped by a reload", "")
		<-s.stopped
	}
	if a.opts.Lazy || a.opts.Hosted {
		// As at start-up: whether they start depends on the client.
		r.mu.Lock()
		for _, sc := range starting {
			if !r.closed {
				r.slots[sc.Key] = &slot{key: sc.Key, cfg: sc, state: dormant}
			}
		}
		r.mu.Unlock()
		return
	}
	for _, res := range a.spawnAll(starting) {
		r.mu.Lock()
		closed := r.closed
		if !closed {
			r.slots[res.cfg.Key] = newSlot(res)
		}
		r.mu.Unlock()
		if closed && res.srv != nil {
			a.retire(res.srv, "was not started: "+errShuttingDown.Error(), "")
			<-res.srv.stopped
		}
	}
}

// apply applies a reload after the client's initialize, key by key in parallel, nothing in
// flight lost: what goes is drained, then stopped; what comes is started and published as soon
// as it serves, and its held calls go to it. The client is told once per list that changed,
// after the reload has settled. Callers hold reloadMu.
func (a *Aggregator) apply(cfg *config.Config, actions map[string]action) {
	entries := entriesOf(cfg)
	r := &a.roster
	r.mu.Lock()
	r.cfg, r.reloading = cfg, true
	params := r.params
	before := a.catalog.Load()
	failures := a.refilter(actions, entries)
	slots := map[string]*slot{}
	for key, act := range actions {
		switch act {
		case add:
			r.slots[key] = &slot{key: key, cfg: entries[key], state: starting, initial: true}
		case restart:
			// A reload is a first start: it is not retried when it fails.
			r.slots[key].tries, r.slots[key].initial = 0, true
		}
		slots[key] = r.slots[key]
	}
	r.mu.Unlock()

	var wg sync.WaitGroup
	var fmu sync.Mutex
	for key, act := range actions {
		if act == keep || act == refilter {
			continue
		}
		sl := slots[key]
		wg.Go(func() {
			switch act {
			case remove:
				a.drainAndStop(sl, true, "was removed from the configuration")
				a.remove(sl)
				return
			case restart:
				a.drainAndStop(sl, false, "was restarted because its configuration changed")
			}
			r.mu.Lock()
			sl.cfg = entries[key]
			if a.opts.Lazy && !r.closed {
				// Its catalog for this client in the cache: listed from it, started by its
				// first request.
				if s := a.fromCache(entries[key], params); s != nil {
					sl.listed, sl.cached, sl.initial = s, s.cachedAt, false
					a.move(sl, dormant, "its catalog is in the cache; its first request starts it")
					_ = a.publish()
					r.mu.Unlock()
					return
				}
			}
			gen, ok := a.claim(sl)
			r.mu.Unlock()
			if !ok {
				return
			}
			defer a.starts.Done()
			res := a.start(sl, gen, entries[key], params)
			if res.err != nil {
				a.auditFailed(key, res.err)
				fmu.Lock()
				failures = append(failures, res.failure("could not start and stays down (the other servers are served)"))
				fmu.Unlock()
				return
			}
			a.ready(res.srv, cfg.File)
		})
	}
	wg.Wait()

	r.mu.Lock()
	r.reloading = false
	_ = a.publish() // list changes during the reload: one catalog now
	if after := a.catalog.Load(); before != nil {
		a.announce(before, after)
	}
	r.mu.Unlock()
	slices.Sort(failures)
	for _, f := range failures {
		a.report("error", cfg.File+": reload: "+f)
	}
}

// refilter gives the servers whose filters alone changed their new filters, unless the names
// they would expose collide; then the old filters stay, and the failures say why. Callers hold
// roster.mu.
func (a *Aggregator) refilter(actions map[string]action, entries map[string]config.Server) []string {
	var failures []string
	for key, act := range actions {
		if act != refilter {
			continue
		}
		sl := a.roster.slots[key]
		prev := sl.cfg
		sl.setEntry(entries[key])
		if err := a.publish(); err != nil {
			sl.setEntry(prev)
			failures = append(failures, fmt.Sprintf("server %q keeps its previous tool filters: with the new ones, %v", key, err))
		}
	}
	return failures
}

// drainAndStop drains the slot's process for a reload (see drain): it is given drainTime to
// answer what it has in flight, then what is left fails with an error saying why, and it is
// stopped.
func (a *Aggregator) drainAndStop(sl *slot, removing bool, why string) {
	s, idle := a.drain(sl, removing, why)
	if s == nil {
		return
	}
	select {
	case <-idle:
	case <-s.retired:
	case <-time.After(drainTime):
	case <-a.closingCtx.Done():
	}
	a.retire(s, why, fmt.Sprintf(", and did not answer within %v", drainTime))
	<-s.stopped
	a.auditStopped(s, why)
	s.log.Debug("stopped by a reload", "why", why)
}

// setEntry makes cfg the entry of the slot and of its processes, whose process it does not
// change (filters, "alwaysLoad"). Callers hold roster.mu.
func (sl *slot) setEntry(cfg config.Server) {
	sl.cfg = cfg
	for _, s := range []*server{sl.proc, sl.listed} {
		if s != nil {
			s.cfg, s.filter = cfg, cfg.Tools
		}
	}
}

// entriesOf are the server entries of cfg by key.
func entriesOf(cfg *config.Config) map[string]config.Server {
	entries := make(map[string]config.Server, len(cfg.Servers))
	for _, sc := range cfg.Servers {
		entries[sc.Key] = sc
	}
	return entries
}
