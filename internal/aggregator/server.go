package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
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

	// tools are the child's tool definitions as it sent them, in its order.
	tools []json.RawMessage

	badLines atomic.Int64

	downOnce sync.Once
	down     chan struct{} // closed when the server has stopped serving
	why      string        // how it stopped, once down is closed
}

// startServer starts the child of cfg and connects to it; it returns once the child has
// answered initialize and listed its tools, or with an error that says what went wrong.
func (a *Aggregator) startServer(ctx context.Context, cfg config.Server) (*server, error) {
	s := &server{key: cfg.Key, command: cfg.Command, down: make(chan struct{}), log: a.log.With("server", cfg.Key)}
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
				if id, ok := stdio.PeekID(line); ok {
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

	client := mcp.NewClient(&mcp.Implementation{Name: "mcp-simple-aggregator", Version: a.opts.Version}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(ctx context.Context, req *mcp.ToolListChangedRequest) {
			// req.Session, not s.session: this may run before Connect has returned.
			go a.refreshTools(s, req.Session)
		},
		ProgressNotificationHandler: func(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
			a.forwardProgress(req.Params)
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
	tools, err := listTools(ctx, session)
	if err != nil {
		return fail("tools/list", err)
	}
	a.mu.Lock() // a list_changed from the child may already be re-reading (refreshTools)
	if s.tools == nil {
		s.tools = tools
	}
	a.mu.Unlock()
	return s, nil
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

// listTools reads every page of a child's tool list, as raw definitions.
func listTools(ctx context.Context, session *mcp.ClientSession) ([]json.RawMessage, error) {
	var tools []json.RawMessage
	seen := map[string]bool{}
	cursor := ""
	for {
		sk := &sink{stub: stubList}
		_, err := session.ListTools(withSink(ctx, sk), &mcp.ListToolsParams{Cursor: cursor})
		result, rpcErr, got := sk.answer()
		if rpcErr != nil {
			return nil, rpcErr
		}
		if err != nil {
			return nil, err
		}
		if !got {
			return nil, errors.New("no answer to tools/list")
		}
		var page listPage
		if err := json.Unmarshal(result, &page); err != nil {
			return nil, fmt.Errorf("tools/list result: %w", err)
		}
		tools = append(tools, page.Tools...)
		if page.NextCursor == nil || *page.NextCursor == "" {
			return tools, nil
		}
		cursor = *page.NextCursor
		if seen[cursor] {
			return nil, fmt.Errorf("tools/list returned the cursor %q twice", cursor)
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

// call sends tools/call for the tool's original name and returns the child's raw result, or
// the child's JSON-RPC error as it was.
func (s *server) call(ctx context.Context, name string, params *mcp.CallToolParamsRaw) (json.RawMessage, error) {
	sk := &sink{stub: stubCall}
	p := &mcp.CallToolParams{Meta: params.Meta, Name: name}
	if len(params.Arguments) > 0 {
		p.Arguments = params.Arguments
	}
	_, err := s.session.CallTool(withSink(ctx, sk), p)
	result, rpcErr, got := sk.answer()
	switch {
	case rpcErr != nil:
		return nil, rpcErr
	case got:
		return result, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	// No answer: the child went away while the call was in flight.
	return nil, &jsonrpc.Error{
		Code:    jsonrpc.CodeInternalError,
		Message: fmt.Sprintf("server %q %s while calling tool %q; its tools are no longer available", s.key, s.whyDown(err), name),
	}
}

// whyDown says why a call got no answer: how the child ended, or that it closed its stdout.
func (s *server) whyDown(err error) string {
	select {
	case <-s.down:
		return s.why
	case <-s.proc.Exited():
		return s.proc.ExitDescription()
	case <-time.After(drainTime):
	}
	select {
	case <-s.down:
		return s.why
	default:
	}
	if errors.Is(err, mcp.ErrConnectionClosed) || strings.Contains(err.Error(), "EOF") {
		return "closed its standard output"
	}
	return "stopped answering (" + err.Error() + ")"
}

// startHint adds what to do to an error from starting a program.
func startHint(err error) string {
	if errors.Is(err, os.ErrNotExist) || strings.Contains(err.Error(), "executable file not found") {
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
