package main

import (
	"log/slog"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/audit"
)

// openAuditLog opens the audit log of --audit-log; nil without the flag, and when the file
// cannot be opened: that is one warning, and the servers are served without an audit log
// rather than not at all (a client's servers must not go away over a log file). What goes
// wrong later (a full disk) is the log's own warnings, once each.
func openAuditLog(opts options, log *slog.Logger) *audit.Log {
	if opts.auditLog == "" {
		return nil
	}
	l, err := audit.Open(opts.auditLog, &audit.Options{Bodies: opts.auditBodies, Warn: func(msg string) { log.Warn(msg) }})
	if err != nil {
		log.Warn(err.Error() + "; serving without an audit log")
		return nil
	}
	return l
}
