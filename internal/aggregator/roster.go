package aggregator

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// The roster is the one table of the configured servers, by key, each in one state:
//
//	starting   its process runs and its handshake is under way (or, before the client's
//	           initialize, waits for it)
//	serving    it answers calls
//	draining   a reload stops it, for good (removing) or to start it again: it takes none of the
//	           client's new calls, and what it has in flight may end
//	waiting    it crashed, and is started again at retryAt
//	dormant    not running, and started by its first request (--lazy, --idle-stop): its lists
//	           are those of its last process, or of the catalog cache (lazy.go)
//	down       not running, and not coming back before a reload: it failed to start, its
//	           restarts were given up, or it crashed with --max-restarts 0
//
// Every change of state is a transition below, under roster.mu, and each checks that the slot
// is still in the state (and on the process) the event is about: an event that comes late (a
// crash noticed after a reload replaced the process, a restart's timer after a reload started
// it) changes nothing.
//
// The catalog holds one rule: a key's tools, prompts and resources are those of slot.listed,
// the last process of the key that listed them, for as long as the key serves or is expected
// back (a restart pending or under way, a reload restarting it); a key that is down or removed
// has none. Clients that ignore list_changed keep working across a restart, and a call for a
// key that is expected back waits for it (hold, in restart.go). Every new catalog is made by
// publish.

// state is where a server key is in its life.
type state int

const (
	starting state = iota
	serving
	draining
	waiting
	dormant
	down
)

var stateNames = [...]string{starting: "starting", serving: "serving", draining: "draining", waiting: "waiting to restart", dormant: "not started", down: "down"}

func (st state) String() string { return stateNames[st] }

// slot is one server key of the roster. Guarded by roster.mu.
type slot struct {
	key   string
	cfg   config.Server // the entry it runs (or is to run)
	state state
	// proc is its process while starting, serving or draining; nil otherwise.
	proc *server
	// listed is the process whose lists the catalog holds for the key; nil when none.
	listed *server
	// why says why it drains, waits or is down (failedToStart for a start that failed: then
	// startErr is the start's error, such as its command not found or its handshake refused;
	// nil once it serves); gaveUp is set when it is down because its restarts were used up.
	// unavailable (unknown.go) says all of it to the client.
	why      string
	startErr error
	gaveUp   bool
	// removing: it drains to leave the roster (else to start again).
	removing bool
	// retryAt is when a waiting slot is started again, by timer.
	retryAt time.Time
	timer   *time.Timer
	// tries counts the restarts since it last served for stableAfter (with --lazy: the starts
	// on first use that failed, or crashes, in a row).
	tries int
	// initial is set while its start is a first start (at start-up, or a reload's): one that
	// fails leaves the key down, where a restart or a start on first use would be tried again.
	initial bool
	// cached is when the catalog cache's entry the key is listed from was written (zero when
	// its lists are a process's of this run).
	cached time.Time
	// gen counts the starts claimed for the slot (claim): a start whose claim is no longer the
	// last (a reload took over from a restart's try under way) stops its process.
	gen uint64
	// prev is the process that fell last: a restart waits until it is stopped, so that the
	// old and the new process never run at once (servers hold locks and ports).
	prev *server
	// since is when it last began serving.
	since time.Time
	// back is set while the key is expected back (a restart pending or under way): the
	// client's calls for it are held in the table until it serves again, or is not coming
	// back (release).
	back bool
	// era is the era the last process of the key served in, learnt for the entry eraOf
	// (eraKnown): a new process of the same entry is spoken to in it without a probe when it is
	// legacy, so that a restart's try is one process (probe.go).
	era      era.Era
	eraKnown bool
	eraOf    config.Server
}

// expectBack makes the client's calls for the slot wait for it (hold).
func (sl *slot) expectBack() { sl.back = true }

