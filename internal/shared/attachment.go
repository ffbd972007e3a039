package shared

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/aggregator"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/child"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// An attachment is one hosted session's use of a shared server process, with no pipe or
// socket between them: the session's aggregator hands it its requests as it makes them
// (Request), which go to the server's connection as made, held for the session's client's
// burst there, and writes it the rest (Input: answers, notifications), which the process's
// multiplexer (mux.go) takes line by line as it is written; both on the writer's goroutine
// (the session's, or, for a request that waited for its turn, the one that ended the turn).
// What the server writes for the session is handed to the session's aggregator (Feed) by the
// one goroutine that reads the server for every session. A call crosses the shared process on
// two goroutines, as it crosses an unshared aggregator: the one that reads the client and the
// one that reads the server.

// Attachment is a server of a hosted session: to the session's aggregator, the server's
// process (an aggregator.Process that is Fed); to the process's multiplexer, one of the
// sessions it serves.
type Attachment struct {
	p       *proc
	key     string
	session string // the session's ID
	space   string // the session's ID space: its requests' IDs and tokens start with it
	pid     int
	login   string
	stderr  io.Writer
	prefix  string
	in      input
	// maxMessage is the session's limit on one message (--max-message-size).
	maxMessage int

	// rmu makes the session take one message at a time; recv is its aggregator's, from
	// Feed (set before the multiplexer serves the attachment, and never again); ended says
	// End was given (nothing more is).
	rmu   sync.Mutex
	recv  aggregator.Feed
	ended bool

	// Guarded by p.mu: served says the multiplexer serves it (from Feed until it is detached
	// or the process ends), stopped that the session stopped using it.
	served, stopped bool

	// The multiplexer's own answers to what the session wrote, in order (post).
	postMu  sync.Mutex
	posts   []jsonrpc.Message
	posting bool

	mu     sync.Mutex
	desc   string
	tail   []string
	exited chan struct{}
	once   sync.Once
}

// An Attachment is what the process's reader routes a session's messages to: a method it lacked
// would make Join's assertion fail quietly, and the session be routed nothing.
var _ aggregator.Member = (*Attachment)(nil)

// want is what a session's server asks the shared process for: a process of its identity,
// which it may share, or a new one.
type want struct {
	session, key string
	spec         spec
	client       json.RawMessage // the initialize the session's servers are told
	seen         seen            // what its server would see (identity.go)
	identity     string
	maxMessage   int // the session's limit on one message (--max-message-size)
}

// spec is what to run: a child.Spec, with the session's environment and directory (the
// entry's "cwd" when OwnDir, else the session's).
type spec struct {
	Command string
	Args    []string
	Env     []string
	Dir     string
	OwnDir  bool
}

// Start attaches a server of the session to the process of sp, which the shared process starts
// when none runs that this session may share: one whose entry is the same (command,
// arguments, the env the entry adds, the directory) and, for a legacy server, which was
// initialized with client. It is the session's aggregator.Starter.
func (s *Session) Start(sp child.Spec, client json.RawMessage, stderr io.Writer) (*Attachment, error) {
	ownDir := sp.Dir != ""
	if !ownDir {
		sp.Dir = s.opts.Dir // the session's own: the shared process runs elsewhere
	}
	if sp.Dir == "" {
		dir, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("the working directory: %w", err)
		}
		sp.Dir = dir
	}
	maxMessage := s.opts.MaxMessageSize
	if maxMessage <= 0 {
		maxMessage = stdio.DefaultMaxMessageSize
	}
	w := want{session: s.id, key: sp.Key, client: client, maxMessage: maxMessage,
		spec: spec{Command: sp.Command, Args: sp.Args, Env: sp.Env, Dir: sp.Dir, OwnDir: ownDir}}
	w.seen = seenBy(child.Spec{Command: sp.Command, Args: sp.Args, Env: sp.Env, Dir: sp.Dir}, ownDir)
	w.identity = w.seen.identity()
	p, joined, err := s.d.attach(w)
	if err != nil {
		return nil, err
	}
	if p.apart != "" && !joined && s.opts.Log != nil {
		s.opts.Log.Debug("the server does not share the process of another session's", "server", sp.Key, "pid", p.child.PID(), "why", p.apart)
	}
	a := &Attachment{p: p, key: sp.Key, session: s.id, space: s.space, pid: p.child.PID(), login: p.child.LoginShellPath(),
		stderr: stderr, prefix: "[" + sp.Key + "] ", maxMessage: maxMessage, exited: make(chan struct{})}
	a.in = input{a: a, to: func(line []byte) { p.fromSession(a, line) }}
	return a, nil
}

