package shared

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// The forwarder: with --share, the process a client starts reads no configuration and starts
// no server. It finds (or starts) the user's shared process and hands it the session's context
// once (its serving flags, environment and directory) with the client's input and output; the
// session runs in the shared process (host.go), which reads the client's messages (through the
// session's journal, journal_unix.go) and writes its own to the client itself (clientout.go).
// The forwarder notes of the client's messages, from the journal, only what it must keep to
// carry its client over a restart of the shared process: what the client set up (its
// initialize, log level, subscriptions and listens) and which of its requests are unanswered,
// by the receipts the session leaves of its answers; it takes both seldom. When the shared
// process ends without ending the session (it was killed, or stopped), the requests in flight
// are answered with an error that says so, and the forwarder starts or finds another, gives it
// the session's context and what the client set up, and goes on.

// ForwardOptions are a forwarder's.
type ForwardOptions struct {
	// Options find the shared process (Executable, Version, Linger) and name the session's
	// configuration (Config, absolute).
	Options
	// Args are the serving flags the session runs with (files as absolute paths); Named the
	// configuration file as the command line names it; Env the session's environment; Dir
	// its working directory.
	Args  []string
	Named string
	Env   []string
	Dir   string
	// Stdin and Stdout are the client's; Stderr is where the session's log goes.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Reload asks the session to reload its configuration (SIGHUP), each time it receives.
	Reload <-chan os.Signal
}

// Forward serves the client of o through the user's shared process until the session ends,
// and returns its exit status (as an unshared session's would be). It returns an error, with
// nothing read from the client, when no shared process can be had: the caller then serves
// unshared.
func Forward(o ForwardOptions) (int, error) {
	sess, err := Join(o.Options)
	if err != nil {
		return 0, err
	}
	f := newForwarder(o, sess)
	out, copyOut, err := clientOutput(o.Stdin, o.Stdout, o.Stderr)
	if err != nil {
		return 0, fmt.Errorf("the client's output: %w", err)
	}
	f.out = out
	if copyOut != nil {
		f.copied = make(chan struct{})
		go func() {
			defer close(f.copied)
			copyOut()
		}()
	}
	in, copyIn, err := clientInput(o.Stdin, o.Stdout, o.Stderr)
	if err != nil {
		f.closeOutput()
		return 0, fmt.Errorf("the client's input: %w", err)
	}
	f.in = in
	restore := func() {}
	if copyIn == nil {
		// The shared process reads it in blocking mode, which it puts it in: the mode the
		// client gave it is given back.
		restore = restoreMode(in)
	}
	l, err := f.connect()
	if err != nil {
		f.closeOutput() // as it was, for the unshared session
		if copyIn != nil {
			in.Close() // nothing was copied to it: stdin is the unshared session's, unread
		}
		restore()
		return 0, err // (a shared process that got the hello never reads stdin: connect)
	}
	releaseImage()
	if copyIn != nil {
		go copyIn()
	}
	defer restore()
	go f.reloads()
	return f.serve(l), nil
}

func newForwarder(o ForwardOptions, sess *Session) *forwarder {
	f := &forwarder{o: o, sess: sess, inflight: map[string]string{}, subs: map[string][]byte{}, listens: map[string][]byte{}, setting: map[string]setting{}}
	return f
}

// closeOutput ends the client's output once the session has ended: when the forwarder copies
// it to the client, what is in the pipe is copied first; when it is the client's stdout, it is
// put back in blocking mode (the shared process made it non-blocking, and whatever shares it
// after the forwarder, a shell or the next command of a script, expects it blocking).
func (f *forwarder) closeOutput() {
	if f.copied != nil {
		f.out.Close()
		<-f.copied
		return
	}
	blocking(f.out)
}

// reloads passes each reload asked for on to the session.
func (f *forwarder) reloads() {
	line, _ := json.Marshal(logLine{Reload: true})
	for range f.o.Reload {
		f.mu.Lock()
		if f.logConn != nil {
			_, _ = f.logConn.Write(append(line, '\n'))
		}
		f.mu.Unlock()
	}
}

