package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

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
//	down (crashed or failed)    started again: a reload is how a failed server comes back
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
// a link: the watcher follows links itself, and sees one re-pointed) and the "envFile" of each
// server, as absolute paths.
func (a *Aggregator) Files() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	file, err := filepath.Abs(a.cfg.File)
	if err != nil {
		file = a.cfg.File
	}
	files := []string{file}
	for _, sc := range a.cfg.Servers {
		if sc.EnvFile != "" && !slices.Contains(files, sc.EnvFile) {
			files = append(files, sc.EnvFile)
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
	cfg, warnings, err := config.Load(a.cfg.File, os.LookupEnv)
	for _, w := range warnings {
		a.log.Warn(w.String())
	}
	if err != nil {
		msg := fmt.Sprintf("reload: %v\nthe servers keep running as they were", err)
		a.log.Error(msg)
		a.toClient(logNotification("error", msg))
		return
	}
	a.apply(cfg)
}

// change is what a reload does to one server key.
type change int

const (
	unchanged change = iota
	added
	removed
	restarted
	refiltered
)

// apply makes cfg the configuration, server by server. Callers hold reloadMu.
func (a *Aggregator) apply(cfg *config.Config) {
	a.mu.Lock()
	started := a.started // the servers are initialized (the client has initialized)
	old := map[string]*server{}
	for _, s := range a.servers {
		old[s.key] = s
	}
	if !started {
		for _, s := range a.spawned {
			old[s.key] = s
		}
	}
	known := map[string]bool{} // keys of the previous file: a failed server coming back is a restart
	for _, sc := range a.cfg.Servers {
		known[sc.Key] = true
	}
	next := map[string]config.Server{}
	for _, sc := range cfg.Servers {
		next[sc.Key] = sc
	}
	plan := map[string]change{}
	for key, sc := range next {
		switch s := old[key]; {
		case s == nil:
			plan[key] = added
		case s.isDown() || !sameProcess(s.cfg, sc):
			plan[key] = restarted
		case !s.cfg.Tools.Equal(sc.Tools):
			plan[key] = refiltered
		default:
			plan[key] = unchanged
		}
	}
	for key := range old {
		if _, ok := next[key]; !ok {
			plan[key] = removed
		}
	}
	a.cfg = cfg
	var failures []string
	before := a.catalog.Load()
	waiting := map[string]chan struct{}{}
	for key, ch := range plan {
		if s := old[key]; s != nil && (ch == removed || ch == restarted) && !s.isDown() {
			s.draining.Store(true) // see table.add: from now on it takes no new call
		}
		if ch == restarted && started {
			waiting[key] = make(chan struct{})
		}
	}
	a.restarting = waiting
	if started {
		failures = append(failures, a.refilter(plan, old, next)...)
		// Removed servers leave the catalog at once (their tools are unknown from now on);
		// restarting ones stay, so that their calls wait instead of failing.
		if cat, err := buildCatalog(a.serving(plan), a.opts.Separator); err == nil {
			a.catalog.Store(cat)
		}
	}
	params := a.serverParams
	a.mu.Unlock()

	// Each key on its own: drain and stop what goes, then start what comes and publish it.
	var newServers []*server
	var wg sync.WaitGroup
	var rmu sync.Mutex
	for key, ch := range plan {
		if ch == unchanged || ch == refiltered {
			continue
		}
		wg.Go(func() {
			if s := old[key]; s != nil && ch != added {
				a.drain(s, ch)
			}
			if ch == removed {
				return
			}
			s, err := a.spawn(next[key])
			if err == nil && started {
				ctx, cancel := context.WithTimeout(a.closingCtx, a.opts.StartupTimeout)
				err = a.initServer(ctx, s, params)
				cancel()
			}
			if err == nil {
				err = a.publish(key, s, started)
			}
			rmu.Lock()
			defer rmu.Unlock()
			if err != nil {
				if started { // before the client, the start-up reports it
					failures = append(failures, startFailure(key, err, "could not start and stays down (the other servers are served)"))
				}
			} else {
				newServers = append(newServers, s)
			}
			if w := waiting[key]; w != nil {
				a.mu.Lock()
				delete(a.restarting, key)
				a.mu.Unlock()
				close(w) // after the catalog has the new server: the waiting calls go to it
			}
		})
	}
	wg.Wait()

	a.mu.Lock()
	a.restarting = nil
	if !started {
		a.spawnErrs = make([]error, len(cfg.Servers))
		for i, sc := range cfg.Servers {
			if !slices.ContainsFunc(a.spawned, func(s *server) bool { return s.key == sc.Key && !s.isDown() }) {
				a.spawnErrs[i] = fmt.Errorf("start %q: it was not running after a reload", sc.Command)
			}
		}
	}
	var after *catalog
	if started {
		// List changes announced during the reload updated the lists only: one catalog now.
		if cat, err := buildCatalog(a.liveServers(), a.opts.Separator); err == nil {
			a.catalog.Store(cat)
		}
		after = a.catalog.Load()
	}
	unmatched := map[*server][]config.Problem{}
	for _, s := range newServers {
		unmatched[s] = s.filter.Unmatched(toolNames(s))
	}
	a.mu.Unlock()
	if started {
		a.announce(before, after)
		for _, s := range newServers {
			go a.watch(s)
			if a.opts.PingInterval > 0 {
				go a.pingLoop(s)
			}
			for _, p := range unmatched[s] {
				a.log.Warn(config.Warning{File: cfg.File, Problem: p}.String())
			}
		}
	}
	slices.Sort(failures)
	for _, f := range failures {
		msg := cfg.File + ": reload: " + f
		a.log.Error(msg)
		a.toClient(logNotification("error", msg))
	}
	counts := map[change]int{}
	for key, ch := range plan {
		if ch == added && known[key] {
			ch = restarted // it failed before: it is started again
		}
		counts[ch]++
	}
	a.log.Info(fmt.Sprintf("reload: %d added, %d removed, %d restarted, %d refiltered, %d unchanged", counts[added], counts[removed], counts[restarted], counts[refiltered], counts[unchanged]))
}

// serving are the servers that serve while a reload runs: the live ones, less the removed.
// Callers hold a.mu.
func (a *Aggregator) serving(plan map[string]change) []*server {
	var out []*server
	for _, s := range a.liveServers() {
		if plan[s.key] != removed {
			out = append(out, s)
		}
	}
	return out
}

// refilter gives the servers whose filters alone changed their new filters, unless the names
// they would expose collide; then the old filters stay, and the failures say why. Callers hold
// a.mu.
func (a *Aggregator) refilter(plan map[string]change, old map[string]*server, next map[string]config.Server) []string {
	var failures []string
	for key, ch := range plan {
		if ch != refiltered {
			continue
		}
		s := old[key]
		prev := s.filter
		s.filter = next[key].Tools
		if _, err := buildCatalog(a.serving(plan), a.opts.Separator); err != nil {
			s.filter = prev
			failures = append(failures, fmt.Sprintf("server %q keeps its previous tool filters: with the new ones, %v", key, err))
			continue
		}
		s.cfg = next[key]
	}
	return failures
}

// publish puts s, the new server of key, into the catalog (in the place of the server it
// replaces). A server whose names would collide with another's is stopped, with an error
// saying so; so is one that comes after Close.
func (a *Aggregator) publish(key string, s *server, started bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closing.Load() {
		go s.stop(0)
		return errors.New("mcp-simple-aggregator is shutting down")
	}
	list := &a.spawned
	if started {
		list = &a.servers
	}
	without := slices.DeleteFunc(slices.Clone(*list), func(o *server) bool { return o.key == key })
	with := append(without, s)
	slices.SortFunc(with, func(x, y *server) int { return strings.Compare(x.key, y.key) })
	if started {
		// The catalog: the servers up, less those that drain for good (removed); those that
		// drain for a restart of their own keep their entries until it is published.
		var live []*server
		for _, o := range with {
			if !o.isDown() && (!o.draining.Load() || a.restarting[o.key] != nil) {
				live = append(live, o)
			}
		}
		cat, err := buildCatalog(live, a.opts.Separator)
		if err != nil {
			s.markDown("its names collide with another server's")
			go s.stop(a.opts.ShutdownGrace)
			return err
		}
		a.catalog.Store(cat)
	}
	*list = with
	if started {
		a.spawned = append(a.spawned, s)
	}
	return nil
}

// sameProcess reports whether two entries start the same process: the same command,
// arguments, environment (envFile's values included) and working directory.
func sameProcess(x, y config.Server) bool {
	return x.Command == y.Command && slices.Equal(x.Args, y.Args) && maps.Equal(x.Env, y.Env) && x.Dir == y.Dir && x.EnvFile == y.EnvFile
}

// drain lets s answer what it has in flight, for at most drainTime, then fails the rest with
// an error saying why, and stops s. s takes no new calls meanwhile (s.draining).
func (a *Aggregator) drain(s *server, ch change) {
	why := "was removed from the configuration"
	if ch == restarted {
		why = "was restarted because its configuration changed"
	}
	deadline := time.Now().Add(drainTime)
	for !s.isDown() && a.inflight.busy(s) && time.Now().Before(deadline) && a.closingCtx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if s.markDown(why) {
		a.endCalls(s, func(c *call) json.RawMessage {
			return rpcError(jsonrpc.CodeInternalError, nil, "Server unavailable: server %q %s, and did not answer within %v while %s", s.key, why, drainTime, c.what())
		}, fmt.Sprintf("server %q %s", s.key, why))
	}
	s.stop(a.opts.ShutdownGrace)
	s.log.Debug("stopped by a reload", "why", why)
}

// announce tells the client, once for each list, which lists a reload changed.
func (a *Aggregator) announce(before, after *catalog) {
	if before == nil || after == nil {
		return
	}
	a.reportWithheld(before, after)
	sent := map[string]bool{}
	for k := range numKinds {
		if string(before.lists[k]) != string(after.lists[k]) && !sent[kinds[k].changed] {
			sent[kinds[k].changed] = true
			a.notify.trigger(kinds[k].changed)
		}
	}
}

// serves reports whether the server key is up.
func (a *Aggregator) serves(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.ContainsFunc(a.servers, func(s *server) bool { return s.key == key && !s.isDown() })
}

// waitForRestart deals with the client's request req, which came for the server old while a
// reload stops it: when old's key is restarting, the request waits until the new process
// serves (or the start-up timeout has passed) and is dispatched again, to it; when the key has
// a new server already, it is dispatched again at once. It reports false when the key was
// removed.
func (a *Aggregator) waitForRestart(req *jsonrpc.Request, old *server) bool {
	a.mu.Lock()
	ch := a.restarting[old.key]
	var current *server
	for _, s := range a.servers {
		if s.key == old.key && s != old {
			current = s
		}
	}
	a.mu.Unlock()
	switch {
	case ch != nil:
		go func() {
			select {
			case <-ch:
				if !a.serves(old.key) {
					a.answerClient(req.ID, nil, rpcError(jsonrpc.CodeInternalError, nil,
						"Server unavailable: server %q was restarted after a change of the configuration, and did not come back (its error is on the log)", old.key))
					return
				}
				a.clientRequest(req)
			case <-time.After(a.opts.StartupTimeout):
				a.answerClient(req.ID, nil, rpcError(jsonrpc.CodeInternalError, nil,
					"Server unavailable: server %q is restarting after a change of the configuration, and did not come back within the start-up timeout (--startup-timeout)", old.key))
			}
		}()
	case current != nil:
		a.clientRequest(req) // the catalog it was looked up in is older than the new server
	default:
		return false
	}
	return true
}
