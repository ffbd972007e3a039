package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/child"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// childProtocolVersion is the version offered to children in initialize. Sending it makes the
// SDK start with initialize (by default it first probes with a draft-protocol request that
// some servers never answer); children may answer with any version from 2024-11-05 on.
const childProtocolVersion = "2025-11-25"

// maxBadLineWarnings is how many non-JSON-RPC lines of a child are reported.
const maxBadLineWarnings = 5

// server is one configured server: its process and its MCP session.
type server struct {
	key     string
	command string
	proc    *child.Process
	conn    *childConn
	session *mcp.ClientSession
	log     *slog.Logger

	// caps are the capabilities the child declared in initialize; tasks is its tasks
	// capability, raw (nil when it has none).
	caps  *mcp.ServerCapabilities
	tasks json.RawMessage
	// lists are the child's tools, prompts, resources and resource templates as it sent
	// them, in its order. Guarded by Aggregator.mu.
	lists [numKinds][]json.RawMessage
	// listed is closed once the first lists are read: a list change announced before
	// waits for it.
	listed chan struct{}

	badLines atomic.Int64

	downOnce sync.Once
	down     chan struct{} // closed when the server has stopped serving
	why      string        // how it stopped, once down is closed
}

// startServer starts the child of cfg and connects to it; it returns once the child has
// answered initialize and listed its tools, or with an error that says what went wrong.
func (a *Aggregator) startServer(ctx context.Context, cfg config.Server) (*server, error) {
	s := &server{key: cfg.Key, command: cfg.Command, down: make(chan struct{}), listed: make(chan struct{}), log: a.log.With("server", cfg.Key)}
	proc, err := child.Start(child.Spec{
		Key:     cfg.Key,
		Command: cfg.Command,
		Args:    cfg.Args,
		Env:     a.childEnv(cfg.Env),
	}, a.stderr)
	if err != nil {
		return nil, fmt.Errorf("start %q: %w%s", cfg.Command, err, startHint(err))
	}
	s.proc = proc
	s.log.Debug("started", "pid", proc.PID(), "command", cfg.Command)
	s.conn = &childConn{Conn: stdio.New(proc.Stdout, proc.Stdin, &stdio.Options{
		MaxMessageSize: a.opts.MaxMessageSize,
		Intercept:      func(m jsonrpc.Message) bool { return a.interceptChild(s, m) },
		BadLine: func(_ *stdio.Conn, line []byte, err error) jsonrpc.Message {
			if errors.Is(err, stdio.ErrTooLarge) {
				// Fail the request it answers rather than leave it waiting forever.
				s.log.Error(fmt.Sprintf("a message from the server is larger than %d bytes and was dropped (see --max-message-size)", a.opts.MaxMessageSize))
				if id, ok := stdio.TooLargeID(err); ok {
					return &jsonrpc.Response{ID: id, Error: &jsonrpc.Error{
						Code:    jsonrpc.CodeInternalError,
						Message: fmt.Sprintf("the answer of server %q is larger than %d bytes; start mcp-simple-aggregator with a larger --max-message-size", s.key, a.opts.MaxMessageSize),
					}}
				}
				return nil
			}
			// Reported a few times, not for every line of a child that logs to stdout.
			switch n := s.badLines.Add(1); {
			case n <= maxBadLineWarnings:
				s.log.Warn("ignored a line on stdout that is not a JSON-RPC message (servers must write only MCP messages to stdout; logs belong on stderr)",
					"error", err, "line", excerpt(line))
			case n == maxBadLineWarnings+1:
				s.log.Warn("more lines on stdout that are not JSON-RPC messages are ignored without warning")
			}
			return nil
		},
	})}

	// The client side is said to do sampling, elicitation and roots, so that servers that
	// offer more to such clients do; the child's requests go to the real client, or get an
	// error when it cannot (reverse.go). The child's notifications never reach the SDK's
	// handlers: the connection takes them (interceptChild).
	client := mcp.NewClient(&mcp.Implementation{Name: "mcp-simple-aggregator", Version: a.opts.Version}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{
			RootsV2:     &mcp.RootCapabilities{ListChanged: true},
			Sampling:    &mcp.SamplingCapabilities{},
			Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	fail := func(stage string, err error) (*server, error) {
		err = s.describe(stage, err) // before stopping it, which would change the story
		s.stop(0)
		return nil, err
	}
	session, err := client.Connect(ctx, s.conn, &mcp.ClientSessionOptions{ProtocolVersion: childProtocolVersion})
	if err != nil {
		return fail("initialize", err)
	}
	s.session = session
	if res := session.InitializeResult(); res != nil {
		s.log.Debug("initialized", "protocol", res.ProtocolVersion, "name", nameOf(res.ServerInfo))
	}
	if res := session.InitializeResult(); res != nil && res.Capabilities != nil {
		s.caps = res.Capabilities
	} else {
		s.caps = &mcp.ServerCapabilities{}
	}
	s.tasks = s.conn.tasks
	lists, lerr := s.readLists(ctx, allKinds)
	if lerr != nil {
		return fail(lerr.stage, lerr.err)
	}
	a.mu.Lock()
	s.lists = lists
	a.mu.Unlock()
	close(s.listed)
	return s, nil
}

// allKinds asks readLists for every list.
var allKinds = []kind{kindTools, kindPrompts, kindResources, kindTemplates}

// offers reports whether the child declared the capability behind list k. Tools are read
// from every child: some serve them without declaring it.
func (s *server) offers(k kind) bool {
	switch k {
	case kindPrompts:
		return s.caps.Prompts != nil
	case kindResources, kindTemplates:
		return s.offersResources()
	}
	return true
}

func (s *server) offersResources() bool { return s.caps != nil && s.caps.Resources != nil }

// listError is a failure to read a list, with the request that failed.
type listError struct {
	stage string
	err   error
}

// readLists reads the lists ks of the child (those it offers), each in full, following its
// cursors. A list the child does not implement (Method not found) is empty.
func (s *server) readLists(ctx context.Context, ks []kind) (lists [numKinds][]json.RawMessage, _ *listError) {
	for _, k := range ks {
		if !s.offers(k) {
			continue
		}
		items, err := listAll(ctx, s.session, k)
		var rpcErr *jsonrpc.Error
		if errors.As(err, &rpcErr) && rpcErr.Code == jsonrpc.CodeMethodNotFound {
			continue
		}
		if err != nil {
			return lists, &listError{kinds[k].method, err}
		}
		lists[k] = items
	}
	return lists, nil
}

// describe turns an error from talking to a starting child into one that says what happened
// to the child: it exited, timed out or broke the protocol; with its last stderr lines.
func (s *server) describe(stage string, err error) error {
	var what string
	select {
	case <-s.proc.Exited():
		what = s.proc.ExitDescription() + " during " + stage
	case <-time.After(drainWait(err)):
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			what = "did not finish " + stage + " within the start-up timeout (--startup-timeout)"
		case errors.Is(err, mcp.ErrConnectionClosed):
			what = "closed its standard output during " + stage
		default:
			what = stage + " failed: " + err.Error()
		}
	}
	return fmt.Errorf("command %q %s%s", s.command, what, tailText(s.proc.Tail()))
}

// drainTime is how long a child that closed its stdout is given to exit, so that the error
// can say how it ended.
const drainTime = 500 * time.Millisecond

// drainWait is how long to wait for a child's exit status after err: a closed connection
// usually means the child is exiting.
func drainWait(err error) time.Duration {
	if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, context.DeadlineExceeded) {
		return 500 * time.Millisecond
	}
	return 50 * time.Millisecond
}