// forwarder is one client's link to the shared process.
type forwarder struct {
	o    ForwardOptions
	sess *Session

	// out is the client's output, which each shared process the session runs in is given
	// (clientOutput); copied is closed once the forwarder's copy of it ends, when it copies.
	// in is the client's input, which each shared process reads (clientInput).
	out    *os.File
	copied chan struct{}
	in     *os.File
	// abandoned are the pipes of what comes before the client's input for the shared processes
	// that did not say in time that they took the session (connect), open for the forwarder's
	// life.
	abandoned []*os.File

	mu       sync.Mutex
	logConn  net.Conn     // the session's log connection
	receipts *receiptsEnd // the end of the session's receipts (clientout.go); nil while there is none
	journal  *journal     // what the shared process read of the client's input, and its receipts; nil while there is none
	taken    uint64       // how far the forwarder took the journal's input
	rtaken   uint64       // and its receipts
	partial  []byte       // a line of the client's taken in part

	// What the client set up, kept to set it up again in another shared process.
	inflight    map[string]string // the client's unanswered requests: method by encoded ID
	initialize  []byte            // its initialize request
	initialized bool              // it sent notifications/initialized
	level       []byte            // its last logging/setLevel request that succeeded
	subs        map[string][]byte // its resources/subscribe requests that succeeded, by URI
	listens     map[string][]byte // its open subscriptions/listen requests, by encoded ID
	seq         int               // the requests sent again
	// setting are its setLevel and subscribe requests in flight, by encoded ID: kept once
	// their receipt says they succeeded (a refused one sets up nothing; one in flight when a
	// shared process ends is answered with an error). levelSeq orders the levels kept.
	setting  map[string]setting
	levels   int // the setLevel requests sent
	levelSeq int // which of them is level

	// The receipts taken: open says that the client's output stops in the middle of a line;
	// carry is a receipt taken in part; recs are the receipts taken, taken in once the input is.
	open  bool
	carry []byte
	recs  []byte
}

// link is a session's link to one shared process: its protocol connection (which the shared
// process counts while the session lasts, and whose end is the shared process's), its log
// connection, the pipe of what the forwarder gives the session before the client's input (what
// the client set up, sent again), the end of the session's receipts and its journal
// (pipes_unix.go, journal_unix.go).
type link struct {
	pc, lc   net.Conn
	before   *os.File
	receipts *receiptsEnd
	journal  *journal
}

func (l link) close() {
	l.pc.Close()
	l.lc.Close()
	l.before.Close()
	l.receipts.Close()
	l.journal.release()
}

// connect makes the session's link to the shared process (starting it when none runs): its
// log connection, then its protocol connection, whose hello gives the session's context and
// carries the shared process's ends of its pipes and the client's output.
func (f *forwarder) connect() (l link, err error) {
	var id [8]byte
	_, _ = rand.Read(id[:])
	sid := hex.EncodeToString(id[:])
	before, receipts, j, theirs, err := sessionPipes(f.out, f.in, f.sess.place.dir)
	if err != nil {
		return l, fmt.Errorf("the session's pipes: %w", err)
	}
	defer closeFiles(theirs) // the shared process has them
	fail := func() {
		if before != nil {
			before.Close()
		}
		receipts.Close()
		j.release()
	}
	lc, _, err := f.sess.dial(hello{Protocol: protocol, Kind: kindLog, Session: sid}, nil)
	if err != nil {
		fail()
		return l, err
	}
	pc, r, err := f.sess.dial(hello{Protocol: protocol, Kind: kindHost, Session: sid, PID: os.Getpid(),
		Config: f.o.Config, Args: f.o.Args, Named: f.o.Named, Env: f.o.Env, Dir: f.o.Dir}, theirs)
	if err == nil {
		err = taken(pc, r)
	}
	if err != nil {
		if pc != nil {
			// A shared process that got the hello and did not say that it took the session
			// in time may host it all the same: its session reads what comes before the
			// client's input first, which is left open, so that it never reads the client,
			// whom another process serves now (an unshared session, or the next shared process).
			f.abandoned = append(f.abandoned, before)
			pc.Close()
			before = nil
		}
		lc.Close()
		fail()
		return l, err
	}
	return link{pc: pc, lc: lc, before: before, receipts: receipts, journal: j}, nil
}

// taken waits for the shared process to say that it hosts the session (host.go): a connection
// that the socket of a shared process that is ending took, which nothing will serve, ends
// instead.
func taken(pc net.Conn, r *bufio.Reader) error {
	_ = pc.SetReadDeadline(time.Now().Add(logConnWait + 5*time.Second))
	line, err := r.ReadBytes('\n')
	_ = pc.SetReadDeadline(time.Time{})
	if err != nil {
		return fmt.Errorf("the shared process did not take the session: %w", err)
	}
	var rep reply
	if err := json.Unmarshal(line, &rep); err != nil {
		return fmt.Errorf("the shared process did not take the session: %w", err)
	}
	if rep.Error != "" {
		return fmt.Errorf("the shared process did not take the session: %s", rep.Error)
	}
	return nil
}

