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
// no server. It finds (or starts) the user's shared process, hands it the session's context
// once (its serving flags, environment and directory), and copies the client's messages both
// to it; the session runs in the shared process (host.go), which writes the session's messages
// to the client itself (clientout.go). The forwarder reads of the client's messages only what
// it must keep to carry its client over a restart of the shared process: what the client set
// up (its initialize, log level, subscriptions and listens) and which of its requests are
// unanswered, by the receipts the session leaves of its answers, which the forwarder reads
// seldom. When the shared process ends without ending the session (it
// was killed, or stopped), the requests in flight are answered with an error that says so,
// and the forwarder starts or finds another, gives it the session's context and what the
// client set up, and goes on.

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
	l, err := f.connect()
	if err != nil {
		f.closeOutput() // as it was, for the unshared session
		return 0, err
	}
	releaseImage()
	go f.copyIn()
	go f.reloads()
	return f.serve(l), nil
}

func newForwarder(o ForwardOptions, sess *Session) *forwarder {
	f := &forwarder{o: o, sess: sess, inflight: map[string]string{}, subs: map[string][]byte{}, listens: map[string][]byte{}, setting: map[string]setting{}}
	f.cond = sync.NewCond(&f.mu)
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
	out    *os.File
	copied chan struct{}

	mu        sync.Mutex
	cond      *sync.Cond
	conn      io.WriteCloser // the pipe of the client's messages to the session; nil while there is none
	logConn   net.Conn       // the session's log connection
	receipts  *receiptsEnd   // the session's receipts (clientout.go); nil while there is none
	inputDone bool           // the client's input ended
	ended     bool           // the session ended: nothing is sent any more

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

	// The receipts read: owed is what the receipts of the requests in flight may hold, loose
	// what those of the other lines sent since the last reading may (the session answers a
	// line it cannot read); open says that the client's output stops in the middle of a line;
	// carry is a receipt read in part.
	owed, loose int
	open        bool
	carry       []byte
	rbuf        []byte
}

// link is a session's link to one shared process: its protocol connection (which the shared
// process counts while the session lasts, and whose end is the shared process's), its log
// connection, the pipe of the client's messages and that of the session's receipts
// (pipes_unix.go).
type link struct {
	pc, lc   net.Conn
	in       *os.File
	receipts *receiptsEnd
}

func (l link) close() {
	l.pc.Close()
	l.lc.Close()
	l.in.Close()
	l.receipts.Close()
}