// release lets the calls held for the slot go: to its new process when it serves, or to the
// error of its end, on a goroutine of their own, each taken out of the table as it goes (until
// then the client's cancellation finds it). Callers hold roster.mu: a call is either held
// before it, or finds the slot in its new state.
func (a *Aggregator) release(sl *slot) {
	if !sl.back {
		return
	}
	sl.back = false
	held := a.inflight.heldFor(sl.key)
	if len(held) == 0 {
		return
	}
	why := ""
	if sl.state != serving {
		why = a.unavailable(sl) // unknown.go
	}
	go func() {
		for _, c := range held {
			switch {
			case !a.inflight.take(c): // cancelled meanwhile, or its wait ran out
			case why == "":
				a.client.clientRequest(c.req)
			default:
				a.client.answerClient(c.fromID, nil, rpcError(jsonrpc.CodeInternalError, nil, "Server unavailable: %s", why))
			}
		}
	}()
}

// roster is the table of server keys.
type roster struct {
	mu    sync.Mutex
	cfg   *config.Config // the configuration in force
	slots map[string]*slot
	// started is set at the client's initialize, when the servers are initialized with params;
	// a server started later gets the same.
	started bool
	params  json.RawMessage
	// clientEra is the client's era: the catalog checks definitions against its schema.
	clientEra era.Era
	// reloading is set while a reload runs: it tells the client once, when it has settled.
	reloading bool
	closed    bool // Close began: nothing starts any more
}

// isStarted reports whether the servers are started for a client (check has none).
func (r *roster) isStarted() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started
}

// sorted are the slots in key order.
func (r *roster) sorted() []*slot {
	out := make([]*slot, 0, len(r.slots))
	for _, sl := range r.slots {
		out = append(out, sl)
	}
	slices.SortFunc(out, func(x, y *slot) int { return strings.Compare(x.key, y.key) })
	return out
}

// listedServers are the processes whose lists the catalog holds, in key order (the rule above).
func (r *roster) listedServers() []*server {
	var out []*server
	for _, sl := range r.sorted() {
		if sl.listed != nil {
			out = append(out, sl.listed)
		}
	}
	return out
}

// servingServers are the processes that serve now, in key order: the targets of fan-outs.
func (r *roster) servingServers() []*server {
	var out []*server
	for _, sl := range r.sorted() {
		if sl.state == serving {
			out = append(out, sl.proc)
		}
	}
	return out
}

// servingServers are the processes that serve now, in key order.
func (a *Aggregator) servingServers() []*server {
	a.roster.mu.Lock()
	defer a.roster.mu.Unlock()
	return a.roster.servingServers()
}

// serving returns the process that serves key now; nil when none does.
func (a *Aggregator) serving(key string) *server {
	r := &a.roster
	r.mu.Lock()
	defer r.mu.Unlock()
	if sl := r.slots[key]; sl != nil && sl.state == serving {
		return sl.proc
	}
	return nil
}

// publish makes the catalog of the roster current (the one rule above) and tells the client
// which lists changed, once per burst and, during a reload, once it has settled; resource
// collisions and withheld definitions new to it are reported. When names would collide nothing changes, and the
// error names them: the caller undoes its change. Callers hold roster.mu, after the start-up.
func (a *Aggregator) publish() error {
	cat, err := buildCatalogFor(a.roster.listedServers(), a.opts.Separator, a.roster.clientEra)
	if err != nil {
		return err
	}
	cat.noteGone(a.catalog.Load())
	old := a.catalog.Swap(cat)
	for _, w := range cat.warnings {
		if old == nil || !slices.Contains(old.warnings, w) {
			a.log.Warn(w)
		}
	}
	a.reportWithheld(old, cat)
	a.reportHidden(old, cat) // trust.go
	if old != nil && !a.roster.reloading {
		a.announce(old, cat)
	}
	return nil
}

// announce tells the client, once for each list, which lists changed between two catalogs.
func (a *Aggregator) announce(before, after *catalog) {
	sent := map[string]bool{}
	for k := range numKinds {
		if string(before.lists[k]) != string(after.lists[k]) && !sent[kinds[k].changed] {
			sent[kinds[k].changed] = true
			a.client.listChanged(kinds[k].changed)
		}
	}
}

