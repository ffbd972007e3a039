package shared

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/aggregator"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/child"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// One shared server process and the sessions attached to it. Each session speaks to it as to
// a process of its own. What a session writes is taken here, on the session's goroutine, as it
// is written; what the server writes is read once, here, and the process's setup in the core
// (aggregator.ProcessSessions.Route, processroute.go) hands each session its own:
//
//	a session's request        as the session made it (Attachment.Request; one written to
//	                           its input is read there): its ID and progress token are of the
//	                           session's ID space ("agg-3-", Session.IDSpace), which no other
//	                           session's requests share, and by which its answer and progress
//	                           go back to it alone; the session's in-flight table is the only
//	                           record of it (the multiplexer keeps none). A request outside
//	                           the space is refused. One during which a legacy server may ask
//	                           was written by its session once its turn came (the core's
//	                           turns.go); logging/setLevel and resources/(un)subscribe come
//	                           merged with the other sessions' by its core (processsetup.go)
//	initialize                 sent once, by the process's setup (whose answers are those to
//	                           requests of no session's space), and that answer taken by every
//	                           session (a legacy server is initialized once: only sessions
//	                           whose clients would send the same initialize share it,
//	                           daemon.find)
//	server/discover            of a server known to be legacy (a session settled it): answered
//	                           Method not found here (a server may exit on a second probe);
//	                           the sessions after are not probed (Era), but one whose
//	                           handshake began before may be
//	a session's cancellation   of a request of its own space alone
//
// A session that stops using the process cancels its requests at the server and answers the
// server's requests to it with an error itself, from its table (aggregator's endCalls); the
// multiplexer then releases what it set up and its turns (aggregator.ProcessSessions.Leave), and
// keeps the process for the others, or for the linger. A request of the session's that
// reached the server after its cancellations costs the server its work, and its answer, of no
// session's space any more, is dropped.

// proc is a shared server process.
type proc struct {
	d        *daemon
	identity string
	seen     seen            // what its server sees (identity.go)
	apart    string          // what kept it from the process of the same entry that ran when it started
	client   json.RawMessage // the initialize it was started for
	command  string
	child    *child.Process
	conn     *stdio.Conn
	// burst holds the requests relayed to the server while a write to a session's input that
	// brought several lines is taken apart (input.Write): they reach the server in one write.
	// A session's core writes one message a write there; its requests are held in conn by
	// its own client's burst (Attachment.Request).
	burst stdio.Burst

	mu        sync.Mutex
	atts      []*Attachment
	users     map[string]int              // the sessions attached or attaching, by ID (daemon.find)
	keys      []string                    // the keys sessions gave it
	sessions  *aggregator.ProcessSessions // what its sessions do on it together, in the core: its setup, its listen, their turns, where its messages go
	eraSeen   era.Era                     // what a session's handshake found (settled)
	eraKnown  bool
	decided   chan struct{} // closed once a session's handshake settled its era, or no session will (detach, abandon, exit)
	decide    sync.Once
	linger    *time.Timer // set while no session uses it
	lingerGen uint64      // which linger lingered is for
	exited    bool
	exitDesc  string
}

// request is a request a session wrote for the server.
type request struct {
	id     []byte // its ID: a string of the session's space, decoded
	method string
	params json.RawMessage // within line
	line   []byte          // as the session wrote it, with its newline: what the server gets
}

// token is r's progress token (its JSON value, nil when none): the last _meta counts, as for a
// JSON decoder.
func (r *request) token() []byte {
	// Most requests have no _meta: its key, escaped or not, is then nowhere in them (escaped,
	// any of its letters is a \u sequence), and they are not scanned.
	if !mayHaveToken(r.params) {
		return nil
	}
	var token []byte
	rawjson.Object(r.params, func(k []byte, s, e int) bool {
		if string(k) == "_meta" {
			token = nil
			if ts, te, ok := rawjson.Member(r.params[s:e], "progressToken"); ok {
				token = r.params[s+ts : s+te]
			}
		}
		return true
	})
	return token
}

// mayHaveToken says whether b may hold a progress token: whether it has the key _meta, escaped
// or not.
func mayHaveToken(b []byte) bool {
	return bytes.Contains(b, metaKey) || bytes.Contains(b, unicodeEscape)
}

// msgToken is the progress token of a request a session's core made, in parts (Request): read
// as one written to the input would be, when any part may hold one (the parts are the core's,
// whole members: none splits a key); ok is false for parts that are not one request.
func msgToken(msg [][]byte) (token []byte, ok bool) {
	if !slices.ContainsFunc(msg, mayHaveToken) {
		return nil, true
	}
	r, ok := readRequest(bytes.TrimSpace(slices.Concat(msg...)))
	return r.token(), ok
}

