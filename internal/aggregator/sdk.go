package aggregator

import (
	"context"
	"encoding/json"
	"io"
	"sync"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The go-sdk's part: the client's handshake. The SDK's ServerSession reads what readClient
// hands it (sdkConn), negotiates the protocol version of initialize, answers ping, and refuses
// requests before initialize and unknown methods; initializeMiddleware completes its answer to
// initialize with what its types cannot carry. Everything else is raw JSON-RPC.

// initialize hands the client's initialize to the SDK's session and waits until it is
// answered: requests the client sends right behind it (pipelined) are answered after it.
func (se *session) initialize(m *jsonrpc.Request) {
	var p struct {
		Capabilities map[string]json.RawMessage `json:"capabilities"`
		ClientInfo   json.RawMessage            `json:"clientInfo"`
	}
	_ = json.Unmarshal(m.Params, &p) // the SDK answers malformed params
	if p.Capabilities == nil {
		p.Capabilities = map[string]json.RawMessage{}
	}
	var info struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	}
	_ = json.Unmarshal(p.ClientInfo, &info)
	se.initializing = &clientSession{side: legacyClient{se}, caps: p.Capabilities, info: p.ClientInfo, name: info.Name, clientVersion: info.Version}
	answered := se.sdk.await(m.ID)
	se.sdk.deliver(m)
	<-answered
}

// initializeMiddleware completes the SDK's answer to initialize: the servers are initialized
// now, with what the client said of itself (startup), and the answer carries the union of
// their capabilities (with tasks, which the SDK's types cannot carry) and their combined
// instructions. Then the client's session is published.
func (se *session) initializeMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "initialize" {
			return next(ctx, method, req)
		}
		res, err := next(ctx, method, req)
		ir, ok := res.(*mcp.InitializeResult)
		if err != nil || !ok || se.initializing == nil {
			return res, err
		}
		cs := se.initializing
		cs.version = ir.ProtocolVersion
		se.a.log.Debug("client initialized", "client", cs.name, "version", cs.clientVersion, "protocol", cs.version)
		if se.hello.Load() != nil {
			// After a modern request (the client's probe): the servers run already.
			ir.Instructions = se.a.instructions
			se.legacyAfterModern(cs)
			return &rawResult{raw: se.initializeResult(ir)}, nil
		}
		instructions, err := se.a.startup(context.Background(), se, cs)
		if err != nil {
			se.a.startErr = err
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Internal error: " + err.Error()}
		}
		ir.Instructions = instructions
		return &rawResult{raw: se.initializeResult(ir)}, nil
	}
}

// legacyAfterModern makes the session legacy when a client that began with a modern request
// (a server/discover probe) sends initialize: the catalog is checked against the legacy
// schema again, and the client, which has seen no list yet, is not told of it.
func (se *session) legacyAfterModern(cs *clientSession) {
	se.a.reloadMu.Lock()
	defer se.a.reloadMu.Unlock()
	r := &se.a.roster
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clientEra, r.reloading = era.Legacy, true
	if err := se.a.publish(); err != nil {
		se.a.log.Error("the catalog for a legacy client cannot be built; keeping the previous one", "error", err)
	}
	r.reloading = false
	se.hello.Store(cs)
}

// initializeResult is the aggregator's answer to initialize.
func (se *session) initializeResult(ir *mcp.InitializeResult) json.RawMessage {
	return marshal(struct {
		Capabilities    json.RawMessage     `json:"capabilities"`
		ProtocolVersion string              `json:"protocolVersion"`
		ServerInfo      *mcp.Implementation `json:"serverInfo"`
		Instructions    string              `json:"instructions,omitempty"`
	}{se.a.caps, ir.ProtocolVersion, ir.ServerInfo, ir.Instructions})
}

// rawResult is a result the SDK writes as it is.
type rawResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (r *rawResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// sdkConn is the mcp.Connection of the SDK's server session: it reads what readClient hands
// it, and writes to the client.
type sdkConn struct {
	client *stdio.Conn
	in     chan jsonrpc.Message
	ended  chan struct{} // closed at the end of the client's input
	closed chan struct{} // closed when the session closes
	once   sync.Once

	mu       sync.Mutex
	awaitID  jsonrpc.ID
	answered chan struct{}
}

func newSDKConn(client *stdio.Conn) *sdkConn {
	return &sdkConn{client: client, in: make(chan jsonrpc.Message, 16), ended: make(chan struct{}), closed: make(chan struct{})}
}

func (c *sdkConn) Connect(context.Context) (mcp.Connection, error) { return c, nil }

// deliver hands a message to the SDK's session.
func (c *sdkConn) deliver(m jsonrpc.Message) {
	select {
	case c.in <- m:
	case <-c.closed:
	}
}

// await returns a channel that is closed once the answer to request id has been written (or
// the session has closed).
func (c *sdkConn) await(id jsonrpc.ID) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.awaitID, c.answered = id, make(chan struct{})
	answered := c.answered
	go func() {
		select {
		case <-answered:
		case <-c.closed:
			c.release(id)
		}
	}()
	return answered
}

func (c *sdkConn) release(id jsonrpc.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answered != nil && c.awaitID == id {
		close(c.answered)
		c.answered = nil
	}
}

// endInput tells the session that the client's input ended.
func (c *sdkConn) endInput() { close(c.ended) }

func (c *sdkConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.in:
		return m, nil
	case <-c.ended:
		select {
		case m := <-c.in:
			return m, nil
		default:
			return nil, io.EOF
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *sdkConn) Write(_ context.Context, m jsonrpc.Message) error {
	err := c.client.Write(m)
	if resp, ok := m.(*jsonrpc.Response); ok {
		c.release(resp.ID)
	}
	return err
}

func (c *sdkConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.client.Close()
}

func (*sdkConn) SessionID() string { return "" }