// startResult is how the start of one entry went: its server, or why it has none, and how
// long it took. Start-up, check and reload report from it.
type startResult struct {
	cfg  config.Server
	srv  *server
	err  error
	took time.Duration
}

// failure is the sentence that reports a start that failed, with what follows (such as "could
// not start and stays down"): it names the server and what happened, or that it is a
// configuration loop.
func (r startResult) failure(what string) string {
	if strings.Contains(r.err.Error(), loopMessage) {
		return fmt.Sprintf("server %q %s: it is a configuration loop: it starts mcp-simple-aggregator on this same configuration file again; remove it from the file, or give it another configuration file: %v", r.cfg.Key, what, r.err)
	}
	return fmt.Sprintf("server %q %s: %v", r.cfg.Key, what, r.err)
}

// The transitions. Each takes roster.mu; those that end a process's calls do so after
// releasing it.

// enroll adds the slot of an entry whose process res started (or failed to: then it is down),
// before the client's initialize.
func (a *Aggregator) enroll(res startResult) {
	r := &a.roster
	r.mu.Lock()
	defer r.mu.Unlock()
	r.slots[res.cfg.Key] = newSlot(res)
}

// newSlot is the slot of an entry whose process res started before the client's initialize
// (starting, its handshake to come), or failed to start (down).
func newSlot(res startResult) *slot {
	if res.err != nil {
		return &slot{key: res.cfg.Key, cfg: res.cfg, state: down, why: failedToStart, startErr: res.err, initial: true}
	}
	return &slot{key: res.cfg.Key, cfg: res.cfg, state: starting, proc: res.srv, initial: true}
}

// move changes the state of sl, saying why (kept for its calls and reports), on the debug log.
// Callers hold roster.mu.
func (a *Aggregator) move(sl *slot, to state, why string) {
	a.log.Debug("state", "server", sl.key, "from", sl.state.String(), "to", to.String(), "why", why, "tries", sl.tries)
	sl.state, sl.why, sl.gaveUp = to, why, false
}

// failedToStart is the why of a slot whose start failed; its startErr says how.
const failedToStart = "failed to start"

// served makes a slot whose process s finished its handshake serve (starting → serving): its
// lists go into the catalog, and the calls held for it go. It fails when the key is no longer
// starting on s (a reload or Close came first), and when its names would collide with another
// server's: then the key is down, saying so. The caller stops s on failure.
func (a *Aggregator) served(s *server) error {
	r := &a.roster
	r.mu.Lock()
	defer r.mu.Unlock()
	sl := r.slots[s.key]
	switch {
	case r.closed:
		return errShuttingDown
	case sl == nil || sl.proc != s || sl.state != starting:
		return fmt.Errorf("it was replaced while it started")
	}
	a.auditChanged(a.beforeChange(sl.listed), s) // a new process that changed a definition (audit.go)
	sl.listed, sl.initial, sl.cached = s, false, time.Time{}
	sl.era, sl.eraKnown, sl.eraOf = s.side().era(), true, s.cfg
	if a.catalog.Load() != nil { // at start-up, the first catalog is built once every server is
		if err := a.publish(); err != nil {
			sl.proc, sl.listed = nil, nil
			a.move(sl, down, "could not be served: "+err.Error())
			a.release(sl)
			_ = a.publish()
			return err
		}
	}
	a.move(sl, serving, "")
	sl.startErr = nil
	a.auditServed(sl, s)
	sl.since = time.Now()
	s.lastUse.Store(sl.since.UnixNano())
	a.release(sl)
	a.remember(s) // its catalog, for later runs (--lazy)
	go a.watch(s)
	if a.opts.PingInterval > 0 {
		go a.pingLoop(s)
	}
	return nil
}

// errShuttingDown is the error of what starts while the aggregator stops.
var errShuttingDown = fmt.Errorf("mcp-simple-aggregator is shutting down")

