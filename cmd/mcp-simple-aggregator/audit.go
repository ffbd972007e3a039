package main

import (
	"log/slog"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/audit"
)

// openAuditLog opens the audit log of --audit-log (file, with the bodies of calls when bodies);
// nil without the flag, and when the file cannot be opened: that is one warning, and the
// servers are served without an audit log rather than not at all (a client's servers must not
// go away over a log file). What goes wrong later (a full disk) is the log's own warnings,
// once each.
func openAuditLog(file string, bodies bool, log *slog.Logger) *audit.Log {
	if file == "" {
		return nil
	}
	l, err := audit.Open(file, &audit.Options{Bodies: bodies, Warn: func(msg string) { log.Warn(msg) }})
	if err != nil {
		log.Warn(err.Error() + "; serving without an audit log")
		return nil
	}
	return l
}
