package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
)

// The era of a server: each is spoken to in the era it answers the probe in (MCP 2026-07-28,
// basic/transports/stdio.mdx, "Backward Compatibility"; the rules are era.ReadDiscover and
// era.ProbeError). A server's process is probed with server/discover first, unless its key's
// last process served in the legacy era (then a restart's try, or a reload that keeps the
// entry, is one process that gets initialize at once), or it is a shared process's that
// another session found to be of the legacy era (a second probe may end a server); --debug
// says which era and why. The era settled is the process's: a shared process's is told it
// (Fed.Settled), and the sessions after take it from there (Fed.Era): the core's probe is
// the one place a server's era is learned.

// defaultProbeTimeout is how long a server is given to answer the server/discover probe.
const defaultProbeTimeout = 2 * time.Second

// settleEra decides the era of s and completes its handshake in it (serverSide.handshake). A
// process of an entry whose era is not known yet that exits on the probe is started again for
// initialize (respawn): some legacy servers exit on an unknown method ("rmcp servers exit on
// it", go-sdk issue #1177, docs/protocol-eras.md §3), and the rule asks for a fallback to
// initialize, which such a process cannot take any more. On failure it names the request that
// failed. A shared process's process is told a modern era before its handshake (sessions of
// other clients waiting to share it go on, and its requests take no turns), a legacy one once
// initialize succeeded: a probe that timed out may yet be answered (the late path), and a legacy
// era told too soon would keep the sessions after from probing a modern server.
func (a *Aggregator) settleEra(ctx context.Context, s *server, params json.RawMessage) (stage string, err error) {
	stage, err = a.settleSide(ctx, s, params)
	if err == nil {
		a.tellEra(s)
	}
	return stage, err
}

// settleSide is settleEra, but for telling a shared process's process a legacy era.
func (a *Aggregator) settleSide(ctx context.Context, s *server, params json.RawMessage) (stage string, err error) {
	known, isKnown, why := a.knownEra(s)
	if isKnown && known == era.Legacy {
		s.log.Debug("era: legacy (" + why + "; not probed)")
		a.settle(s, legacyServer{a})
		return s.side().handshake(ctx, s, params)
	}
	side, late, err := a.probe(ctx, s, params)
	defer late.drop()
	if err != nil && !isKnown && a.exitedOnProbe(s, err) {
		why := s.proc.ExitDescription()
		if err = a.respawn(s, params); err == nil {
			s.log.Debug("era: legacy (its process " + why + " on the server/discover probe; started again for initialize)")
			side = legacyServer{a}
		}
	}
	if err != nil {
		return "server/discover", err
	}
	a.settle(s, side)
	stage, err = side.handshake(ctx, s, params)
	if err != nil && late != nil {
		// It did not answer the probe in time, and refused initialize: a server that started
		// slowly (npx fetching a package, go run compiling) may have read the probe late, and a
		// go-sdk server of both eras refuses initialize after it. Its answer, if it came, says
		// what it is.
		if m := late.modern(ctx, a.opts.ProbeTimeout); m != nil {
			s.log.Debug("era: modern (it answered server/discover after the probe's timeout, and refused initialize: " + err.Error() + ")")
			a.settle(s, m)
			return m.handshake(ctx, s, params)
		}
	}
	return stage, err
}

// knownEra is the era s is known to speak without a probe, and why: its process's, when it is
// a shared process's whose era a session settled, else the era the last process of the entry
// of s served in, when one did.
func (a *Aggregator) knownEra(s *server) (e era.Era, ok bool, why string) {
	if f := s.fed(); f != nil {
		if e, ok := f.Era(); ok {
			return e, true, "the shared process's process spoke it to a session before"
		}
	}
	a.roster.mu.Lock()
	defer a.roster.mu.Unlock()
	sl := a.roster.slots[s.key]
	if sl == nil || !sl.eraKnown || !sameProcess(sl.eraOf, s.cfg) {
		return 0, false, ""
	}
	return sl.era, true, "its last process served in the legacy era"
}

// settle makes s be spoken to as side says; a shared process's process is told a modern era at
// once, before anything of the era is sent (the sessions of other clients that wait to know
// whether they may share it, daemon.attach, wait no longer).
func (a *Aggregator) settle(s *server, side serverSide) {
	s.setSide(side)
	if side.era() == era.Modern {
		a.tellEra(s)
	}
}

// tellEra tells a shared process's process the era s is spoken to in.
func (a *Aggregator) tellEra(s *server) {
	if f := s.fed(); f != nil {
		f.Settled(s.side().era())
	}
}

