package aggregator

import (
	"context"
	"slices"
	"sync"
	"time"
)

// A server that announces a list change (notifications/tools/list_changed, ...) has that list
// re-read; the client is told, once per burst of changes, about each list that changed.

// refresh re-reads lists of a server after it announced a change, and tells the client what
// changed.
func (a *Aggregator) refresh(s *server, ks ...kind) {
	select {
	case <-s.listed: // a change announced during its start is read after the first lists
	case <-s.down:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.opts.StartupTimeout)
	defer cancel()
	lists, stage, err := a.readLists(ctx, s, ks)
	if err != nil {
		s.log.Warn("re-reading a list after a change failed; keeping the previous list", "request", stage, "error", err)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-s.down:
		return
	default:
	}
	old := s.lists
	for _, k := range ks {
		s.lists[k] = lists[k]
	}
	if a.catalog.Load() == nil || a.restarting != nil {
		return // start-up, or the reload under way, builds the catalog with these lists
	}
	cat, cerr := buildCatalog(a.liveServers(), a.opts.Separator)
	if cerr != nil {
		s.lists = old
		s.log.Error("the new list cannot be served; keeping the previous list", "error", cerr)
		return
	}
	a.storeCatalog(cat)
}

// storeCatalog makes cat the current catalog and tells the client which lists changed.
// Callers hold a.mu.
func (a *Aggregator) storeCatalog(cat *catalog) {
	old := a.catalog.Load()
	a.catalog.Store(cat)
	for _, w := range cat.warnings {
		if !slices.Contains(old.warnings, w) {
			a.log.Warn(w)
		}
	}
	a.reportWithheld(old, cat)
	for k := range numKinds {
		if string(old.lists[k]) != string(cat.lists[k]) {
			a.notify.trigger(kinds[k].changed)
		}
	}
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
