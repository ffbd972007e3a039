package logging

import (
	"bytes"
	"io"
	"sync"
	"time"
)

// TimeLayout is the time that starts each line of a Timestamped writer: the local time to the
// millisecond, with its offset from UTC.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Timestamped returns a writer that starts every line written through it with the time (now)
// the line's first byte was written, and a space: for a log that outlives the session that
// reads it (the shared process's). A line may come in several writes, and a write may hold
// several lines.
func Timestamped(w io.Writer, now func() time.Time) io.Writer {
	return &stamper{w: w, now: now, atStart: true}
}

type stamper struct {
	mu      sync.Mutex
	w       io.Writer
	now     func() time.Time
	atStart bool // the next byte starts a line
	buf     []byte
}

func (s *stamper) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = s.buf[:0]
	for rest := p; len(rest) > 0; {
		if s.atStart {
			s.buf = s.now().AppendFormat(s.buf, TimeLayout)
			s.buf = append(s.buf, ' ')
		}
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line = rest[:i+1]
		}
		s.buf = append(s.buf, line...)
		rest = rest[len(line):]
		s.atStart = line[len(line)-1] == '\n'
	}
	if _, err := s.w.Write(s.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}