// drain starts stopping a serving (or starting) slot for a reload (→ draining): it takes none of
// the client's new calls from now on. A removed key's lists leave the catalog at once; a key
// that restarts keeps them, and its calls wait for the new process. It returns the process and
// the signal that it has nothing in flight; nil when the slot has no process.
func (a *Aggregator) drain(sl *slot, removing bool, why string) (*server, <-chan struct{}) {
	r := &a.roster
	r.mu.Lock()
	defer r.mu.Unlock()
	a.stopTimer(sl)
	s := sl.proc
	var idle <-chan struct{}
	if s != nil {
		// The gate first (under roster.mu: the draining decision and the state agree): once the
		// state says draining (the log says so), no call of the client's reaches s.
		idle = a.inflight.drain(s)
	}
	a.move(sl, draining, why)
	sl.removing = removing
	if removing {
		sl.listed = nil
		a.release(sl)
	} else if sl.listed != nil {
		sl.expectBack()
	}
	if a.catalog.Load() != nil {
		_ = a.publish() // leaving a server out cannot make names collide
	}
	return s, idle
}

// remove takes a drained key out of the roster, unless a later reload took it back.
func (a *Aggregator) remove(sl *slot) {
	r := &a.roster
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.slots[sl.key] == sl && sl.state == draining && sl.removing {
		delete(r.slots, sl.key)
		sl.proc = nil
	}
}

// claim makes the caller the one that starts the slot next (a restart's try, or a reload's
// start of the key): a pending restart is cancelled, and a start under way is superseded. It
// reports false when the aggregator closes. The caller calls a.starts.Done when its start is
// over: Close waits for the starts under way. Callers hold roster.mu.
func (a *Aggregator) claim(sl *slot) (gen uint64, ok bool) {
	if a.roster.closed {
		return 0, false
	}
	a.stopTimer(sl)
	sl.gen++
	a.starts.Add(1)
	return sl.gen, true
}

// errReplaced is the error of a start that a later one superseded.
var errReplaced = fmt.Errorf("a later start of the server took its place")

// relaunch makes a slot start on the new process s (→ starting), for the start claimed as gen.
// It fails, and stops s, when the key is gone, the start was superseded, or the aggregator
// closes.
func (a *Aggregator) relaunch(sl *slot, gen uint64, s *server) error {
	r := &a.roster
	r.mu.Lock()
	var err error
	switch {
	case r.closed:
		err = errShuttingDown
	case r.slots[sl.key] != sl || sl.gen != gen:
		err = errReplaced
	}
	if err != nil {
		r.mu.Unlock()
		a.retire(s, "was not started: "+err.Error(), "")
		<-s.stopped
		return err
	}
	a.stopTimer(sl)
	a.move(sl, starting, "")
	sl.proc = s
	if sl.listed != nil {
		sl.expectBack()
	}
	r.mu.Unlock()
	return nil
}

// fell takes a slot whose process s went down (it exited, closed its stdout, failed its health
// probes, or failed its handshake: then why is failedToStart, and startErr the handshake's
// error) out of serving: everything s had in flight fails with why, and the slot waits to
// restart (its lists stay, its calls wait) or, when restarts are off or used up, or when this
// was the key's first start, is down (its lists leave the catalog). A slot that a reload drains
// keeps draining. It reports what became of the slot, for the caller's report; ok is false when
// the event is stale (s is no longer the slot's process).
func (a *Aggregator) fell(s *server, why string, startErr error) (next state, delay time.Duration, tries int, ok bool) {
	r := &a.roster
	r.mu.Lock()
	sl := r.slots[s.key]
	if sl == nil || sl.proc != s || sl.state == waiting || sl.state == down {
		r.mu.Unlock()
		a.retire(s, why, "")
		return 0, 0, 0, false
	}
	if sl.state == draining {
		r.mu.Unlock()
		a.retire(s, why, "") // the reload's drain ends at once, and stops it
		return draining, 0, 0, true
	}
	if startErr != nil {
		sl.startErr = startErr
	}
	then, delay := a.fallLocked(sl, why)
	next, tries = sl.state, sl.tries
	r.mu.Unlock()
	a.retire(s, why, then)
	return next, delay, tries, true
}

