// Package shared runs the sessions of many clients in one process (--share), as gopls's
// daemon mode does: the process a client starts is a forwarder (forward.go), which finds or
// starts the user's shared process of its build, hands it the session's context (its serving
// flags, environment and working directory) and the client's input and output, which the
// shared process reads (through the session's journal, journal_unix.go) and writes itself
// (clientout.go); the shared process hosts the session (host.go: the serving command, run by the program's Host
// with the client's context, so that the session reads its own configuration, names the tools,
// keeps its client's era, filters and state, as unshared) and runs the servers' processes,
// which the sessions' aggregators attach to in the shared process's own memory (attachment.go:
// what a session writes is taken as it is written, and the one reader of each server hands
// each session its own messages). A server process
// is shared by the sessions whose servers would see the same command, arguments, environment
// and working directory (identity.go) and, for a server of the legacy era, which is
// initialized once, whose clients would send it the same initialize. Each process's
// attachments are routed by mux.go: the sessions share one ID space, each with a prefix of its
// own (Session.IDSpace), in which its aggregator numbers its requests and progress tokens, so
// that a session's requests go to the server as it wrote them, and their answers and progress
// back to that session only; a
// server's request goes to the session whose request it serves (or, asked outside any, to one
// session that has the server); list changes go to every session, resource updates to the
// sessions subscribed, log messages to each session at its own level (each session's core
// filters them, and merges what they set up on the process, with the handshake done once:
// aggregator.ProcessSessions). A process no session uses
// is stopped after the linger, and the shared process exits once it has no session and no
// process; stop ends it at once.
//
// Nothing here trusts the socket's directory or its peer: the directory must be the user's
// alone (0700; checked on every use), and a connection from another user is refused (the
// peer's credentials).
package shared

import (
	"time"
)

// protocol names the wire protocol of this package, in every hello: a session of another build
// uses another socket, and never speaks to this one.
const protocol = "mcp-simple-aggregator/shared/1"

// DefaultLinger is how long a shared server no session uses keeps running: a client that
// restarts its session finds it still there.
const DefaultLinger = 5 * time.Minute

// Connection kinds: a status query (check), a request to stop (the stop command), and a
// forwarder's two (host.go).
const (
	kindStatus = "status"
	kindStop   = "stop"
	kindLog    = "log"  // a forwarder's log connection (host.go)
	kindHost   = "host" // a forwarder's protocol connection, with its session's context
)

// hello is the first line a session writes on a connection to the shared process.
type hello struct {
	Protocol string `json:"hello"`
	Kind     string `json:"kind"`
	Session  string `json:"session,omitempty"`

	// A session's connection: who it is, for check.
	PID    int    `json:"pid,omitempty"`
	Config string `json:"config,omitempty"`

	// A forwarder's protocol connection: the session's serving flags, environment and
	// working directory (host.go).
	Args []string `json:"args,omitempty"`
	// Named is the configuration file as the client's command line names it, which the
	// session's messages name it by (Config is its absolute path).
	Named string   `json:"named,omitempty"`
	Env   []string `json:"env,omitempty"`
	Dir   string   `json:"dir,omitempty"`
}

// reply is the shared process's answer to a connection it refuses.
type reply struct {
	Error string `json:"error,omitempty"`
}

// Status is what a shared process says of itself (check).
type Status struct {
	PID      int             `json:"pid"`
	Socket   string          `json:"socket"`
	Sessions []SessionStatus `json:"sessions"`
	Servers  []ServerStatus  `json:"servers"`
}

// SessionStatus is one session of a shared process.
type SessionStatus struct {
	PID    int    `json:"pid"`
	Config string `json:"config"`
}

// ServerStatus is one server process of a shared process.
type ServerStatus struct {
	// Keys are the keys the sessions gave it; Command is what it runs.
	Keys    []string `json:"keys"`
	Command string   `json:"command"`
	PID     int      `json:"pid"`
	Era     string   `json:"era,omitempty"`
	// Sessions is how many sessions use it; Lingering says it is kept for the linger.
	Sessions  int  `json:"sessions"`
	Lingering bool `json:"lingering,omitempty"`
	// Apart says, when it was started where a process of the same entry ran for another
	// session, what kept them apart.
	Apart string `json:"apart,omitempty"`
}