// probe sends s server/discover with the modern envelope made of params (the initialize the
// servers are told: serverInit), and returns the side of the era it answers in. A
// DiscoverResult listing a modern version makes it modern; a -32022 naming a modern version is
// probed again once with it; one that lists only modern versions the aggregator does not speak
// fails the start, naming them; any other error, or silence for Options.ProbeTimeout, makes it
// legacy: then late, when it was silence, waits for an answer that may still come. An error
// means s cannot be talked to at all (it exited, or closed its output, during the probe).
func (a *Aggregator) probe(ctx context.Context, s *server, params json.RawMessage) (side serverSide, late *lateProbe, err error) {
	var init struct {
		Capabilities json.RawMessage `json:"capabilities"`
		ClientInfo   json.RawMessage `json:"clientInfo"`
	}
	_ = json.Unmarshal(params, &init) // serverInit made it
	bound := min(a.opts.ProbeTimeout, a.opts.StartupTimeout)
	version := era.Latest(era.Modern)
	for try := 0; ; try++ {
		env := era.BuildEnvelope(version, init.Capabilities, init.ClientInfo)
		p := &lateProbe{a: a, s: s, caps: init.Capabilities, info: init.ClientInfo, answer: make(chan probeAnswer, 1)}
		p.c = &call{to: s, method: "server/discover", doing: "answering the server/discover probe",
			done: func(result, errObj json.RawMessage) { p.answer <- probeAnswer{result, errObj} }}
		a.sendToServer(p.c, nil, json.RawMessage(`{"_meta":{`+env+`}}`))
		timer := time.NewTimer(bound)
		var ans probeAnswer
		select {
		case ans = <-p.answer:
			timer.Stop()
		case <-timer.C:
			s.log.Debug(fmt.Sprintf("era: legacy (no answer to server/discover within %v)", bound), "probe", "server/discover")
			return legacyServer{a}, p, nil
		case <-s.readDone:
			timer.Stop()
			a.inflight.take(p.c)
			return nil, nil, errClosed
		case <-ctx.Done():
			timer.Stop()
			a.inflight.take(p.c)
			return nil, nil, ctx.Err()
		}
		if ans.errObj == nil {
			m, why := p.discovered(ans.result)
			if m == nil {
				s.log.Debug("era: legacy ("+why+")", "probe", "server/discover")
				return legacyServer{a}, nil, nil
			}
			s.log.Debug("era: modern (it answered server/discover)", "protocol", s.protocol)
			return m, nil, nil
		}
		var e jsonrpc.Error
		if json.Unmarshal(ans.errObj, &e) != nil {
			return legacyServer{a}, nil, nil
		}
		if strings.HasPrefix(e.Message, "Server unavailable: server "+strconv.Quote(s.key)+" ") {
			// The aggregator's own (serverGone): the probe could not be written, the process is
			// going away.
			return nil, nil, errClosed
		}
		retry, fail := era.ProbeError(&e)
		switch {
		case fail != nil:
			return nil, nil, fail
		case retry != "" && try == 0:
			version = retry
			continue // once, with a version it names
		}
		s.log.Debug(fmt.Sprintf("era: legacy (it answered server/discover with the error %d %q)", e.Code, e.Message), "probe", "server/discover")
		return legacyServer{a}, nil, nil
	}
}

// probeAnswer is the answer to a probe.
type probeAnswer struct{ result, errObj json.RawMessage }

// lateProbe is a probe that was not answered in time: still in the table, so that an answer
// that comes late is read (lateProbe.modern) rather than dropped, until drop.
type lateProbe struct {
	a      *Aggregator
	s      *server
	c      *call
	answer chan probeAnswer
	// caps and info are the client's, for the envelope of a modern server's requests.
	caps, info json.RawMessage
}

// discovered makes a modern side of a DiscoverResult of the probe, and sets up s from it; nil
// and why when it lists no modern version the aggregator speaks.
func (p *lateProbe) discovered(result json.RawMessage) (*modernServer, string) {
	d, why := era.ReadDiscover(result)
	if why != "" {
		return nil, why
	}
	s := p.s
	s.protocol, s.name, s.instructions, s.caps = d.Version, d.Name, d.Instructions, d.Caps
	// Tasks are an extension in the modern era, which the aggregator does not declare: a
	// modern server's legacy-looking "tasks" is not routed.
	return &modernServer{a: p.a, envelope: era.BuildEnvelope(d.Version, p.caps, p.info)}, ""
}

// modern waits up to wait for the late answer, and returns the modern side it makes; nil when
// none comes, or it is not a DiscoverResult of a modern server.
func (p *lateProbe) modern(ctx context.Context, wait time.Duration) *modernServer {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case ans := <-p.answer:
		if ans.errObj == nil {
			m, _ := p.discovered(ans.result)
			return m
		}
	case <-timer.C:
	case <-ctx.Done():
	}
	return nil
}

// drop stops waiting for a late answer (nil: there is none to wait for).
func (p *lateProbe) drop() {
	if p != nil {
		p.a.inflight.take(p.c)
	}
}

// exitedOnProbe reports whether err, from the probe of s, is s exiting on it.
func (a *Aggregator) exitedOnProbe(s *server, err error) bool {
	if !errors.Is(err, errClosed) {
		return false
	}
	select {
	case <-s.proc.Exited():
		return true
	case <-time.After(500 * time.Millisecond): // as describe waits for an exit
		return false // it closed its output and runs on: not a probe it could not take
	}
}

// respawn starts the process of s again after it exited on the probe, to be spoken to in the
// legacy era (client: the initialize it is to get).
func (a *Aggregator) respawn(s *server, client json.RawMessage) error {
	s.procMu.Lock()
	defer s.procMu.Unlock()
	select {
	case <-s.retired:
		return errClosed // it was retired meanwhile (a reload, the end): nothing to start
	default:
	}
	<-s.readDone
	s.conn.Close()
	s.proc.Stop(0)
	s.readDone = make(chan struct{})
	return a.startProcess(s, client)
}
