package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// Restarts. The 2026-07-28 stdio binding (basic/transports/stdio): "The client SHOULD restart
// a server process that exits unexpectedly." A server that exits, closes its standard output
// or fails its health probes is started again after a delay that doubles from
// Options.RestartDelay up to maxBackoff; one that then serves for stableAfter counts as
// healthy again (its tries start over). After Options.MaxRestarts tries in a row it is given
// up and stays down until a reload. Meanwhile its tools, prompts and resources stay listed
// under the same names (clients that ignore list_changed keep working), and a call for it
// waits for the new process (hold). What the client set up on it (resource subscriptions, the
// log level) is set up again on every new process (replay). A call that was in flight when it
// crashed fails at once with the crash: a call may not be idempotent, so it is never re-sent.

const (
	// maxBackoff is the longest wait before a restart.
	maxBackoff = 30 * time.Second
	// stableAfter is how long a restarted server must serve for its tries to start over.
	stableAfter = time.Minute
)

// backoff is the wait before try tries+1 of a restart: RestartDelay, doubled by each try
// before it, at most maxBackoff.
func (a *Aggregator) backoff(tries int) time.Duration {
	d := a.opts.RestartDelay
	for range tries {
		if d >= maxBackoff/2 {
			return maxBackoff
		}
		d *= 2
	}
	return min(d, maxBackoff)
}

// crashed deals with a serving process that stopped serving (watch, pingLoop): the roster
// decides what follows (fell), and the user and the client are told, in one line.
func (a *Aggregator) crashed(s *server, why string) {
	next, delay, tries, ok := a.fell(s, why, nil)
	if !ok || next == draining {
		return
	}
	a.auditCrashed(s, why, next, tries)
	tail := tailText(s.proc.Tail())
	switch {
	case next == waiting:
		a.report("warning", fmt.Sprintf("server %q %s; it is restarted in %v (try %d of %d), and calls made meanwhile wait for it%s",
			s.key, why, delay, tries, a.opts.MaxRestarts, tail))
	case a.opts.MaxRestarts == 0:
		a.report("error", fmt.Sprintf("server %q %s; its tools, prompts and resources are no longer available (restarts are off: --max-restarts 0); "+
			"save the configuration file or send SIGHUP to start it again%s", s.key, why, tail))
	default:
		a.report("error", a.givenUp(s.key, why, tries)+tail)
	}
}

// givenUp is the report of a server whose restarts were given up.
func (a *Aggregator) givenUp(key, why string, tries int) string {
	return fmt.Sprintf("server %q %s, and is given up after %d restarts in a row (--max-restarts %d); its tools, prompts and resources are no longer available; "+
		"save the configuration file or send SIGHUP to start it again", key, why, tries, a.opts.MaxRestarts)
}

// report writes a line of the aggregator's on stderr and sends it to the client as a log
// message at level ("warning" or "error").
func (a *Aggregator) report(level, msg string) {
	if level == "error" {
		a.log.Error(msg)
	} else {
		a.log.Warn(msg)
	}
	a.client.clientLog(level, msg)
}

// restart is a waiting slot's try, when its timer fires: a new process, its handshake, and the
// slot serves again, or waits for the next try, or is given up.
func (a *Aggregator) restart(sl *slot) {
	r := &a.roster
	r.mu.Lock()
	if r.closed || r.slots[sl.key] != sl || sl.state != waiting {
		r.mu.Unlock()
		return // a reload took it over meanwhile
	}
	gen, ok := a.claim(sl)
	if !ok {
		r.mu.Unlock()
		return
	}
	defer a.starts.Done()
	cfg, params, try, prev := sl.cfg, r.params, sl.tries, sl.prev
	r.mu.Unlock()
	if prev != nil {
		<-prev.stopped // never two processes of a key at once
	}
	a.log.Debug("restarting", "server", sl.key, "try", try, "of", a.opts.MaxRestarts)
	res := a.start(sl, gen, cfg, params)
	if errors.Is(res.err, errReplaced) || errors.Is(res.err, errShuttingDown) {
		return // a reload took over, or the aggregator stops: they say what happens
	}
	if res.err == nil {
		a.report("warning", fmt.Sprintf("server %q was restarted (try %d) and serves again (pid %d)", sl.key, try, res.srv.proc.PID()))
		return
	}
	r.mu.Lock()
	next, retryAt, tries := sl.state, sl.retryAt, sl.tries
	stale := r.slots[sl.key] != sl
	r.mu.Unlock()
	if !stale {
		a.auditFailed(sl.key, res.err)
	}
	switch {
	case stale:
	case next == waiting:
		a.report("warning", fmt.Sprintf("server %q: restart try %d of %d failed (next try in %v): %v",
			sl.key, try, a.opts.MaxRestarts, time.Until(retryAt).Round(time.Millisecond), res.err))
	case next == down:
		a.report("error", a.givenUp(sl.key, fmt.Sprintf("could not be restarted (%v)", res.err), tries))
	}
}