// connect makes the session's link to the shared process (starting it when none runs): its
// log connection, then its protocol connection, whose hello gives the session's context and
// carries the shared process's ends of its pipes and the client's output.
func (f *forwarder) connect() (l link, err error) {
	var id [8]byte
	_, _ = rand.Read(id[:])
	sid := hex.EncodeToString(id[:])
	in, receipts, theirs, err := sessionPipes(f.out)
	if err != nil {
		return l, fmt.Errorf("the session's pipes: %w", err)
	}
	defer closeFiles(theirs) // the shared process has them
	lc, _, err := f.sess.dial(hello{Protocol: protocol, Kind: kindLog, Session: sid}, nil)
	if err != nil {
		in.Close()
		receipts.Close()
		return l, err
	}
	pc, r, err := f.sess.dial(hello{Protocol: protocol, Kind: kindHost, Session: sid, PID: os.Getpid(),
		Config: f.o.Config, Args: f.o.Args, Named: f.o.Named, Env: f.o.Env, Dir: f.o.Dir}, theirs)
	if err == nil {
		err = taken(pc, r)
	}
	if err != nil {
		if pc != nil {
			pc.Close()
		}
		lc.Close()
		in.Close()
		receipts.Close()
		return l, err
	}
	return link{pc: pc, lc: lc, in: in, receipts: receipts}, nil
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
		f.conn, f.logConn, f.receipts = l.in, l.lc, l.receipts
		f.carry = f.carry[:0]
		f.replay()
		if f.inputDone {
			l.in.Close()
		}
		f.cond.Broadcast()
		f.mu.Unlock()

		code, exited := f.readLog(l.lc)
		if exited { // after the session's last messages, which the shared process wrote first
			f.end()
			l.close()
			f.closeOutput()
			return code
		}

		// The shared process ended without ending the session. Its receipts end once it can
		// write no more to the client (it closes the client's output first when it stops; a
		// killed process's are closed by its end): what they say is then all it answered.
		l.pc.Close()
		l.in.Close()
		f.mu.Lock()
		f.drain(l.receipts, true)
		l.close()
		f.conn, f.logConn, f.receipts = nil, nil, nil
		f.failInflight()
		done := f.inputDone
		f.mu.Unlock()
		if done {
			f.end()
			f.closeOutput()
			return 0
		}
		if time.Since(began) < quickEnd {
			quickEnds++
		} else {
			quickEnds = 0
		}
		if quickEnds == maxQuickEnds {
			fmt.Fprintf(f.o.Stderr, "mcp-simple-aggregator: error: the shared process ended %d times in a row within %v of the session's start in it: the session ends (its log is %s)\n", maxQuickEnds, quickEnd, f.sess.place.log)
			f.end()
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
				f.end()
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

// end ends the session: nothing more is sent, and the client's reader stops waiting.
func (f *forwarder) end() {
	f.mu.Lock()
	f.ended = true
	f.cond.Broadcast()
	f.mu.Unlock()
}

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
				if l.Drain { // the receipts' pipe is full: read what it holds
					f.mu.Lock()
					f.drain(f.receipts, false)
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

// copyIn copies the client's messages to the shared process, noting what it must keep of
// them, for the forwarder's life. The whole lines one read brings are sent in one write, as a
// relay writes what it reads. The client's input is read as it is passed, blocking as a rule,
// and then yielding now and then (stdio.Yielding says why).
func (f *forwarder) copyIn() {
	r := bufio.NewReaderSize(stdio.Yielding(f.o.Stdin), 64<<10)
	var long []byte  // a line longer than the reader's buffer, gathered whole
	var batch []byte // lines read, while another whole line is read already
	for {
		part, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, part...)
			continue
		}
		line := part
		if long != nil {
			line = append(long, part...)
			long = nil
		}
		if err == nil && lineBuffered(r) {
			batch = append(batch, line...)
			continue
		}
		if len(batch) > 0 {
			line = append(batch, line...)
		}
		if len(line) > 0 && !f.send(line) {
			return
		}
		batch = batch[:0]
		if cap(batch) > 1<<20 {
			batch = nil
		}
		if err != nil { // the end of the client's input
			f.mu.Lock()
			f.inputDone = true
			if f.conn != nil {
				f.conn.Close() // the session sees the end of its input
			}
			f.mu.Unlock()
			return
		}
	}
}

// lineBuffered says whether r holds a whole line already.
func lineBuffered(r *bufio.Reader) bool {
	b, _ := r.Peek(r.Buffered())
	return bytes.IndexByte(b, '\n') >= 0
}

// send notes what the lines set up and sends them to the current shared process, waiting for
// one while there is none; false once the session has ended.
func (f *forwarder) send(lines []byte) bool {
	f.mu.Lock()
	for f.conn == nil && !f.ended {
		f.cond.Wait()
	}
	if f.ended {
		f.mu.Unlock()
		return false
	}
	for rest := lines; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line = rest[:i+1]
		}
		rest = rest[len(line):]
		f.note(line)
	}
	if f.owed+f.loose > drainAt {
		f.drain(f.receipts, false)
	}
	conn := f.conn
	f.mu.Unlock()
	// Written without the lock, which the shared process's end (serve) takes: a write that
	// waits for the session to read must not keep the forwarder from seeing that end. A failed
	// write is the shared process's end, which serve sees: the requests were noted, and are
	// answered with an error then.
	_, _ = conn.Write(lines)
	return true
}