// attach finds the process a session's server may share, or starts one, and reserves it for
// the session (Feed adds the attachment, Stop before it releases it); joined says it ran
// already.
func (d *daemon) attach(w want) (p *proc, joined bool, err error) {
	d.mu.Lock()
	p = d.find(w)
	if q := d.undecided(w); p == nil && q != nil {
		// A process of the same entry, started for another client, whose era is not known yet:
		// a modern one is for every client. The probe of the session that started it says
		// (proc.settled; within its start-up, which a process of this session's own would take
		// as well), or that session's end without it.
		d.mu.Unlock()
		select {
		case <-q.decided:
		case <-time.After(decideWait):
		}
		d.mu.Lock()
		p = d.find(w)
	}
	joined = p != nil
	switch {
	case p == nil && !d.closed:
		p, err = d.spawn(w)
		if p != nil {
			p.apart = d.apartFrom(w, p)
		}
	case p == nil:
		err = errors.New("the shared process is exiting")
	}
	if p != nil {
		p.reserve(w.session) // before another attachment of the session looks (find)
	}
	if joined {
		p.conn.RaiseMaxMessageSize(w.maxMessage) // each session holds messages to its own
	}
	d.mu.Unlock()
	if p == nil {
		return nil, false, fmt.Errorf("start %q: %v", w.spec.Command, err)
	}
	if !joined && p.apart != "" {
		d.log.Info("attached to a process of its own, beside another session's of the same entry", "server", w.key, "pid", p.child.PID(), "why", p.apart)
	} else {
		d.log.Info("attached", "server", w.key, "pid", p.child.PID(), "joined", joined)
	}
	return p, joined, nil
}

// PID is the process's ID.
func (a *Attachment) PID() int { return a.pid }

// Input is where the session writes the server's messages but its requests (Request): each
// line is taken by the multiplexer as it is written.
func (a *Attachment) Input() io.WriteCloser { return &a.in }

// Feed begins handing the session the server's messages for it: from now on the multiplexer
// serves it. A process that ended meanwhile is seen to have ended.
func (a *Attachment) Feed(r aggregator.Feed) {
	a.rmu.Lock()
	a.recv = r
	a.rmu.Unlock()
	if desc, ok := a.p.add(a); !ok {
		a.exit(desc)
		a.end()
	}
}

// Deliver hands the session a message of the server's (aggregator.Member: the process's setup
// routes them); more says another message of the server's follows at once (Flush is called
// then). A request of the server's that comes once the session's use of the process ended
// (routed to it just before) is answered with an error: the server would wait for it for good.
func (a *Attachment) Deliver(msg jsonrpc.Message, more bool) {
	a.rmu.Lock()
	defer a.rmu.Unlock()
	if a.recv != nil && !a.ended {
		a.recv.Message(msg, more)
		return
	}
	if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() {
		a.Refuse(r.ID, aggregator.AskedGone())
	}
}

// Refuse answers the server's request id with the error errObj, for a session that cannot take
// it (its use of the process ending, or ended): written to the server as the multiplexer's own,
// whatever the session's connection to it is; nothing when the process ended.
func (a *Attachment) Refuse(id jsonrpc.ID, errObj json.RawMessage) {
	a.p.conn.Send(nil, stdio.Response(stdio.IDJSON(id), nil, errObj)...)
}

// Era is the era a session's handshake found the process to speak; ok is false before one did.
func (a *Attachment) Era() (era.Era, bool) { return a.p.knownEra() }

// Settled takes the era the session's handshake found the process to speak.
func (a *Attachment) Settled(e era.Era) { a.p.settled(e) }

// Sessions is what the sessions of the process do on it together, in the core.
func (a *Attachment) Sessions() *aggregator.ProcessSessions { return a.p.sessions }

// Space is the session's ID space: its requests' IDs and progress tokens begin with it.
func (a *Attachment) Space() string { return a.space }

// MaxMessageSize is the session's limit on one message: one of the server's over it reaches
// the session as too large to read (aggregator.Member).
func (a *Attachment) MaxMessageSize() int { return a.maxMessage }

// OwnsTask reports whether the session's table has the server's task id as its own. Only for
// an attachment the multiplexer serves (its recv is set).
func (a *Attachment) OwnsTask(id string) bool { return a.recv.OwnsTask(id) }

// post hands the session a message of the multiplexer's own, made on a goroutine of the
// session's (an answer to what it wrote): from a goroutine of its own, so that the session's
// write does not become its reading, in the order they were posted.
func (a *Attachment) post(msg jsonrpc.Message) {
	a.postMu.Lock()
	a.posts = append(a.posts, msg)
	start := !a.posting
	a.posting = true
	a.postMu.Unlock()
	if start {
		go a.handPosts()
	}
}

// handPosts hands the session what was posted, until nothing is left.
func (a *Attachment) handPosts() {
	for {
		a.postMu.Lock()
		if len(a.posts) == 0 {
			a.posting = false
			a.postMu.Unlock()
			return
		}
		msg := a.posts[0]
		a.posts[0] = nil
		a.posts = a.posts[1:]
		a.postMu.Unlock()
		a.rmu.Lock()
		if a.recv != nil && !a.ended {
			a.recv.Message(msg, false)
		}
		a.rmu.Unlock()
	}
}

