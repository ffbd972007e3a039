package aggregator

import (
	"slices"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/trust"
)

// What a server's definitions tell the model, read by internal/trust: the scan for hidden
// characters (always on, here) and the comparison with the lock (--pinned, pinned.go). Both
// read one trust.Server per list read of a server, made at first need and dropped with the
// lists, as the schema's verdicts are (withheld.go).

// trustState is what internal/trust made of a server's lists. Guarded by roster.mu (or owned
// with the server, as check does); whoever sets s.lists clears it (s.trust = trustState{}).
type trustState struct {
	read *trust.Server
	// lock is the lock the comparison was made with, and unpinned what it withholds
	// (pinned.go); lock is nil until compared.
	lock     *trust.Lock
	unpinned map[pinKey]trust.Difference
}

// trusted is what the lists of s tell the model, read once per list read: the full lists,
// before the tool filters, as the lock pins what the server lists (a tool a filter shows later
// needs no new pin). trust.Read does no work until asked. Callers hold roster.mu or own s.
func (s *server) trusted() *trust.Server {
	if s.trust.read == nil {
		s.trust.read = trust.Read(s.key, trust.Lists{
			Tools: s.lists[kindTools], Prompts: s.lists[kindPrompts], Resources: s.lists[kindResources],
			ResourceTemplates: s.lists[kindTemplates], Instructions: s.instructions,
		})
	}
	return s.trust.read
}

// findings are the hidden characters in what s tells the model, but in the tools its filters
// hide (they never reach the model, and a filter is how a user keeps a server's tools quiet).
// Callers hold roster.mu or own s.
func (s *server) findings() []trust.Finding {
	all := s.trusted().Findings()
	if len(all) == 0 {
		return nil
	}
	return slices.DeleteFunc(slices.Clone(all), func(f trust.Finding) bool {
		if f.Kind != trust.Tool {
			return false
		}
		_, hidden := s.filter.Hidden(f.Name)
		return hidden
	})
}

// findingKey tells a finding of one catalog from those of the next.
func findingKey(f trust.Finding) string { return f.Server + "\x00" + f.String() }

// reportHidden warns of the hidden characters in what the model reads that cat has and old
// had not (old is nil for the first catalog), once per server: on the log, and to the client
// as a log message at warning level. A server's lists that change warn of their new findings
// only; a restart or a reload that lists the same warns of nothing. Whoever publishes a
// catalog calls it. Nothing is withheld for it.
func (a *Aggregator) reportHidden(old, cat *catalog) {
	if len(cat.findings) == 0 {
		return
	}
	seen := map[string]bool{}
	if old != nil {
		for _, f := range old.findings {
			seen[findingKey(f)] = true
		}
	}
	var lines []string
	for i := 0; i < len(cat.findings); {
		key := cat.findings[i].Server
		var fresh []trust.Finding
		for ; i < len(cat.findings) && cat.findings[i].Server == key; i++ {
			if !seen[findingKey(cat.findings[i])] {
				fresh = append(fresh, cat.findings[i])
			}
		}
		if line := trust.Warning(key, fresh); line != "" {
			a.log.Warn(line)
			lines = append(lines, line)
		}
	}
	if len(lines) > 0 {
		go func() { // as reportWithheld: a client that does not read must not hold up publish
			for _, line := range lines {
				a.client.clientLog("warning", line)
			}
		}()
	}
}