// fallLocked moves a slot that lost its process (sl.proc is cleared) to waiting, or to down
// when restarts are off or used up, or when this was the key's first start (a restart is for a
// server that served); with --lazy, to dormant instead of waiting: its next request starts it.
// It returns what follows for the calls the process had in flight, and the wait before the
// next try. Callers hold roster.mu.
func (a *Aggregator) fallLocked(sl *slot, why string) (then string, delay time.Duration) {
	initial := sl.state != serving && sl.initial
	if sl.proc != nil {
		sl.prev = sl.proc
	}
	if sl.state == serving && time.Since(sl.since) >= stableAfter {
		sl.tries = 0
	}
	sl.proc = nil
	then = "; its tools, prompts and resources are no longer available"
	switch {
	case initial || a.opts.MaxRestarts == 0 || a.roster.closed:
		a.move(sl, down, why)
	case sl.tries >= a.opts.MaxRestarts:
		a.move(sl, down, fmt.Sprintf("%s, and was given up after %d restarts in a row", why, sl.tries))
		sl.why, sl.gaveUp = why, true
	case a.opts.Lazy:
		a.move(sl, dormant, why)
		sl.tries++
		a.release(sl) // the calls that waited for this start: it failed
		then = "; its next request starts it again"
	default:
		a.move(sl, waiting, why)
		delay = a.backoff(sl.tries)
		sl.tries++
		sl.retryAt = time.Now().Add(delay)
		sl.expectBack()
		sl.timer = time.AfterFunc(delay, func() { a.restart(sl) })
		then = fmt.Sprintf("; it is restarted in %v, and calls made meanwhile wait for it", delay)
	}
	if sl.state == down {
		sl.listed = nil
		a.release(sl)
		if a.catalog.Load() != nil {
			_ = a.publish() // leaving a server out cannot make names collide
		}
	}
	return then, delay
}

// stopTimer cancels a pending restart of sl. Callers hold roster.mu.
func (a *Aggregator) stopTimer(sl *slot) {
	if sl.timer != nil {
		sl.timer.Stop()
		sl.timer = nil
	}
}

// retire ends a process the roster no longer uses: its gate closes, what it had in flight fails
// with an error saying why and what follows (then), its requests to the client are cancelled
// there, and it is stopped, in the background.
func (a *Aggregator) retire(s *server, why, then string) {
	s.retireOnce.Do(func() {
		a.endCalls(s, func(c *call) json.RawMessage { return serverGone(c, s.key, why, then) }, fmt.Sprintf("server %q %s", s.key, why))
		close(s.retired)
		go s.stop(a.opts.ShutdownGrace)
	})
}

// endCalls ends what s had in flight: its calls fail with the error errFor gives, and its
// requests that reached the client are cancelled there for reason. The gate of s closes first.
// A process that goes on for other sessions (a shared process's) is told too, since the table
// is the only record of the session's work with it: what it has of the session's is cancelled
// at it (its initialize is the process's, ProcessSessions, and in no session's table), and its
// requests to the client are answered with an error (as is one that comes after the sweep:
// notTaken).
func (a *Aggregator) endCalls(s *server, errFor func(*call) json.RawMessage, reason string) {
	tell := s.goesOn()
	for _, c := range a.inflight.sweep(s) {
		if c.to == s {
			if tell && c.stage == sent {
				c.cancelAtServer(func() { s.conn.Send(nil, stdio.Cancelled(c.toID, SessionGone)...) })
			}
			a.failWith(c, errFor(c))
			continue
		}
		if c.stage == sent {
			a.client.toClient(stdio.Cancelled(c.toID, reason))
		}
		if tell {
			a.notTaken(s, c.fromID)
		}
	}
}

// notTaken answers a server's request that the session cannot take (the gate of s closed: the
// session stops using it; a fault ended the session) when its process is a shared process's,
// which goes on for other sessions and would otherwise wait for the answer for good; a process
// of the session's own goes down, and waits for nothing.
func (a *Aggregator) notTaken(s *server, id jsonrpc.ID) {
	if f := s.fed(); f != nil {
		f.Refuse(id, AskedGone())
	}
}