// serve runs the session over l, and over the links to the shared processes after it, until
// the session ends; it returns the exit status.
func (f *forwarder) serve(l link) int {
	quickEnds := 0 // shared processes in a row that ended within quickEnd of the session's start in them
	for {
		began := time.Now()
		f.mu.Lock()
		f.logConn, f.receipts, f.journal, f.taken, f.rtaken = l.lc, l.receipts, l.journal, 0, 0
		f.carry = f.carry[:0]
		before := f.replay()
		f.mu.Unlock()
		// What comes before the client's input is written without the lock, which the
		// shared process's end (below) takes: the pipe holds what the client set up, but a
		// line of the client's taken in part may be larger.
		go func(w *os.File, before []byte) {
			_, _ = w.Write(before)
			w.Close()
		}(l.before, before)

		code, exited := f.readLog(l.lc)
		if exited { // after the session's last messages, which the shared process wrote first
			l.close()
			f.closeOutput()
			return code
		}

		// The shared process ended without ending the session. Its receipts end once it can
		// write no more to the client (it closes the client's output first when it stops; a
		// killed process's are closed by its end): what they say is then all it answered, and
		// what its journal holds all it read of the client's input.
		l.pc.Close()
		f.mu.Lock()
		f.drain(true)
		l.close()
		f.logConn, f.receipts, f.journal = nil, nil, nil
		f.failInflight()
		f.mu.Unlock()
		if time.Since(began) < quickEnd {
			quickEnds++
		} else {
			quickEnds = 0
		}
		if quickEnds == maxQuickEnds {
			fmt.Fprintf(f.o.Stderr, "mcp-simple-aggregator: error: the shared process ended %d times in a row within %v of the session's start in it: the session ends (its log is %s)\n", maxQuickEnds, quickEnd, f.sess.place.log)
			f.closeOutput()
			return 1
		}
		fmt.Fprintln(f.o.Stderr, "mcp-simple-aggregator: warning: the shared process ended; the session goes on in another")
		var err error
		for try := 0; ; try++ {
			if l, err = f.connect(); err == nil {
				break
			}
			if try == 2 {
				fmt.Fprintf(f.o.Stderr, "mcp-simple-aggregator: error: the shared process cannot be started again: %v\n", err)
				f.closeOutput()
				return 1
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// A session whose shared process ends maxQuickEnds times in a row, each within quickEnd of its
// start there, ends: something in it, or in the shared process, does not let it run.
const (
	quickEnd     = time.Second
	maxQuickEnds = 5
)

// readLog copies the session's log to stderr until its exit status (exited) or the end of the
// connection.
func (f *forwarder) readLog(lc net.Conn) (code int, exited bool) {
	r := bufio.NewReaderSize(lc, 16<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var l logLine
			if json.Unmarshal(line, &l) == nil {
				if l.Exit != nil {
					return *l.Exit, true
				}
				if l.Drain { // take the journal and the receipts
					f.mu.Lock()
					f.drain(false)
					if l.Wait { // the journal is full: the session waits for room
						drained, _ := json.Marshal(logLine{Drained: true})
						_, _ = lc.Write(append(drained, '\n'))
					}
					f.mu.Unlock()
				}
				_, _ = io.WriteString(f.o.Stderr, l.Stderr)
			}
		}
		if err != nil {
			return 0, false
		}
	}
}

// takeIn takes in what the session read of the client's input, noting each line once whole.
// Callers hold f.mu.
func (f *forwarder) takeIn(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			f.partial = append(f.partial, b...)
			return
		}
		line := b[:i+1]
		if len(f.partial) > 0 {
			line = append(f.partial, line...)
		}
		f.note(line)
		b = b[i+1:]
		f.partial = f.partial[:0]
		if cap(f.partial) > 64<<10 {
			f.partial = nil
		}
	}
}

// note keeps what a client's line sets up, and the requests it makes. Callers hold f.mu.
func (f *forwarder) note(line []byte) {
	msg := bytes.TrimSpace(line)
	if len(msg) > 0 && msg[0] == '[' {
		// A batch (2025-03-26 and before: "MAY be batched"): each of its messages is noted
		// as sent alone, when the session takes it apart; their answers come back in one
		// array, whose receipt names each (clientOut.batchIDs). Any other batch the session
		// answers with one error, with no ID, and none of its messages does anything.
		if json.Valid(msg) && f.takesBatches() {
			rawjson.Array(msg, func(s, e int) bool {
				f.noteMessage(msg[s:e])
				return true
			})
		}
		return
	}
	f.noteMessage(msg)
}

// takesBatches reports whether the session takes the client's batches apart, as it does
// (the aggregator's session.batches) once its client initialized with a protocol version
// before 2025-06-18, which removed them: one the aggregator speaks, and so answers with.
// Callers hold f.mu.
func (f *forwarder) takesBatches() bool {
	if f.initialize == nil {
		return false
	}
	line := bytes.TrimSpace(f.initialize)
	ps, pe, ok := rawjson.Member(line, "params")
	if !ok {
		return false
	}
	v, _ := rawjson.StringMember(line[ps:pe], "protocolVersion")
	return era.Speaks(v) && era.Batches(v)
}

// noteMessage is note for one message (msg, without its newline).
func (f *forwarder) noteMessage(msg []byte) {
	var id, method, params []byte
	rawjson.Object(msg, func(key []byte, start, end int) bool {
		switch string(key) {
		case "id":
			id = msg[start:end]
		case "method":
			method = msg[start:end]
		case "params":
			params = msg[start:end]
		}
		return true
	})
	if method == nil {
		return // an answer to the server's request
	}
	m, _ := stdio.MethodName(method) // the common names without allocating
	if id == nil {
		switch m {
		case "notifications/initialized":
			f.initialized = true
		case "notifications/cancelled":
			// "The receiver ... SHOULD NOT send a response for the cancelled request", and the
			// session sends none (its table drops the request; a listen ends without one): the
			// forwarder waits for no receipt of it, answers it with no error should the shared
			// process end, and sends a listen cancelled to no new one. A setLevel or subscribe
			// cancelled is kept, as the session keeps it (its answer, if one comes, is not
			// waited for).
			if start, end, ok := rawjson.Member(params, "requestId"); ok {
				f.answered(keyOf(params[start:end]), true)
			}
		}
		return
	}
	key := idKey(id)
	f.inflight[key] = m
	switch m {
	case "initialize":
		f.initialize = withNewline(msg)
	case "logging/setLevel":
		f.levels++
		f.setting[key] = setting{line: withNewline(msg), seq: f.levels}
	case "resources/subscribe":
		uri, _ := rawjson.StringMember(params, "uri")
		f.setting[key] = setting{line: withNewline(msg), uri: uri, sub: true}
	case "resources/unsubscribe":
		uri, _ := rawjson.StringMember(params, "uri")
		delete(f.subs, uri)
		for k, st := range f.setting {
			if st.sub && st.uri == uri {
				delete(f.setting, k) // a subscribe sent before it, not yet answered
			}
		}
	case "subscriptions/listen":
		f.listens[key] = withNewline(msg)
	}
}

// setting is a request of the client's that sets up what a new shared process is given again:
// a logging/setLevel (seq orders them), or a resources/subscribe (sub) of a URI.
type setting struct {
	line []byte
	seq  int
	uri  string
	sub  bool
}

// answered takes the receipt of the answer to the request of ID key (idKey, as bytes): ok when
// it succeeded. A setLevel or subscribe that succeeded is kept, to be sent again to a new
// shared process. It makes no string of key (a receipt is taken for every answer). Callers
// hold f.mu.
func (f *forwarder) answered(key []byte, ok bool) {
	if st, found := f.setting[string(key)]; found && ok {
		switch {
		case st.sub:
			f.subs[st.uri] = st.line
		case st.seq > f.levelSeq: // answers may come out of order: the last sent counts
			f.level, f.levelSeq = st.line, st.seq
		}
	}
	delete(f.inflight, string(key)) // without making a string of key
	delete(f.listens, string(key))
	delete(f.setting, string(key))
}

// drain takes in what the session read of the client's input and the receipts it wrote (its
// journal): what it published of them, or, with ended (the shared process is gone), once the
// receipts' end says that it writes no more, all it wrote and read, with what it had not
// published. The receipts are taken first and taken in last: a receipt names a request that
// the input held before. Callers hold f.mu.
func (f *forwarder) drain(ended bool) {
	if f.journal == nil {
		return
	}
	if ended && f.receipts.wait() != nil {
		// The shared process may still write (its end unknown): what it published is as much
		// as can be known, and what it did not publish is left to it.
		ended = false
	}
	f.recs = f.recs[:0]
	f.rtaken = f.journal.receipts.take(f.rtaken, ended, func(b []byte) { f.recs = append(f.recs, b...) })
	f.taken = f.journal.input.take(f.taken, ended, f.takeIn)
	f.receipted(f.recs)
	if cap(f.recs) > receiptsSize {
		f.recs = nil
	}
}

// receipted takes in the receipts in recs: an answered request is no longer in flight.
func (f *forwarder) receipted(recs []byte) {
	f.carry = append(f.carry, recs...)
	rest := f.carry
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			break
		}
		rec := rest[:i]
		rest = rest[i+1:]
		switch string(rec) {
		case "+":
			f.open = true
		case "-":
			f.open = false
		case "":
		default:
			// The ID of an answer; "!" before it: an error (clientOut.receipt).
			f.open = false
			failed := rec[0] == '!'
			if failed {
				rec = rec[1:]
			}
			f.answered(keyOf(rec), !failed)
		}
	}
	f.carry = append(f.carry[:0], rest...)
}