// BadLine hands the session a line of the server's that the multiplexer could not read.
func (a *Attachment) BadLine(bad *stdio.BadLineError) {
	a.rmu.Lock()
	defer a.rmu.Unlock()
	if a.recv != nil && !a.ended {
		a.recv.BadLine(bad)
	}
}

// Flush ends the burst of messages delivered with more.
func (a *Attachment) Flush() {
	a.rmu.Lock()
	defer a.rmu.Unlock()
	if a.recv != nil && !a.ended {
		a.recv.Flush()
	}
}

// end tells the session that no message of the server's follows.
func (a *Attachment) end() {
	a.rmu.Lock()
	defer a.rmu.Unlock()
	if a.recv != nil && !a.ended {
		a.ended = true
		a.recv.End()
	}
}

// Exited is closed once the process has exited, or the session stopped using it.
func (a *Attachment) Exited() <-chan struct{} { return a.exited }

// ExitDescription says how it ended.
func (a *Attachment) ExitDescription() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.desc
}

// Tail is its last stderr lines.
func (a *Attachment) Tail() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.tail)
}

// LoginShellPath is the login shell's PATH when its command was found there.
func (a *Attachment) LoginShellPath() string { return a.login }

// Stop ends the session's use of the process: the shared process keeps it for its other
// sessions, or for the linger.
func (a *Attachment) Stop(time.Duration) {
	a.p.stop(a)
	a.exit("ended with the shared process that ran it")
	a.end()
}

// Kill stops the process for every session (its health probes failed: it is hung for all),
// and ends the session's use of it.
func (a *Attachment) Kill() {
	// Ended first: the process's exit, which follows, is this session's doing.
	a.exit("ended with the shared process that ran it")
	a.p.d.log.Info("a session found the server hung: stopping it for every session", "server", a.key, "pid", a.pid)
	go a.p.child.Stop(2 * time.Second)
	a.Stop(0)
}

// stderrLine takes a stderr line of the process's, for the session's stderr and Tail.
func (a *Attachment) stderrLine(line string) {
	a.mu.Lock()
	a.tail = append(a.tail, line)
	if len(a.tail) > child.TailLines {
		a.tail = a.tail[1:]
	}
	a.mu.Unlock()
	_, _ = io.WriteString(a.stderr, a.prefix+line+"\n")
}

// exit notes the end of the process, or of the session's use of it (the first said counts).
func (a *Attachment) exit(desc string) {
	a.once.Do(func() {
		a.mu.Lock()
		a.desc = desc
		a.mu.Unlock()
		close(a.exited)
	})
}

// input is an attachment's input: the session's lines, handed to the multiplexer as they are
// written. The session's connection writes to it one write at a time (stdio.Conn), a large
// message in several.
type input struct {
	a    *Attachment
	to   func(line []byte) // the multiplexer's (proc.fromSession)
	part []byte            // the beginning of a line whose end is to come
}

// WritesInline marks the input as a stdio.InlineWriter: the session's Send writes to it on the
// sender's goroutine.
func (in *input) WritesInline() {}

func (in *input) Write(b []byte) (int, error) {
	a := in.a
	if !a.p.serves(a) {
		return 0, fmt.Errorf("write to %s: %w", a.key, io.ErrClosedPipe)
	}
	n := len(b)
	if i := bytes.IndexByte(b, '\n'); i >= 0 && i < len(b)-1 {
		// Several lines in one write: the requests among them go to the server in one
		// write.
		a.p.burst.Hold(func() { in.lines(b) })
		return n, nil
	}
	in.lines(b)
	return n, nil
}

// lines hands the multiplexer each line that b ends, keeping the beginning of one it does not.
func (in *input) lines(b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			in.part = append(in.part, b...)
			break
		}
		line := b[:i]
		whole := len(in.part) > 0
		if whole {
			line = append(in.part, line...)
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			in.to(line)
		}
		if whole {
			in.part = in.part[:0]
			if cap(in.part) > 1<<20 {
				in.part = nil // a large message's: not kept for the small ones
			}
		}
		b = b[i+1:]
	}
}

// Close ends the session's use of the process, as Stop does.
func (in *input) Close() error {
	in.a.Stop(0)
	return nil
}

// stderrOf is where a process's stderr lines go: to every session attached to it, without the
// key child.Start puts before them (each session puts its own).
func stderrOf(p *proc, key string) io.Writer {
	prefix := "[" + key + "] "
	return writerFunc(func(b []byte) (int, error) {
		p.stderr(strings.TrimSuffix(strings.TrimPrefix(string(b), prefix), "\n"))
		return len(b), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