// jsonID is a request's ID, a string, for an answer of the multiplexer's own.
func jsonID(id string) jsonrpc.ID {
	v, _ := jsonrpc.MakeID(id) // a string: never an error
	return v
}

func newProc(d *daemon, w want) *proc {
	p := &proc{d: d, identity: w.identity, seen: w.seen, client: w.client, command: w.spec.Command, users: map[string]int{}, decided: make(chan struct{})}
	p.sessions = aggregator.NewProcessSessions(func(parts ...[]byte) { p.conn.Send(nil, parts...) }, d.log.With("server", w.key))
	return p
}

// start begins reading the child's output, with maxMessage the limit on one message.
func (p *proc) start(c *child.Process, maxMessage int) {
	p.child = c
	// Read with the limit of the session that starts it, raised for a session with a larger
	// one that joins (attach): each session holds the messages to its own (Attachment).
	p.conn = stdio.New(c.Stdout, c.Stdin, &stdio.Options{HeldBy: &p.burst, MaxMessageSize: maxMessage})
	go p.readChild()
}

// add serves a session's attachment, which reserved the process; when the process has ended
// meanwhile, or the session stopped using it, it reports false, with how.
func (p *proc) add(a *Attachment) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case a.stopped:
		return "ended with the shared process that ran it", false
	case p.exited:
		return p.exitDesc, false
	}
	a.served = true
	p.atts = append(p.atts, a)
	p.sessions.Join(a)
	if !slices.Contains(p.keys, a.key) {
		p.keys = append(p.keys, a.key)
	}
	if p.linger != nil {
		p.linger.Stop()
		p.linger = nil
		p.lingerGen++ // a linger whose timer fired already stops nothing
	}
	return "", true
}

// serves reports whether the multiplexer serves a: what the session writes is taken.
func (p *proc) serves(a *Attachment) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return a.served
}

// stop ends a session's use of the process once: a served attachment is detached, one that
// reserved the process and was never served releases its reservation.
func (p *proc) stop(a *Attachment) {
	p.mu.Lock()
	first, served := !a.stopped, a.served
	a.stopped = true
	p.mu.Unlock()
	switch {
	case served:
		p.detach(a)
	case first:
		p.abandon(a.session)
	}
}

// usedBy reports whether the session is attached to the process, or attaching.
func (p *proc) usedBy(session string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.users[session] > 0
}

// reserve notes that the session attaches to the process; detach releases it.
func (p *proc) reserve(session string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.users[session]++
}

// abandon releases a reservation whose attachment never came (the session went): a process
// no session uses then lingers.
func (p *proc) abandon(session string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.users[session]--; p.users[session] <= 0 {
		delete(p.users, session)
	}
	if len(p.atts) == 0 && len(p.users) == 0 && p.linger == nil && !p.exited {
		p.startLinger()
	}
	if p.unsettled() {
		p.decide.Do(func() { close(p.decided) })
	}
}

// unsettled reports whether the era of the process is not known and no session is left to
// settle it: a session waiting for it (daemon.attach) waits no longer. Callers hold p.mu.
func (p *proc) unsettled() bool {
	return !p.eraKnown && len(p.users) == 0
}

// ending reports whether the process is over.
func (p *proc) ending() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// modern reports whether the process speaks the modern era (its requests carry their client).
func (p *proc) modern() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.eraKnown && p.eraSeen == era.Modern
}

// fromSession takes a line the session a wrote for the server, as it is written (on the
// session's goroutine). A request is read without being decoded, and goes to the server as it
// was written. A line that is not a message is dropped, as a server would drop it: the
// session wrote it.
func (p *proc) fromSession(a *Attachment, line []byte) {
	if r, ok := readRequest(line); ok {
		p.request(a, &r)
		return
	}
	msg, err := stdio.Decode(line)
	if err != nil {
		p.d.log.Debug("dropped a line of a session's that is not a message", "server", a.key, "error", err)
		return
	}
	switch m := msg.(type) {
	case *jsonrpc.Response:
		p.clientAnswer(line)
	case *jsonrpc.Request:
		if !m.IsCall() {
			p.clientNotification(a, m, line)
			return
		}
		id, ok := m.ID.Raw().(string)
		if !ok {
			a.refuse(m.ID, a.notInSpace("ID"))
			return
		}
		p.request(a, &request{id: []byte(id), method: m.Method, params: m.Params, line: withNewline(line)})
	}
}

