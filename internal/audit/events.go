package audit

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// Outcome is how a call ended.
type Outcome string

const (
	// Result: the server answered with a result (for tools/call, one without isError).
	Result Outcome = "result"
	// IsError: the server answered a tools/call with a result whose isError is true: the
	// tool ran and failed.
	IsError Outcome = "isError"
	// Error: the answer was a JSON-RPC error (Call.ErrorCode), from the server or from the
	// aggregator (an unknown tool, a withheld one, a server that crashed meanwhile).
	Error Outcome = "error"
	// Cancelled: the client cancelled the request before it was answered.
	Cancelled Outcome = "cancelled"
)

// Call is one request the client sent to a server, once it is over.
type Call struct {
	// Time is when it was answered; now when zero.
	Time time.Time
	// Client is the client's name (clientInfo.name).
	Client string
	// Server is the server's key.
	Server string
	// Method is the request's method: tools/call, prompts/get, resources/read, ...
	Method string
	// Tool, Prompt and URI name what the request is for, as the server knows it: the tool's
	// or prompt's name without the server's prefix, the resource's URI.
	Tool, Prompt, URI string
	// Duration is from the request's arrival to its answer's departure.
	Duration time.Duration
	Outcome  Outcome
	// ErrorCode is the JSON-RPC error's code, for Error.
	ErrorCode int
	// RequestBytes and ResponseBytes are the sizes of the request and of the answer.
	RequestBytes, ResponseBytes int
	// Arguments are the request's arguments (a tool's or a prompt's), and Result the
	// answer's result or error object, as JSON: written only with Options.Bodies. They are
	// copied before Call returns, so the caller may reuse them.
	Arguments, Result json.RawMessage
}

