// Package era is what differs between the two protocol eras of MCP, as pure functions with no
// state: the protocol versions and which era each belongs to, the modern request envelope
// (_meta), results translated from one era to the other, cache hints, the requestState the
// aggregator mints for a modern client, the subscription filter of subscriptions/listen, and
// the rules of the server/discover probe. The routing core (internal/aggregator) decides where
// a message goes; what changes with the next revision of the protocol is here.
//
// The eras (MCP 2026-07-28, changelog.mdx): the legacy era negotiates a session with initialize
// (protocol versions up to 2025-11-25); the modern era has no handshake: "every request ...
// MUST include the protocol version, client capabilities, and ... client info in _meta"
// (basic/index.mdx), servers answer input needs with InputRequiredResult instead of requests of
// their own (basic/patterns/mrtr.mdx), and notifications come on subscriptions/listen streams
// (basic/patterns/subscriptions.mdx).
//
// Files:
//
//	era.go       the eras, the versions, the _meta keys, the logging levels, the error codes
//	envelope.go  a modern request's _meta: read, checked, written
//	answer.go    results translated between the eras; cache hints
//	input.go     input_required results and their retries; the requestState codec
//	listen.go    the subscription filter of subscriptions/listen
//	discover.go  the server/discover probe: its rules, and the DiscoverResult
package era

// Era is a generation of the protocol: how a peer is spoken to.
type Era uint8

const (
	// Legacy is the initialize era: protocol versions up to 2025-11-25.
	Legacy Era = iota
	// Modern is the per-request era: 2026-07-28.
	Modern
	// Count is the number of eras (for tables indexed by era).
	Count
)

func (e Era) String() string {
	if e == Modern {
		return "modern"
	}
	return "legacy"
}

// Versions are the protocol versions the aggregator speaks, with its client and with its
// servers, newest first. The one list: everything else is derived from it.
var Versions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// firstModern is the first version of the modern era.
const firstModern = "2026-07-28"

// Of is the era of a protocol version: Modern from 2026-07-28 on (a later version keeps the
// modern era's rules until this package learns of it), Legacy before.
func Of(version string) Era {
	if len(version) == len(firstModern) && version >= firstModern {
		return Modern
	}
	return Legacy
}

// VersionsOf are the versions of era e the aggregator speaks, newest first.
func VersionsOf(e Era) []string {
	var out []string
	for _, v := range Versions {
		if Of(v) == e {
			out = append(out, v)
		}
	}
	return out
}

// Latest is the newest version of era e the aggregator speaks.
func Latest(e Era) string { return VersionsOf(e)[0] }

// Batches reports whether protocol version v has JSON-RPC batches: the versions before
// 2025-06-18, which removed them (2025-03-26 requires receiving them).
func Batches(v string) bool { return v < "2025-06-18" }

// Speaks reports whether the aggregator speaks the protocol version v.
func Speaks(v string) bool {
	for _, s := range Versions {
		if s == v {
			return true
		}
	}
	return false
}

// The request _meta keys of the modern era (basic/index.mdx; schema.ts RequestMetaObject), and
// the serverInfo of a result's _meta, and the tag of a subscription's notifications.
const (
	MetaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
	MetaCapabilities    = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo      = "io.modelcontextprotocol/clientInfo"
	MetaLogLevel        = "io.modelcontextprotocol/logLevel"
	MetaServerInfo      = "io.modelcontextprotocol/serverInfo"
	MetaSubscriptionID  = "io.modelcontextprotocol/subscriptionId"
)

// The error codes the eras give a meaning.
const (
	// CodeResourceNotFound is the legacy era's unknown resource; the modern era's is -32602
	// ("servers MUST NOT emit -32002", server/resources.mdx).
	CodeResourceNotFound = -32002
	// CodeMissingCapability is MissingRequiredClientCapabilityError (basic/index.mdx).
	CodeMissingCapability = -32021
	// CodeUnsupportedVersion is UnsupportedProtocolVersionError (basic/versioning.mdx).
	CodeUnsupportedVersion = -32022
	// CodeURLElicitationRequired is the legacy URLElicitationRequiredError (2025-11-25), which
	// "MUST NOT" reach a modern client.
	CodeURLElicitationRequired = -32042
)

// logLevelNames are the logging levels (RFC 5424, as MCP names them) by rank.
var logLevelNames = [...]string{1: "debug", 2: "info", 3: "notice", 4: "warning", 5: "error", 6: "critical", 7: "alert", 8: "emergency"}

// logLevels rank the logging levels.
var logLevels = func() map[string]int {
	m := map[string]int{}
	for rank, name := range logLevelNames {
		if name != "" {
			m[name] = rank
		}
	}
	return m
}()

// LogRank is the rank of a logging level, from 1 (debug) to 8 (emergency); 0 for no level.
func LogRank(level string) int { return logLevels[level] }

// LogLevel is the logging level of a rank (LogRank); "" for a rank that names none.
func LogLevel(rank int) string {
	if rank < 1 || rank >= len(logLevelNames) {
		return ""
	}
	return logLevelNames[rank]
}

// InputMethods are the client's requests a server may answer with an InputRequiredResult:
// "Servers MUST NOT send InputRequiredResult responses on any other client requests"
// (basic/patterns/mrtr.mdx). In the legacy era they are the requests a server's own requests
// for input (elicitation, sampling, roots) are made during.
var InputMethods = map[string]bool{"tools/call": true, "prompts/get": true, "resources/read": true}

// ServerRequests are the requests a legacy server may send its client, each with the client
// capability it needs; in the modern era they are the input requests of an
// InputRequiredResult.
var ServerRequests = map[string]string{
	"sampling/createMessage": "sampling",
	"elicitation/create":     "elicitation",
	"roots/list":             "roots",
}

// TasksExtension is the identifier of the tasks extension (seps/2663-tasks-extension.md): a
// modern server that offers it may answer tools/call with a task, whose tasks/get, tasks/update
// and tasks/cancel go to that server. The legacy era's tasks (2025-11-25) differ in every
// message.
const TasksExtension = "io.modelcontextprotocol/tasks"

// TaskMethods are the requests of the tasks extension, routed by taskId.
var TaskMethods = map[string]bool{"tasks/get": true, "tasks/update": true, "tasks/cancel": true}

// RemovedMethods are the requests of the legacy era that the modern one has no more (changelog
// M2, M4, M5, M6), each with what a modern client does instead: a modern request for one is
// answered Method not found. tasks/result and tasks/list are not part of the tasks extension.
var RemovedMethods = map[string]string{
	"ping":                  "ping was removed in 2026-07-28 (any request proves the server is alive)",
	"logging/setLevel":      "logging/setLevel was removed in 2026-07-28: put the level in the request's _meta \"" + MetaLogLevel + "\"",
	"resources/subscribe":   "resources/subscribe was removed in 2026-07-28: use subscriptions/listen with resourceSubscriptions",
	"resources/unsubscribe": "resources/unsubscribe was removed in 2026-07-28: cancel the subscriptions/listen request",
	"tasks/result":          "tasks/result is not part of the tasks extension of 2026-07-28 (tasks/get returns the result)",
	"tasks/list":            "tasks/list is not part of the tasks extension of 2026-07-28",
}