// readRequest reads a request line without decoding it: ok when it is a request whose ID is a
// string (as in every session's space); the request holds a copy of the line (the session's
// buffer is its own). It is returned as a value, and its members found into variables of the
// function's: a request written to the input is read so, and one the core made whose parts
// may hold a progress token (msgToken), most in the shape the core writes (readOwnRequest).
func readRequest(line []byte) (request, bool) {
	if r, ok := readOwnRequest(line); ok {
		return r, true
	}
	return readMembers(line)
}

// readMembers is readRequest for a line of any shape: member by member.
func readMembers(line []byte) (request, bool) {
	var id, method string
	var idOK, isCall bool
	ps, pe := 0, 0
	valid := rawjson.Object(line, func(k []byte, s, e int) bool {
		switch string(k) {
		case "id":
			id, idOK = rawjson.Decode(line[s:e])
			isCall = true
		case "method":
			method, _ = stdio.MethodName(line[s:e])
		case "params":
			ps, pe = s, e
		}
		return true
	})
	if !valid || !isCall || !idOK || method == "" {
		return request{}, false
	}
	r := request{id: []byte(id), method: method, line: withNewline(line)}
	r.params = r.line[ps:pe]
	return r, true
}

// The shape in which a session's core writes its requests (stdio.Request), and what a request
// with a progress token has in its params.
var (
	ownHead       = []byte(`{"jsonrpc":"2.0","id":`)
	ownMethod     = []byte(`,"method":`)
	ownParams     = []byte(`,"params":`)
	metaKey       = []byte(`_meta`)
	unicodeEscape = []byte(`\u`)
)

// readOwnRequest reads a request in the shape a session's core writes (stdio.Request):
// {"jsonrpc":"2.0","id":"ID","method":"METHOD","params":PARAMS}, its ID and method strings
// without escapes, its params (when it has any) one value that ends the object. It finds them
// by their places instead of reading every member; ok is false for any other line, which
// readRequest reads member by member.
func readOwnRequest(line []byte) (request, bool) {
	i := len(ownHead)
	if !bytes.HasPrefix(line, ownHead) {
		return request{}, false
	}
	idEnd, ok := plainString(line, i)
	if !ok || !bytes.HasPrefix(line[idEnd:], ownMethod) {
		return request{}, false
	}
	ms := idEnd + len(ownMethod)
	me, ok := plainString(line, ms)
	if !ok {
		return request{}, false
	}
	method, _ := stdio.MethodName(line[ms:me])
	ps, pe := 0, 0
	switch rest := line[me:]; {
	case string(rest) == "}":
	case bytes.HasPrefix(rest, ownParams):
		ps, pe = me+len(ownParams), len(line)-1
		if line[pe] != '}' || rawjson.SkipValue(line, ps) != pe {
			return request{}, false
		}
	default:
		return request{}, false
	}
	if method == "" || idEnd-i < 3 {
		return request{}, false
	}
	r := request{method: method, line: withNewline(line)}
	r.id, r.params = r.line[i+1:idEnd-1], r.line[ps:pe]
	return r, true
}

// plainString is the end of the JSON string that starts at b[i] (after its closing quote),
// when it has no escapes or control characters and is valid UTF-8: as encoding/json would read
// it, unchanged.
func plainString(b []byte, i int) (end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	n := bytes.IndexByte(b[i+1:], '"')
	if n < 0 {
		return 0, false
	}
	s := b[i+1 : i+1+n]
	for _, c := range s {
		if c < 0x20 || c == '\\' {
			return 0, false
		}
	}
	return i + n + 2, utf8.Valid(s)
}

// withNewline is a copy of line with its newline.
func withNewline(line []byte) []byte {
	out := make([]byte, len(line)+1)
	copy(out, line)
	out[len(line)] = '\n'
	return out
}

// request takes a session's request r for the server, written to its input; one written as
// the session was detached is dropped (detach released what the session had set up).
func (p *proc) request(a *Attachment, r *request) {
	if p.admit(a, r.id, r.method, r.token()) == goes {
		p.conn.SendHeld(nil, r.line)
	}
}

