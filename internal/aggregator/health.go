package aggregator

import (
	"context"
	"fmt"
	"time"
)

// pingLoop pings a child every PingInterval; when PingFailures pings in a row go unanswered
// (each is given the interval), the child counts as crashed: it is killed, its tools, prompts
// and resources leave the catalog, the client is told, and it stays down.
func (a *Aggregator) pingLoop(s *server) {
	interval := a.opts.PingInterval
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	failures := 0
	for {
		select {
		case <-s.down:
			return
		case <-ticker.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), interval)
		err := s.session.Ping(ctx, nil)
		cancel()
		if err == nil {
			failures = 0
			continue
		}
		failures++
		s.log.Debug("ping failed", "failures", failures, "error", err)
		if failures >= a.opts.PingFailures {
			a.serverDown(s, fmt.Sprintf("did not answer %d pings in a row (--ping-interval %v, --ping-failures %d) and was stopped",
				failures, interval, a.opts.PingFailures))
			return
		}
	}
}