// note keeps what a client's line sets up, and the requests it makes. Callers hold f.mu.
func (f *forwarder) note(line []byte) {
	f.loose += looseReceipt
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
				f.answered(idKey(params[start:end]), true)
			}
		}
		return
	}
	key := idKey(id)
	if _, ok := f.inflight[key]; !ok {
		f.owed += receiptSize(key)
	}
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

// answered takes the receipt of the answer to the request of ID key: ok when it succeeded. A
// setLevel or subscribe that succeeded is kept, to be sent again to a new shared process.
// Callers hold f.mu.
func (f *forwarder) answered(key string, ok bool) {
	if st, found := f.setting[key]; found && ok {
		switch {
		case st.sub:
			f.subs[st.uri] = st.line
		case st.seq > f.levelSeq: // answers may come out of order: the last sent counts
			f.level, f.levelSeq = st.line, st.seq
		}
	}
	f.retire(key)
}

// drainAt is what the receipts may hold (owed and loose) before the forwarder reads them, well
// within what their pipe holds (64 KiB; macOS starts a pipe at 16 KiB and grows it): reading
// them seldom costs the forwarder nothing per message. What the pipe does not take waits in the
// shared process (clientOut.receipts), which never waits for the forwarder.
const drainAt = 16 << 10

// receiptSize is the most the receipt of the answer to the request of ID key may take: the
// answer writes the ID again, which can be longer (a string's "<" is "\u003c" there), with "!"
// before it for an error.
func receiptSize(key string) int { return 6*len(key) + 3 }

// looseReceipt is the most the receipt of an answer to a line the session could not read may
// take ("null", or a short ID it found).
const looseReceipt = 24

// drain reads the receipts the session wrote: those the pipe holds (one non-blocking read),
// or, with wait, all it will write, to their end. Callers hold f.mu.
func (f *forwarder) drain(r *receiptsEnd, wait bool) {
	if r == nil {
		return
	}
	if f.rbuf == nil {
		f.rbuf = make([]byte, 64<<10)
	}
	for {
		n, err := r.read(f.rbuf, wait)
		f.receipted(f.rbuf[:n])
		if err != nil || (!wait && n < len(f.rbuf)) {
			f.loose = 0
			return
		}
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
			f.answered(idKey(rec), !failed)
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

// retire forgets the request of ID key: it was answered. Callers hold f.mu.
func (f *forwarder) retire(key string) {
	if _, ok := f.inflight[key]; ok {
		delete(f.inflight, key)
		f.owed -= receiptSize(key)
	}
	delete(f.listens, key)
	delete(f.setting, key)
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
		f.retire(id)
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

// replay sends what the client set up to a new shared process: its initialize and
// notifications/initialized, its log level and subscriptions (under IDs of the forwarder's,
// whose answers the session leaves out: clientOut), and its open listens (under their own IDs, which the
// client still waits on). Callers hold f.mu.
func (f *forwarder) replay() {
	again := func(line []byte) {
		f.seq++
		id := strconv.Quote(againID + strconv.Itoa(f.seq))
		trimmed := bytes.TrimSpace(line)
		if start, end, ok := rawjson.Member(trimmed, "id"); ok {
			_, _ = f.conn.Write(append(rawjson.Replace(trimmed, start, end, []byte(id)), '\n'))
		}
	}
	if f.initialize != nil {
		again(f.initialize)
		if f.initialized {
			_, _ = f.conn.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
		}
	}
	if f.level != nil {
		again(f.level)
	}
	for _, line := range f.subs {
		again(line)
	}
	for id, line := range f.listens {
		if _, ok := f.inflight[id]; !ok {
			f.owed += receiptSize(id)
		}
		f.inflight[id] = "subscriptions/listen"
		_, _ = f.conn.Write(line)
	}
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