// Request takes a request of the session's as its core makes it (aggregator.Fed): held while
// held lasts, the session's client's burst, as the requests of an unshared session are held
// in their server's connection; every session's are held in the one connection, and the end
// of any burst writes them all. One made as the session was detached fails as a write to a
// closed pipe, as one written to its input does.
func (a *Attachment) Request(held *stdio.Burst, failed stdio.WriteFailure, id, method string, msg [][]byte) {
	token, ok := msgToken(msg)
	if !ok {
		a.refuse(jsonID(id), "the request does not read as one") // what the core never makes
		return
	}
	switch a.p.admit(a, []byte(id), method, token) {
	case goes:
		a.p.conn.SendHeldBy(held, failed, msg...)
	case notServed:
		if failed != nil {
			failed.WriteFailed(fmt.Errorf("write to %s: %w", a.key, io.ErrClosedPipe))
		}
	}
}

// admission is whether a session's request goes to the server (admit).
type admission int

const (
	goes         admission = iota
	answeredHere           // by the multiplexer: refused, or answered in the server's stead
	notServed              // the session no longer uses the process
)

// admit says whether a's request (its ID, method and progress token: nil for none) goes to the
// server, as the session wrote it: the session's table is the record of it, and the turns of
// the requests during which a legacy server may ask are the session's core's
// (aggregator.ProcessSessions), which wrote it once its turn came. One outside the session's
// ID space is refused, and server/discover of a legacy process answered here.
func (p *proc) admit(a *Attachment, id []byte, method string, token []byte) admission {
	if why := a.outside(id, token); why != "" {
		a.refuse(jsonID(string(id)), why)
		return answeredHere
	}
	p.mu.Lock()
	served, legacy := a.served, p.eraKnown && p.eraSeen == era.Legacy
	p.mu.Unlock()
	switch {
	case !served:
		return notServed
	case method == "server/discover" && legacy:
		a.post(&jsonrpc.Response{ID: jsonID(string(id)), Error: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "Method not found"}})
		return answeredHere
	}
	return goes
}

// outside says why a request of a's (its ID, and its progress token: nil for none) is not of
// a's ID space ("" when it is). The session's aggregator makes them so
// (aggregator.Options.IDSpace); one that did not would get what is meant for another session.
func (a *Attachment) outside(id, token []byte) string {
	if !bytes.HasPrefix(id, []byte(a.space)) {
		return a.notInSpace("ID")
	}
	if token != nil {
		if tok, _ := rawjson.Decode(token); !strings.HasPrefix(tok, a.space) {
			return a.notInSpace("progress token")
		}
	}
	return ""
}

// notInSpace says that the request's what (its ID, its progress token) is outside a's space.
func (a *Attachment) notInSpace(what string) string {
	return fmt.Sprintf("the request's %s is not of the session's ID space %q", what, a.space)
}

// refuse answers a's request id with an internal error saying why the multiplexer did not take
// it.
func (a *Attachment) refuse(id jsonrpc.ID, why string) {
	a.post(&jsonrpc.Response{ID: id, Error: &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
		Message: "Internal error: " + why + " (mcp-simple-aggregator's shared process)"}})
}

// settled takes the era a session's handshake found the process to speak (the core's probe,
// Attachment.Settled: a modern one before its handshake, a legacy one once initialize
// succeeded): the sessions that attach after it are told it (a legacy process is not probed
// again), and find and the answer to a later server/discover go by it. The first said counts.
func (p *proc) settled(e era.Era) {
	p.mu.Lock()
	if !p.eraKnown {
		p.eraSeen, p.eraKnown = e, true
	}
	p.mu.Unlock()
	p.decide.Do(func() { close(p.decided) })
}

// knownEra is the era a session's handshake found the process to speak; ok is false before one
// did.
func (p *proc) knownEra() (e era.Era, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.eraSeen, p.eraKnown
}

// clientNotification takes a session's notification for the server (line: as it wrote it);
// one written as the session was detached is dropped, as its requests are.
func (p *proc) clientNotification(a *Attachment, m *jsonrpc.Request, line []byte) {
	if !p.serves(a) {
		return
	}
	switch m.Method {
	case "notifications/cancelled":
		id, _, ok := stdio.ParseCancel(m.Params)
		if !ok {
			return
		}
		// A request of the session's own (its space), at the server or answered already (a
		// cancellation the server may ignore, "for an unknown or already-completed request"):
		// its session expects no answer ("The receiver ... SHOULD NOT send a response for the
		// cancelled request"), and its table drops one that comes. A session's request still
		// waiting for its turn was never sent, and its core sends no cancellation of it.
		if key, _ := id.Raw().(string); strings.HasPrefix(key, a.space) {
			p.conn.Send(nil, withNewline(line))
		}
		return
	}
	p.conn.Send(nil, withNewline(line))
}

