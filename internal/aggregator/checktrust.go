package aggregator

import (
	"fmt"
	"slices"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/trust"
)

// What check says of trust: the hidden characters of every server (the scan is always on) and,
// whenever there is a lock file beside the configuration, each difference from it, member by
// member. A difference that --pinned would withhold fails the check, so that a script (or CI
// beside a committed lock) notices a server that changed what it tells the model.

// checkLock reads the lock file of cfg for check: nil when there is none. The keys it pins
// that cfg no longer has are noted; a lock that cannot be read is a problem of the report.
func (a *Aggregator) checkLock(rep *Report, cfg *config.Config) *trust.Lock {
	path := trust.LockPath(cfg.File)
	lock, data, err := readLock(path)
	if err != nil {
		rep.Problems = append(rep.Problems, fmt.Sprintf("%v; run %s to write it anew", err, pinCommand(cfg.File, "")))
		rep.OK = false
		return nil
	}
	if data == nil {
		return nil
	}
	rep.LockFile = path
	for _, key := range lock.Keys() {
		configured := slices.ContainsFunc(cfg.Servers, func(s config.Server) bool { return s.Key == key }) ||
			slices.ContainsFunc(cfg.Skipped, func(s config.Skipped) bool { return s.Key == key && !s.Remote })
		if !configured {
			rep.LockOnly = append(rep.LockOnly, key)
		}
	}
	return lock
}

// checkTrust adds to r, the report of the started server s, its hidden characters, its
// differences from lock (when there is one), and its instructions when --pinned withholds
// them (withheld is screen's verdict). A difference that --pinned would withhold fails the
// report.
func checkTrust(rep *Report, r *ServerReport, s *server, withheld [numKinds + 1]map[int]withheldDef, lock *trust.Lock) {
	r.Definitions = s.trusted()
	r.HiddenCharacters = s.findings()
	if w, ok := withheld[kindInstructions][0]; ok {
		r.Withheld = append(r.Withheld, w.report())
	}
	if lock == nil {
		return
	}
	r.Lock = lock.Compare(r.Definitions)
	if slices.ContainsFunc(r.Lock, trust.Difference.Withheld) {
		rep.OK = false
	}
}

// report is w as check reports it.
func (w withheldDef) report() WithheldReport {
	return WithheldReport{Kind: kindNames[w.kind], Name: w.name, Line: w.String(), Violations: w.violations, Difference: w.difference}
}