// start starts the slot sl on cfg for the start claimed as gen (a restart's try, or a reload's
// start of the key after the client's initialize): a new process, its handshake with params,
// and the slot serves. On failure the slot falls (see fell: down, or waiting for a restart's
// next try) and the result says why.
func (a *Aggregator) start(sl *slot, gen uint64, cfg config.Server, params json.RawMessage) startResult {
	began := time.Now()
	res := startResult{cfg: cfg}
	s, err := a.spawn(cfg, params)
	if err != nil {
		res.err = err
		a.roster.mu.Lock()
		if a.roster.slots[sl.key] == sl && sl.gen == gen && sl.state != serving {
			sl.proc, sl.startErr = nil, err // a drained process is retired already
			a.fallLocked(sl, failedToStart)
		}
		a.roster.mu.Unlock()
		res.took = time.Since(began)
		return res
	}
	if err := a.relaunch(sl, gen, s); err != nil {
		res.err, res.took = err, time.Since(began)
		return res
	}
	ctx, cancel := context.WithTimeout(a.closingCtx, a.opts.StartupTimeout)
	res.err = a.bringUp(ctx, s, params)
	cancel()
	res.took = time.Since(began)
	if res.err == nil {
		res.srv = s
	}
	return res
}

// bringUp performs the handshake of s, the starting process of its slot, sets up again what
// the client set up on its key, and makes the slot serve; on failure the slot falls, and the
// error says what happened to s.
func (a *Aggregator) bringUp(ctx context.Context, s *server, params json.RawMessage) error {
	if stage, err := a.handshake(ctx, s, params); err != nil {
		err = s.describe(stage, err) // before stopping it, which would change the story
		a.fell(s, failedToStart, err)
		<-s.stopped // nothing started outlives its start (Close waits for the starts)
		return err
	}
	close(s.listed)
	s.side().replay(ctx, s) // what the client set up on the key, set up again
	if err := a.served(s); err != nil {
		a.retire(s, "was not served ("+err.Error()+")", "")
		<-s.stopped
		return err
	}
	return nil
}

// hold deals with the client's request req that the process s did not take (a reload drains
// it, or it went down): it goes to the key's new process at once when there is one, waits for
// it in the table when the key is expected back (up to the start-up timeout; released by
// served, or answered by the roster when the key will not come back), and is answered with why
// otherwise. A held request the client cancels is never sent.
func (a *Aggregator) hold(req *jsonrpc.Request, s *server) {
	r := &a.roster
	r.mu.Lock()
	sl := r.slots[s.key]
	var gone string
	expected := false
	switch {
	case sl == nil || sl.state == draining && sl.removing:
		gone = fmt.Sprintf("server %q was removed from the configuration", s.key)
	case sl.state == serving && sl.proc != s:
		// The catalog it was looked up in is older than the new process.
	case sl.state == dormant || sl.back:
		if sl.state == dormant {
			a.wake(sl) // lazy.go: the request that needs it starts it
		}
		expected = true
		// Under roster.mu: the release of the key (served, fell) comes after it.
		a.inflight.hold(&call{fromID: req.ID, method: req.Method, req: req}, s.key, a.opts.StartupTimeout, a.heldTimeout)
	default:
		gone = a.unavailable(sl) // unknown.go
	}
	r.mu.Unlock()
	switch {
	case gone != "":
		a.client.answerClient(req.ID, nil, rpcError(jsonrpc.CodeInternalError, nil, "Server unavailable: %s", gone))
	case !expected:
		a.client.clientRequest(req)
	default:
		a.log.Debug("held until the server is back", "method", req.Method, "server", s.key)
	}
}

// heldTimeout answers a held call whose key did not come back within the start-up timeout,
// saying what the key is doing (unavailable).
func (a *Aggregator) heldTimeout(c *call) {
	why := fmt.Sprintf("server %q is restarting", c.key)
	a.roster.mu.Lock()
	if sl := a.roster.slots[c.key]; sl != nil && sl.state != serving {
		why = a.unavailable(sl)
	}
	a.roster.mu.Unlock()
	a.client.answerClient(c.fromID, nil, rpcError(jsonrpc.CodeInternalError, nil,
		"Server unavailable: %s; it did not come back within the start-up timeout (--startup-timeout %v): try again later", why, a.opts.StartupTimeout))
}

// clientSetup is what the client set up on the servers, to be set up again on a server's new
// process: its resource subscriptions, and the log level it asked for.
type clientSetup struct {
	mu    sync.Mutex
	subs  map[string]string // the server key of each subscribed URI
	level json.RawMessage   // the params of the client's last logging/setLevel
}

// subscribed notes a resources/subscribe (or unsubscribe) of the client for the server key.
func (cs *clientSetup) subscribed(method, uri, key string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if method == "resources/unsubscribe" {
		delete(cs.subs, uri)
		return
	}
	if cs.subs == nil {
		cs.subs = map[string]string{}
	}
	cs.subs[uri] = key
}

// holds reports whether the client subscribed to a resource of the server key.
func (cs *clientSetup) holds(key string) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, k := range cs.subs {
		if k == key {
			return true
		}
	}
	return false
}

// leveled notes the params of the client's logging/setLevel.
func (cs *clientSetup) leveled(params json.RawMessage) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.level = append(json.RawMessage(nil), params...)
}

// of is what the client set up on the key: the params of its last logging/setLevel (nil for
// none), and the URIs it subscribed to there, sorted.
func (cs *clientSetup) of(key string) (level json.RawMessage, uris []string) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for uri, k := range cs.subs {
		if k == key {
			uris = append(uris, uri)
		}
	}
	slices.Sort(uris)
	return cs.level, uris
}

// logLevel is the level of the client's last logging/setLevel; "" before any.
func (cs *clientSetup) logLevel() string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	level, _ := rawjson.StringMember(cs.level, "level")
	return level
}