// clientAnswer passes a session's answer to a request of the server's, as the session wrote
// it: the session answers only what its table holds, a request of the server's it was handed.
func (p *proc) clientAnswer(line []byte) {
	p.conn.Send(nil, withNewline(line))
}

// readChild takes what the server writes, until its output ends, and has the process's setup
// hand each session its own (aggregator.ProcessSessions.Route). While more of the server's
// messages are buffered, what the sessions write to their clients for them is held, and
// written once none is (stdio.Burst), as an unshared session's reader of the server does.
func (p *proc) readChild() {
	for {
		msg, err := p.conn.Read()
		if err != nil {
			if bad := stdio.BadLine(err); bad != nil {
				p.sessions.RouteBadLine(bad, p.conn.More())
				continue
			}
			p.sessions.Flush()
			break
		}
		p.sessions.Route(msg, p.conn.LastSize(), p.conn.More())
	}
	desc := "closed its standard output"
	select {
	case <-p.child.Exited():
		desc = p.child.ExitDescription()
		// Its last stderr lines (why it exited, often) go to the sessions before its exit:
		// Tail waits, briefly, for the last of them to be read.
		p.child.Tail()
	case <-time.After(100 * time.Millisecond): // as the aggregator's watch waits
		go p.child.Stop(2 * time.Second)
	}
	p.exit(desc)
}

// detach ends a session's use of the process: what it set up and its turns are released
// (aggregator.ProcessSessions.Leave), and the process is kept for the linger when no session is
// left. The session cancelled its requests at the server, and answered the server's requests
// to it, from its table (aggregator's endCalls, and notTaken for those that came after).
func (p *proc) detach(a *Attachment) {
	p.mu.Lock()
	i := slices.Index(p.atts, a)
	if i < 0 {
		p.mu.Unlock()
		return
	}
	a.served = false
	p.atts = slices.Delete(p.atts, i, i+1)
	p.sessions.Unroute(a) // nothing more of the server's goes to it, as it stops being served
	if p.users[a.session]--; p.users[a.session] <= 0 {
		delete(p.users, a.session)
	}
	empty := len(p.atts) == 0 && !p.exited
	if empty {
		p.startLinger()
	}
	unsettled := p.unsettled()
	p.mu.Unlock()
	if unsettled {
		p.decide.Do(func() { close(p.decided) })
	}
	p.sessions.Leave(a)
	if empty {
		p.d.log.Info("no session uses the server: it is kept for the linger", "pid", p.child.PID(), "linger", p.d.linger)
	}
}

// startLinger starts the linger. Callers hold p.mu.
func (p *proc) startLinger() {
	p.lingerGen++
	gen := p.lingerGen
	p.linger = time.AfterFunc(p.d.linger, func() { p.lingered(gen) })
}

// lingered stops the process when no session came back within the linger gen.
func (p *proc) lingered(gen uint64) {
	p.mu.Lock()
	idle := len(p.atts) == 0 && p.linger != nil && p.lingerGen == gen
	p.mu.Unlock()
	if idle {
		p.d.log.Info("stopping a server no session used for the linger", "pid", p.child.PID())
		p.child.Stop(2 * time.Second)
	}
}

// exit tells every session that the process ended (after all it wrote), and takes it out of
// the pool.
func (p *proc) exit(desc string) {
	p.mu.Lock()
	p.exited, p.exitDesc = true, desc
	p.decide.Do(func() { close(p.decided) })
	atts := p.atts
	p.atts = nil
	for _, a := range atts {
		a.served = false
	}
	if p.linger != nil {
		p.linger.Stop()
	}
	p.mu.Unlock()
	for _, a := range atts {
		// After all it handed the session (readChild is over); the session's writes fail
		// from now on (served is false), as to a process that ended.
		a.exit(desc)
		a.end()
	}
	p.sessions.Ended()
	p.conn.Close()
	p.d.gone(p)
}

// stderr passes a stderr line of the server's to every session attached.
func (p *proc) stderr(line string) {
	p.mu.Lock()
	atts := slices.Clone(p.atts)
	p.mu.Unlock()
	for _, a := range atts {
		a.stderrLine(line)
	}
}

// status says what the process is.
func (p *proc) status() ServerStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := ServerStatus{Keys: slices.Clone(p.keys), Command: p.command, PID: p.child.PID(), Sessions: len(p.atts), Lingering: p.linger != nil, Apart: p.apart}
	if p.eraKnown {
		st.Era = p.eraSeen.String()
	}
	return st
}
