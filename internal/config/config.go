// Package config loads the configuration file: it reads it, parses the JSON, validates the raw
// document against the schema in schema/, decodes it into the generated types of gen/config,
// converts those at once into the small domain types below and expands environment
// references. Nothing may be served before Load has returned without error; the check command
// alone may go on with the servers that an *UnusableServersError says are usable.
package config

import (
	"fmt"
	"strings"
)

// Config is a loaded, validated and expanded configuration.
type Config struct {
	// File is the path the configuration was read from, as given.
	File string
	// Servers are the servers to start: the enabled stdio entries, sorted by key, with every
	// environment reference expanded and every path resolved.
	Servers []Server
	// Skipped are the entries that are not started, sorted by key: the disabled ones and the
	// remote ones (only stdio servers are served).
	Skipped []Skipped
}

// Skipped is an entry of "mcpServers" (or VS Code's "servers") that is not started.
type Skipped struct {
	// Key is the entry's key in "mcpServers", exactly as written.
	Key string
	// Pointer is the JSON Pointer of the field that decided it, such as
	// "/mcpServers/x/disabled" or "/mcpServers/x/url".
	Pointer string
	// Remote is true for an entry reached over the network ("url", "httpUrl", "serverUrl" or a
	// "type" other than "stdio"), false for a disabled one.
	Remote bool
	// Reason says why, for people, such as `"disabled": true` or
	// `remote server ("type": "http"): only stdio servers are served`.
	Reason string
}

// Server is one stdio server to start, with every environment reference expanded.
type Server struct {
	// Key is the server's key in "mcpServers", exactly as written.
	Key string
	// Command is the program to run; it is executed directly, never by a shell.
	Command string
	// Args are the program's arguments.
	Args []string
	// Env holds the variables to add to the aggregator's environment for this server: those
	// of "envFile", overlaid by those of "env" (which win).
	Env map[string]string
	// Dir is the absolute working directory from "cwd"; "" means the aggregator's own.
	Dir string
	// EnvFile is the absolute path of "envFile"; "" when there is none.
	EnvFile string
	// Tools decides which of the server's tools are served ("includeTools", "excludeTools",
	// "disabledTools").
	Tools Filter
	// AlwaysLoad is "alwaysLoad": with --tool-search, the server's tools are listed in full.
	AlwaysLoad bool
}

// Problem is one thing wrong with a configuration file, at a place in it.
type Problem struct {
	// Pointer is the JSON Pointer (RFC 6901) of the value the problem is about; "" is the
	// whole document.
	Pointer string
	// Message says what is wrong and, where it helps, what to do.
	Message string
}

// Error is a configuration that cannot be used. Its message has one line per problem, each
// as "<file>: <pointer>: <message>", followed by a hint when there is one.
type Error struct {
	File     string
	Problems []Problem
	// Hint is a closing line that says what to do about all the problems together.
	Hint string
}

func (e *Error) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(formatProblem(e.File, p))
	}
	if e.Hint != "" {
		b.WriteByte('\n')
		b.WriteString(e.Hint)
	}
	return b.String()
}

// UnusableServersError is the error of Load and Parse for a file that is valid but some of
// whose servers cannot be started as written: an environment variable they refer to is not set
// (the common case), a VS Code input, a "cwd" that is not a directory, an "envFile" that cannot
// be read. Every such problem of every server is found before it is returned, so that one run
// says all of them.
//
// Serving stops with it, as with any error of Load: its message (Error) names every problem, a
// line each, as "<file>: <JSON Pointer>: server "<key>": <what>", followed by the hint to set
// the variables or give defaults. The check command may go on with Usable, so that one unset
// variable does not keep the other servers from being checked:
//
//	cfg, warnings, err := config.Load(path, os.LookupEnv)
//	var unusable *config.UnusableServersError
//	if errors.As(err, &unusable) {
//		fmt.Fprintln(stderr, err)   // every unset variable, at once
//		cfg = unusable.Usable       // then check the others; the result is a failure
//	}
//
// errors.As finds the *Error inside it too (Unwrap).
type UnusableServersError struct {
	// Err holds every problem found, in the order of the servers (sorted by key) and of their
	// fields; its message is this error's.
	Err *Error
	// Usable is the configuration of the servers that have no problem: what Load would
	// return had the others not been in the file. Its Skipped are the file's disabled and
	// remote entries, as ever; the unusable servers are in neither list.
	Usable *Config
	// Missing are the environment variables that are not set, by the key of the server that
	// refers to them without a default, each once per server, in order of appearance; Err
	// says where each is used (the JSON Pointer of every value that refers to it).
	Missing map[string][]string
	// Unusable are the keys of the servers left out of Usable, sorted: those of Missing, and
	// those with another problem. ProblemsOf gives each one's problems.
	Unusable []string

	byServer map[string][]Problem
}

func (e *UnusableServersError) Error() string { return e.Err.Error() }

// ProblemsOf are the problems of the server key (one of Unusable), in the order of Err; nil for
// a server that has none. Each is written as Err writes it with Warning{File: e.Err.File,
// Problem: p}.String(): "<file>: <JSON Pointer>: server "<key>": <what>".
func (e *UnusableServersError) ProblemsOf(key string) []Problem { return e.byServer[key] }

func (e *UnusableServersError) Unwrap() error { return e.Err }

// Warning is a part of the configuration that is ignored.
type Warning struct {
	File string
	Problem
}

func (w Warning) String() string { return formatProblem(w.File, w.Problem) }

func formatProblem(file string, p Problem) string {
	ptr := p.Pointer
	if ptr == "" {
		// The empty pointer is the whole document; "/" reads better and cannot be confused
		// with anything the schema allows to be wrong (a top-level "" key is ignored).
		ptr = "/"
	}
	return fmt.Sprintf("%s: %s: %s", file, ptr, p.Message)
}

// pointer builds a JSON Pointer from reference tokens, escaping "~" and "/" (RFC 6901).
func pointer(tokens ...string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// serverPrefix names the server a pointer is about, so that the key is readable even when the
// pointer has to escape it.
func serverPrefix(tokens []string) string {
	if len(tokens) >= 2 && (tokens[0] == "mcpServers" || tokens[0] == vscodeRoot) {
		return fmt.Sprintf("server %q: ", tokens[1])
	}
	return ""
}
