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

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
)

// The forwarder: with --share, the process a client starts reads no configuration and starts
// no server. It finds (or starts) the user's shared process, hands it the session's context
// once (its serving flags, environment and directory), and copies the client's messages both
// ways; the session runs in the shared process (host.go). It reads of the messages only what
// it must keep to carry its client over a restart of the shared process: which of the
// client's requests are unanswered, and what the client set up (its initialize, log level,
// subscriptions and listens). When the shared process ends without ending the session (it
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
	f := &forwarder{o: o, sess: sess, inflight: map[string]string{}, subs: map[string][]byte{}, listens: map[string][]byte{}, replays: map[string]bool{}}
	f.cond = sync.NewCond(&f.mu)
	l, err := f.connect()
	if err != nil {
		return 0, err
	}
	releaseImage()
	go f.copyIn()
	go f.reloads()
	return f.serve(l), nil
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

	mu        sync.Mutex
	cond      *sync.Cond
	conn      io.WriteCloser // the pipe of the client's messages to the session; nil while there is none
	logConn   net.Conn       // the session's log connection
	inputDone bool           // the client's input ended
	ended     bool           // the session ended: nothing is sent any more
	outMu     sync.Mutex

	// What the client set up, kept to set it up again in another shared process.
	inflight    map[string]string // the client's unanswered requests: method by encoded ID
	initialize  []byte            // its initialize request
	initialized bool              // it sent notifications/initialized
	level       []byte            // its last logging/setLevel request
	subs        map[string][]byte // its resources/subscribe requests, by URI
	listens     map[string][]byte // its open subscriptions/listen requests, by encoded ID
	replays     map[string]bool   // the encoded IDs of the requests sent again, whose answers are not the client's
	seq         int
}

// link is a session's link to one shared process: its protocol connection (which the shared
// process counts while the session lasts, and whose end is the shared process's), its log
// connection, and the pipes of its messages (pipes_unix.go).
type link struct {
	pc, lc  net.Conn
	in, out *os.File
}

func (l link) close() {
	l.pc.Close()
	l.lc.Close()
	l.in.Close()
	l.out.Close()
}

// connect makes the session's link to the shared process (starting it when none runs): its
// log connection, then its protocol connection, whose hello gives the session's context and
// carries the shared process's ends of its pipes.
func (f *forwarder) connect() (l link, err error) {
	var id [8]byte
	_, _ = rand.Read(id[:])
	sid := hex.EncodeToString(id[:])
	in, out, theirs, err := sessionPipes()
	if err != nil {
		return l, fmt.Errorf("the session's pipes: %w", err)
	}
	defer closeFiles(theirs) // the shared process has them
	lc, _, err := f.sess.dial(hello{Protocol: protocol, Kind: kindLog, Session: sid}, nil)
	if err != nil {
		in.Close()
		out.Close()
		return l, err
	}
	pc, _, err := f.sess.dial(hello{Protocol: protocol, Kind: kindHost, Session: sid, PID: os.Getpid(),
		Config: f.o.Config, Args: f.o.Args, Named: f.o.Named, Env: f.o.Env, Dir: f.o.Dir}, theirs)
	if err != nil {
		lc.Close()
		in.Close()
		out.Close()
		return l, err
	}
	return link{pc: pc, lc: lc, in: in, out: out}, nil
}

// serve runs the session over l, and over the links to the shared processes after it, until
// the session ends; it returns the exit status.
func (f *forwarder) serve(l link) int {
	quickEnds := 0 // shared processes in a row that ended within quickEnd of the session's start in them
	for {
		began := time.Now()
		f.mu.Lock()
		f.conn, f.logConn = l.in, l.lc
		f.replay()
		if f.inputDone {
			l.in.Close()
		}
		f.cond.Broadcast()
		f.mu.Unlock()

		outDone := make(chan struct{})
		go func() {
			defer close(outDone)
			f.copyOut(l.out)
		}()
		code, exited := f.readLog(l.lc)
		if exited {
			<-outDone // the session's last answers, which the shared process wrote before its status
			f.end()
			return code
		}

		// The shared process ended without ending the session: the pipe of its messages
		// ends with it (it closes its end when it stops; a killed process's is closed by
		// its end).
		<-outDone
		l.close()
		f.mu.Lock()
		f.conn, f.logConn = nil, nil
		f.failInflight()
		done := f.inputDone
		f.mu.Unlock()
		if done {
			f.end()
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
				_, _ = io.WriteString(f.o.Stderr, l.Stderr)
			}
		}
		if err != nil {
			return 0, false
		}
	}
}

