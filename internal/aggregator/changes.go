package aggregator

import (
	"context"
	"slices"
	"sync"
	"time"
)

// A server that announces a list change (notifications/tools/list_changed, ...) has that list
// re-read; the client is told, once per burst of changes, about each list that changed.

// refresh re-reads lists of a server after it announced a change, and publishes them.
func (a *Aggregator) refresh(s *server, ks ...kind) {
	select {
	case <-s.listed: // a change announced during its start is read after the first lists
	case <-s.retired:
		return
	}
	// Two re-readings of a list can overlap (a change announced while one is under way): the
	// one begun later reads what the server lists after both changes, and if it ends first,
	// the earlier one's list, older, must not replace it.
	var begun [numKinds]uint64
	a.roster.mu.Lock()
	for _, k := range ks {
		s.reads[k]++
		begun[k] = s.reads[k]
	}
	a.roster.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), a.opts.StartupTimeout)
	defer cancel()
	lists, hints, stage, err := a.readLists(ctx, s, ks)
	if err != nil {
		s.failureLog()("re-reading a list after a change failed; keeping the previous list", "request", stage, "error", err)
		return
	}
	a.roster.mu.Lock()
	defer a.roster.mu.Unlock()
	select {
	case <-s.retired:
		return
	default:
	}
	old, oldHints, oldRead := s.lists, s.hints, s.read
	before := a.beforeChange(s) // for the audit log (audit.go)
	newer := false
	for _, k := range ks {
		if begun[k] > s.read[k] {
			s.lists[k], s.hints[k], s.read[k] = lists[k], hints[k], begun[k]
			newer = true
		}
	}
	if !newer {
		return // overtaken for every list it read
	}
	s.verdicts, s.trust = nil, trustState{}
	if a.catalog.Load() == nil {
		return // the start-up builds the first catalog with these lists
	}
	if err := a.publish(); err != nil {
		s.lists, s.hints, s.read, s.verdicts, s.trust = old, oldHints, oldRead, nil, trustState{}
		s.log.Error("the new list cannot be served; keeping the previous list", "error", err)
		return
	}
	a.auditChanged(before, s)
	a.remember(s) // the cache follows what it lists (--lazy)
}

// debouncer sends each list_changed notification once after a burst of changes.
type debouncer struct {
	mu      sync.Mutex
	delay   time.Duration
	send    func(method string)
	pending []string
	timer   *time.Timer
}

func newDebouncer(delay time.Duration, send func(method string)) *debouncer {
	return &debouncer{delay: delay, send: send}
}

func (d *debouncer) trigger(method string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !slices.Contains(d.pending, method) {
		d.pending = append(d.pending, method)
	}
	if d.timer == nil {
		d.timer = time.AfterFunc(d.delay, func() {
			d.mu.Lock()
			pending := d.pending
			d.pending, d.timer = nil, nil
			d.mu.Unlock()
			for _, m := range pending {
				d.send(m)
			}
		})
	}
}

func (d *debouncer) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
	}
}