// idKey is the key of a request's ID in the forwarder's maps: the ID as the session writes it
// in its answer (stdio.EncodeID), which may not be the client's spelling of it ("1.0", "1e2",
// "\u0061", a string with "<"). The usual IDs, small integers and plain strings, are their own
// key. The key is also valid JSON for the same ID, which failInflight answers under.
func idKey(id []byte) string {
	if plainID(id) {
		return string(id)
	}
	var v any // as the session's decoder reads it: a number is a float64
	if json.Unmarshal(id, &v) != nil {
		return string(id)
	}
	jid, err := jsonrpc.MakeID(v)
	if err != nil {
		return string(id)
	}
	enc, err := stdio.EncodeID(jid)
	if err != nil {
		return string(id)
	}
	return string(enc)
}

// keyOf is idKey(id) as bytes: id itself when it is its own key, as the usual IDs are.
func keyOf(id []byte) []byte {
	if plainID(id) {
		return id
	}
	return []byte(idKey(id))
}

// plainID says whether id is written as the session writes it: digits with no fraction or
// exponent, or a string of printable ASCII without escapes or what encoding/json escapes.
func plainID(id []byte) bool {
	if len(id) == 0 {
		return false
	}
	if id[0] == '"' {
		if len(id) < 2 || id[len(id)-1] != '"' {
			return false
		}
		for _, c := range id[1 : len(id)-1] {
			if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return false
			}
		}
		return true
	}
	digits := id
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(digits) > 1) {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// failInflight answers the client's requests in flight with an error: the shared process that
// ran them ended. Its listens stay open: they are sent again. A line it left unfinished is
// ended first, so that what follows reaches the client whole (the unfinished one is lost).
// Callers hold f.mu.
func (f *forwarder) failInflight() {
	var b []byte
	if f.open {
		b = append(b, '\n')
		f.open = false
	}
	for id, method := range f.inflight {
		if _, listen := f.listens[id]; listen {
			continue
		}
		f.answered([]byte(id), false) // answered here, with an error
		msg := fmt.Sprintf("%s: the request ended with the shared process that ran it (it may or may not have been done); the session goes on in another", method)
		errObj, _ := json.Marshal(map[string]any{"code": -32603, "message": msg})
		b = append(append(append(append(b, responseHead...), id...), `,"error":`...), errObj...)
		b = append(b, "}\n"...)
	}
	if len(b) > 0 {
		blocking(f.out) // the shared process made it non-blocking
		_, _ = f.out.Write(b)
	}
}

// replay is what the session is given before the client's input in a new shared process: what
// the client set up (its initialize and notifications/initialized, its log level and
// subscriptions, under IDs of the forwarder's, whose answers the session leaves out: clientOut;
// its open listens, under their own IDs, which the client still waits on), and then the part
// of a line that the shared process that ended read (the rest is still in the client's input).
// Callers hold f.mu.
func (f *forwarder) replay() []byte {
	var b []byte
	again := func(line []byte) {
		f.seq++
		id := strconv.Quote(againID + strconv.Itoa(f.seq))
		trimmed := bytes.TrimSpace(line)
		if start, end, ok := rawjson.Member(trimmed, "id"); ok {
			b = append(append(b, rawjson.Replace(trimmed, start, end, []byte(id))...), '\n')
		}
	}
	if f.initialize != nil {
		again(f.initialize)
		if f.initialized {
			b = append(b, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"...)
		}
	}
	if f.level != nil {
		again(f.level)
	}
	for _, line := range f.subs {
		again(line)
	}
	for id, line := range f.listens {
		f.inflight[id] = "subscriptions/listen"
		b = append(b, line...)
	}
	return append(b, f.partial...)
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