// callLine is a call's line.
type callLine struct {
	Time          string          `json:"time"`
	Event         string          `json:"event"`
	Client        string          `json:"client,omitempty"`
	Server        string          `json:"server"`
	Method        string          `json:"method"`
	Tool          string          `json:"tool,omitempty"`
	Prompt        string          `json:"prompt,omitempty"`
	URI           string          `json:"uri,omitempty"`
	DurationMS    float64         `json:"durationMs"`
	Outcome       Outcome         `json:"outcome"`
	ErrorCode     int             `json:"errorCode,omitempty"`
	RequestBytes  int             `json:"requestBytes"`
	ResponseBytes int             `json:"responseBytes"`
	Arguments     json.RawMessage `json:"arguments,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	// ArgumentsOmitted and ResultOmitted are the sizes of bodies too large to write.
	ArgumentsOmitted int `json:"argumentsOmitted,omitempty"`
	ResultOmitted    int `json:"resultOmitted,omitempty"`
}

// Call records one request of the client's to a server. It never waits for the file.
func (l *Log) Call(c Call) {
	if l == nil {
		return
	}
	line := callLine{
		Time: stamp(c.Time), Event: "call", Client: c.Client, Server: c.Server, Method: c.Method,
		Tool: c.Tool, Prompt: c.Prompt, URI: c.URI,
		DurationMS: math.Round(float64(c.Duration)/float64(time.Microsecond)) / 1000,
		Outcome:    c.Outcome, RequestBytes: c.RequestBytes, ResponseBytes: c.ResponseBytes,
	}
	if c.Outcome == Error {
		line.ErrorCode = c.ErrorCode
	}
	if !l.bodies {
		l.enqueue(line.append(make([]byte, 0, 256)))
		return
	}
	line.Arguments, line.ArgumentsOmitted = body(c.Arguments)
	line.Result, line.ResultOmitted = body(c.Result)
	data, err := encode(line)
	if err != nil {
		// A body that is not JSON: written as a string, which is what it is.
		line.Arguments, line.Result = quote(line.Arguments), quote(line.Result)
		data, _ = encode(line)
	}
	l.enqueue(data)
}

// append appends the line of a call without bodies, as encode would write it, without
// reflection: the audit log's cost on a call is this and a channel send.
func (c *callLine) append(b []byte) []byte {
	b = append(b, `{"time":`...)
	b = appendString(b, c.Time)
	b = append(b, `,"event":`...)
	b = appendString(b, c.Event)
	for _, m := range [...]struct{ key, value string }{{"client", c.Client}, {"server", c.Server}, {"method", c.Method}, {"tool", c.Tool}, {"prompt", c.Prompt}, {"uri", c.URI}} {
		if m.value == "" && m.key != "server" && m.key != "method" {
			continue // omitempty
		}
		b = append(b, ',', '"')
		b = append(b, m.key...)
		b = append(b, '"', ':')
		b = appendString(b, m.value)
	}
	b = append(b, `,"durationMs":`...)
	b = strconv.AppendFloat(b, c.DurationMS, 'f', -1, 64)
	b = append(b, `,"outcome":`...)
	b = appendString(b, string(c.Outcome))
	if c.ErrorCode != 0 {
		b = append(b, `,"errorCode":`...)
		b = strconv.AppendInt(b, int64(c.ErrorCode), 10)
	}
	b = append(b, `,"requestBytes":`...)
	b = strconv.AppendInt(b, int64(c.RequestBytes), 10)
	b = append(b, `,"responseBytes":`...)
	b = strconv.AppendInt(b, int64(c.ResponseBytes), 10)
	return append(b, '}', '\n')
}

// appendString appends s as a JSON string, as encode writes it (no HTML escaping).
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			e, _ := encode(s) // escapes, and invalid UTF-8 or U+2028/U+2029, as encoding/json does
			return append(b, e[:len(e)-1]...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// body is b to be written, or its size when it is too large.
func body(b json.RawMessage) (json.RawMessage, int) {
	if len(b) > maxBody {
		return nil, len(b)
	}
	return b, 0
}

func quote(b json.RawMessage) json.RawMessage {
	if b == nil || json.Valid(b) {
		return b
	}
	q, _ := json.Marshal(string(b))
	return q
}

// Definition records what happened to a definition a server lists.
type Definition struct {
	// Time is when; now when zero.
	Time   time.Time
	Server string
	// Kind is "tool", "prompt", "resource", "resource template" or "instructions".
	Kind string
	// Name is the tool's or prompt's name as the server lists it, the resource's URI, the
	// template's URI template.
	Name string
	// Action is what happened: DefinitionWithheld or DefinitionChanged.
	Action string
	// Reason says why, as stderr and check say it: `differs from the lock: description
	// changed`, `/inputSchema/type is missing; the MCP schema requires "object"`.
	Reason string
}

const (
	// DefinitionWithheld: the definition is not served (it breaks the MCP schema, or it
	// differs from the lock with --pinned).
	DefinitionWithheld = "withheld"
	// DefinitionChanged: the server listed the definition changed since it was pinned, or
	// since it was last listed, and it is served.
	DefinitionChanged = "changed"
)

type definitionLine struct {
	Time   string `json:"time"`
	Event  string `json:"event"`
	Server string `json:"server"`
	Kind   string `json:"kind"`
	Name   string `json:"name,omitempty"`
	Action string `json:"action"`
	Reason string `json:"reason,omitempty"`
}

// Definition records a definition withheld or changed.
func (l *Log) Definition(d Definition) {
	if l == nil {
		return
	}
	data, _ := encode(definitionLine{Time: stamp(d.Time), Event: "definition", Server: d.Server, Kind: d.Kind, Name: d.Name, Action: d.Action, Reason: d.Reason})
	l.enqueue(data)
}

// Server is an event of a server's life.
type Server struct {
	// Time is when; now when zero.
	Time   time.Time
	Server string
	// Action is ServerStart, ServerStop, ServerCrash, ServerRestart or ServerFail.
	Action string
	// PID is its process's, when it has one.
	PID int
	// Detail says what happened in the aggregator's words (`exited with status 2`, `given
	// up after 5 restarts`); never an env value or an argument.
	Detail string
}

const (
	// ServerStart: its process started and it serves.
	ServerStart = "start"
	// ServerStop: the aggregator stopped it (shutdown, reload).
	ServerStop = "stop"
	// ServerCrash: its process exited, closed its output or stopped answering pings.
	ServerCrash = "crash"
	// ServerRestart: a new process of it after a crash.
	ServerRestart = "restart"
	// ServerFail: it could not start (or restart), or was given up.
	ServerFail = "fail"
)

type serverLine struct {
	Time   string `json:"time"`
	Event  string `json:"event"`
	Server string `json:"server"`
	Action string `json:"action"`
	PID    int    `json:"pid,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// Server records an event of a server's life.
func (l *Log) Server(s Server) {
	if l == nil {
		return
	}
	data, _ := encode(serverLine{Time: stamp(s.Time), Event: "server", Server: s.Server, Action: s.Action, PID: s.PID, Detail: s.Detail})
	l.enqueue(data)
}

// stamp is the timestamp of t, now when t is zero.
func stamp(t time.Time) string {
	if t.IsZero() {
		t = time.Now()
	}
	return timestamp(t)
}