func tailText(lines []string) string {
	if len(lines) == 0 {
		return " (it wrote nothing on stderr)"
	}
	return "; its last stderr lines:\n    " + strings.Join(lines, "\n    ")
}

// listAll reads every page of one of a child's lists, as raw definitions.
func listAll(ctx context.Context, session *mcp.ClientSession, k kind) ([]json.RawMessage, error) {
	var items []json.RawMessage
	seen := map[string]bool{}
	cursor := ""
	method := kinds[k].method
	for {
		sk := &sink{stub: stubList}
		sctx := withSink(ctx, sk)
		var err error
		switch k {
		case kindTools:
			_, err = session.ListTools(sctx, &mcp.ListToolsParams{Cursor: cursor})
		case kindPrompts:
			_, err = session.ListPrompts(sctx, &mcp.ListPromptsParams{Cursor: cursor})
		case kindResources:
			_, err = session.ListResources(sctx, &mcp.ListResourcesParams{Cursor: cursor})
		case kindTemplates:
			_, err = session.ListResourceTemplates(sctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
		}
		result, rpcErr, got := sk.answer()
		if rpcErr != nil {
			return nil, rpcErr
		}
		if err != nil {
			return nil, err
		}
		if !got {
			return nil, errors.New("no answer to " + method)
		}
		var page map[string]json.RawMessage
		var defs []json.RawMessage
		if err := json.Unmarshal(result, &page); err != nil {
			return nil, fmt.Errorf("%s result: %w", method, err)
		}
		if v, ok := page[kinds[k].field]; ok {
			if err := json.Unmarshal(v, &defs); err != nil {
				return nil, fmt.Errorf("%s result: %q: %w", method, kinds[k].field, err)
			}
		}
		items = append(items, defs...)
		var next string
		if v, ok := page["nextCursor"]; ok {
			_ = json.Unmarshal(v, &next) // null or not a string: no next page
		}
		if next == "" {
			return items, nil
		}
		cursor = next
		if seen[cursor] {
			return nil, fmt.Errorf("%s returned the cursor %q twice", method, cursor)
		}
		seen[cursor] = true
	}
}

// watch waits until the child exits or its session ends, then takes the server down.
func (a *Aggregator) watch(s *server) {
	sessionDone := make(chan struct{})
	go func() {
		s.session.Wait()
		close(sessionDone)
	}()
	select {
	case <-s.proc.Exited():
		a.serverDown(s, s.proc.ExitDescription())
	case <-sessionDone:
		select {
		case <-s.proc.Exited():
			a.serverDown(s, s.proc.ExitDescription())
		case <-time.After(100 * time.Millisecond):
			a.serverDown(s, "closed its standard output")
		}
	case <-s.down:
	}
}

// markDown records why s stopped serving; it reports whether s was up until now.
func (s *server) markDown(why string) bool {
	first := false
	s.downOnce.Do(func() {
		s.why = why
		close(s.down)
		first = true
	})
	return first
}

// stop ends the child (see child.Process.Stop) and then its session. The session is not
// closed first: the SDK's Close waits for the calls in flight, which a hung child never
// answers; once the process is gone, the failing reader ends them.
func (s *server) stop(grace time.Duration) {
	s.proc.Stop(grace)
	s.conn.Conn.Close()
	if s.session != nil {
		s.session.Wait()
	}
}

// startHint adds what to do to an error from starting a program.
func startHint(err error) string {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
		hint := "; check the command name, or give its full path"
		if runtime.GOOS == "darwin" {
			hint += " (desktop apps start servers with a short PATH such as /usr/bin:/bin)"
		}
		return hint
	}
	return ""
}

func nameOf(impl *mcp.Implementation) string {
	if impl == nil {
		return ""
	}
	return impl.Name
}

// excerpt shortens a line for a log message.
func excerpt(line []byte) string {
	if len(line) > 200 {
		return string(line[:200]) + "..."
	}
	return string(line)
}
