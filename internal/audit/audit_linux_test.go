package audit

import (
	"strings"
	"testing"
)

// TestFullDisk: a file whose writes fail (/dev/full: "no space left on device") costs one
// warning, however many events follow; calls go on, and the lost events are counted.
func TestFullDisk(t *testing.T) {
	w := newWarnings()
	l, err := Open("/dev/full", &Options{Warn: w.warn})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	for i := range n {
		l.Call(Call{Server: "s", Method: "tools/call", Tool: "t", Outcome: Result, RequestBytes: i})
		if i == n/2 {
			l.Server(Server{Server: "s", Action: ServerCrash})
		}
	}
	if err := l.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	ws := w.all()
	if len(ws) != 1 || !strings.Contains(ws[0], "no space left on device") || !strings.Contains(ws[0], "/dev/full") {
		t.Errorf("warnings %q, want one naming the file and the error", ws)
	}
	if s := l.Stats(); s.Lost+s.Dropped != n+1 || s.Written != 0 {
		t.Errorf("stats %+v, want all %d events lost or dropped", s, n+1)
	}
}
