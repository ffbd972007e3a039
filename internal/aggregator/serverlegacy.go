package aggregator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// A server of the legacy era (protocol versions up to 2025-11-25): initialized once with what
// the client declared, then spoken to as the client speaks to it. A modern client's request
// reaches it without the modern envelope, and sets its log level with logging/setLevel.

// legacyServer is the serverSide of a legacy server.
type legacyServer struct{ a *Aggregator }

func (legacyServer) era() era.Era { return era.Legacy }

// handshake is initialize, and notifications/initialized.
func (l legacyServer) handshake(ctx context.Context, s *server, params json.RawMessage) (stage string, err error) {
	result, err := l.initialize(ctx, s, params)
	if err != nil {
		return "initialize", err
	}
	var init struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
		ServerInfo      struct {
			Name string `json:"name"`
		} `json:"serverInfo"`
		Instructions string `json:"instructions"`
	}
	if err := json.Unmarshal(result, &init); err != nil {
		return "initialize", fmt.Errorf("its answer is not an initialize result: %v", err)
	}
	if legacy := era.VersionsOf(era.Legacy); !slices.Contains(legacy, init.ProtocolVersion) {
		return "initialize", fmt.Errorf("it speaks protocol version %q, and mcp-simple-aggregator speaks %s", init.ProtocolVersion, strings.Join(legacy, ", "))
	}
	s.protocol, s.name, s.instructions = init.ProtocolVersion, init.ServerInfo.Name, init.Instructions
	s.caps = init.Capabilities
	if s.caps == nil {
		s.caps = map[string]json.RawMessage{}
	}
	if t, ok := s.caps["tasks"]; ok && string(t) != "null" {
		s.tasks = t
	}
	s.log.Debug("initialized", "protocol", s.protocol, "name", s.name)
	if ps, _ := s.processSetup(); ps != nil {
		ps.tellInitialized()
	} else {
		s.conn.Send(nil, stdio.Notification("notifications/initialized", nil)...)
	}
	return "", nil
}

// initialize asks s initialize with params, and returns the result. A shared process's
// process is initialized once, for every session that uses it (ProcessSessions.initialize).
func (l legacyServer) initialize(ctx context.Context, s *server, params json.RawMessage) (json.RawMessage, error) {
	ps, _ := s.processSetup()
	if ps == nil {
		return l.a.call(ctx, s, "initialize", "initializing", params)
	}
	result, errObj, err := ps.initialize(ctx, s.readDone, params)
	if errObj != nil {
		return nil, errorOf(errObj)
	}
	return result, err
}

// params are unchanged, on the path every legacy client's call takes (nothing allocated). A
// modern client's request loses the envelope (a go-sdk server restricted to legacy versions
// answers a request that carries it with -32022).
func (l legacyServer) params(c *call, params [][]byte) [][]byte {
	if !c.enveloped {
		return params
	}
	return [][]byte{era.Unenvelop(c.method, slices.Concat(params...))}
}

// awaits sets the level a modern client's request asks for on the server, which logs for the
// whole session (what it says reaches the client only while such a request is in flight:
// table.wantsLog), when it is lower than the server's: the request waits until the server has
// answered (a server may take its requests at once, as the go-sdk's does, and a request must
// not log before the level is set, or it logs nothing).
func (l legacyServer) awaits(c *call) <-chan struct{} {
	if !c.enveloped || c.logLevel == 0 || !c.to.offers("logging") {
		return nil
	}
	return l.a.lowerLevel(c.to, c.logLevel)
}

func (legacyServer) health() (method, doing string) { return "ping", "answering a ping" }

// subscribeFor relays the client's own resources/subscribe and unsubscribe.
func (legacyServer) subscribeFor(*jsonrpc.Request, *server, string) bool { return false }

// subscribe sends resources/subscribe (or unsubscribe) of uri, for the client.
func (l legacyServer) subscribe(ctx context.Context, s *server, method, uri string) json.RawMessage {
	params, _ := json.Marshal(map[string]string{"uri": uri})
	if _, err := l.a.call(ctx, s, method, method+" for a subscriptions/listen of the client", params); err != nil {
		return rpcError(jsonrpc.CodeInternalError, nil, "Internal error: server %q: %s: %v", s.key, method, err)
	}
	l.a.setup.subscribed(method, uri, s.key) // subscribed again on its new processes
	return nil
}

func (legacyServer) setsLevel() bool { return true }

// replay sets the log level the client asked for, and every resource subscription of the key.
// A failure is logged, and s serves all the same (as the first process would have answered the
// client with the error).
func (l legacyServer) replay(ctx context.Context, s *server) {
	level, uris := l.a.setup.of(s.key)
	if level != nil && s.offers("logging") {
		if _, err := l.a.call(ctx, s, "logging/setLevel", "setting the log level again", level); err != nil {
			s.log.Warn("setting the client's log level on the new process failed", "error", err)
		}
	}
	for _, uri := range uris {
		params, _ := json.Marshal(map[string]string{"uri": uri})
		if _, err := l.a.call(ctx, s, "resources/subscribe", "subscribing again", params); err != nil {
			s.log.Warn("subscribing the new process to a resource the client subscribed to failed", "uri", uri, "error", err)
		}
	}
	if level != nil || len(uris) > 0 {
		s.log.Debug("set up again", "level", string(level), "subscriptions", len(uris))
	}
}

func (legacyServer) notification(*server, *jsonrpc.Request) bool { return false }

func (legacyServer) carry(*call, *server, json.RawMessage) bool { return false }

// lowerLevel sets a legacy server's log level with logging/setLevel when a modern client's
// request asks for a lower one than it was set to; the channel it returns is closed once the
// server answered (nil when the level was low enough). The level is set again on the server's
// new processes (replay).
func (a *Aggregator) lowerLevel(s *server, rank int) <-chan struct{} {
	for {
		set := s.logLevel.Load()
		if set != 0 && int(set) <= rank {
			return nil
		}
		if s.logLevel.CompareAndSwap(set, int32(rank)) {
			break
		}
	}
	params := levelParams(rank)
	a.setup.leveled(params)
	answered := make(chan struct{})
	if a.sendToServer(&call{to: s, method: "logging/setLevel", doing: "setting the log level a request asked for",
		done: func(_, errObj json.RawMessage) {
			if errObj != nil {
				s.log.Debug("logging/setLevel failed", "error", string(errObj))
			}
			close(answered)
		}}, nil, params) != addOK {
		return nil
	}
	return answered
}
