package logging

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestTimestamped(t *testing.T) {
	at := time.Date(2026, 11, 27, 7, 1, 2, 345e6, time.FixedZone("", 3600))
	now := func() time.Time { return at }
	var out strings.Builder
	w := Timestamped(&out, now)
	for _, p := range []string{"one line\n", "two ", "writes\n", "three\nlines\nin one\n", "", "no end"} {
		if n, err := w.Write([]byte(p)); n != len(p) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", p, n, err)
		}
	}
	const stamp = "2026-11-27T07:01:02.345+01:00 "
	want := stamp + "one line\n" + stamp + "two writes\n" + stamp + "three\n" + stamp + "lines\n" + stamp + "in one\n" + stamp + "no end"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}

	// A logger over it: each record's line starts with the time.
	out.Reset()
	log := New(Timestamped(&out, now), slog.LevelInfo)
	log.Info("a session began", "pid", 42)
	log.Warn("two\nlines")
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if !strings.HasPrefix(line, stamp) {
			t.Errorf("a line without its time: %q", line)
		}
	}
}