// copyIn copies the client's messages to the shared process, noting what it must keep of
// them, for the forwarder's life.
func (f *forwarder) copyIn() {
	r := bufio.NewReaderSize(f.o.Stdin, 64<<10)
	var long []byte // a line longer than the reader's buffer, gathered whole
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
		if len(line) > 0 && !f.send(line) {
			return
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

// send notes what line sets up and sends it to the current shared process, waiting for one
// while there is none; false once the session has ended.
func (f *forwarder) send(line []byte) bool {
	f.mu.Lock()
	for f.conn == nil && !f.ended {
		f.cond.Wait()
	}
	if f.ended {
		f.mu.Unlock()
		return false
	}
	f.note(line)
	conn := f.conn
	f.mu.Unlock()
	// Written without the lock, which the reader of the session's messages takes for each
	// answer: a write that waits for the session to read must not keep the session's answers
	// from being read. A failed write is the shared process's end, which serve sees: the
	// request was noted, and is answered with an error then.
	_, _ = conn.Write(line)
	return true
}

// note keeps what a client's message sets up. Callers hold f.mu.
func (f *forwarder) note(line []byte) {
	msg := bytes.TrimSpace(line)
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
		return // an answer to the server's request (or a batch, which is not kept)
	}
	m, _ := rawjson.Decode(method)
	if id == nil {
		if m == "notifications/initialized" {
			f.initialized = true
		}
		return
	}
	key := string(id)
	f.inflight[key] = m
	switch m {
	case "initialize":
		f.initialize = bytes.Clone(line)
	case "logging/setLevel":
		f.level = bytes.Clone(line)
	case "resources/subscribe":
		uri, _ := rawjson.StringMember(params, "uri")
		f.subs[uri] = bytes.Clone(line)
	case "resources/unsubscribe":
		uri, _ := rawjson.StringMember(params, "uri")
		delete(f.subs, uri)
	case "subscriptions/listen":
		f.listens[key] = bytes.Clone(line)
	}
}

// responseHead starts every answer the session writes (stdio.Response), the ID after it.
var responseHead = []byte(`{"jsonrpc":"2.0","id":`)

// copyOut copies the session's messages to the client until the connection ends, retiring
// the requests they answer, and leaving out the answers to requests sent again.
func (f *forwarder) copyOut(from io.Reader) {
	r := bufio.NewReaderSize(from, 64<<10)
	w := bufio.NewWriterSize(f.o.Stdout, 64<<10)
	atStart, skip := true, false
	for {
		part, err := r.ReadSlice('\n')
		if atStart && len(part) > 0 {
			skip = f.answered(part)
		}
		if !skip {
			_, _ = w.Write(part)
		}
		atStart = err == nil
		if r.Buffered() == 0 || err != nil {
			f.outMu.Lock()
			_ = w.Flush()
			f.outMu.Unlock()
		}
		if err != nil && err != bufio.ErrBufferFull {
			return
		}
	}
}

// answered retires the request that the message starting with head answers, if it is an
// answer; it reports whether the answer is to a request sent again (not the client's).
func (f *forwarder) answered(head []byte) bool {
	rest, ok := bytes.CutPrefix(head, responseHead)
	if !ok {
		return false
	}
	end := idEnd(rest)
	if end < 0 {
		return false
	}
	after := rest[end:]
	if !bytes.HasPrefix(after, []byte(`,"result"`)) && !bytes.HasPrefix(after, []byte(`,"error"`)) {
		return false // a request of the server's
	}
	key := string(rest[:end])
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.inflight, key)
	delete(f.listens, key)
	if f.replays[key] {
		delete(f.replays, key)
		return true
	}
	return false
}

// idEnd is the end of the JSON value (a string or a number, as IDs are) at the start of b; -1
// when b does not hold it whole.
func idEnd(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	if b[0] != '"' {
		i := 0
		for i < len(b) && (b[i] == '-' || b[i] == '+' || b[i] == '.' || b[i] == 'e' || b[i] == 'E' || (b[i] >= '0' && b[i] <= '9')) {
			i++
		}
		if i == 0 || i == len(b) {
			return -1
		}
		return i
	}
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// failInflight answers the client's requests in flight with an error: the shared process that
// ran them ended. Its listens stay open: they are sent again. Callers hold f.mu.
func (f *forwarder) failInflight() {
	f.outMu.Lock()
	defer f.outMu.Unlock()
	for id, method := range f.inflight {
		if _, listen := f.listens[id]; listen {
			continue
		}
		delete(f.inflight, id)
		msg := fmt.Sprintf("%s: the request ended with the shared process that ran it (it may or may not have been done); the session goes on in another", method)
		errObj, _ := json.Marshal(map[string]any{"code": -32603, "message": msg})
		line := append(append(append(append([]byte(nil), responseHead...), id...), `,"error":`...), errObj...)
		_, _ = f.o.Stdout.Write(append(line, "}\n"...))
	}
}

// replay sends what the client set up to a new shared process: its initialize and
// notifications/initialized, its log level and subscriptions (under IDs of the forwarder's,
// whose answers are not the client's), and its open listens (under their own IDs, which the
// client still waits on). Callers hold f.mu.
func (f *forwarder) replay() {
	again := func(line []byte) {
		f.seq++
		id := strconv.Quote("mcp-simple-aggregator/again-" + strconv.Itoa(f.seq))
		trimmed := bytes.TrimSpace(line)
		if start, end, ok := rawjson.Member(trimmed, "id"); ok {
			f.replays[id] = true
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
		f.inflight[id] = "subscriptions/listen"
		_, _ = f.conn.Write(line)
	}
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
