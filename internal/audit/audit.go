// Package audit writes the audit log (--audit-log FILE): one JSON object per line for each
// request the client sends to a server, each definition withheld or changed, and each start,
// stop, crash and restart of a server, so that a reader with jq can answer "which tools did
// the model call today" (docs/trust-integration.md has the format, an example and queries).
// The specification asks clients to keep one: "Clients SHOULD: ... Log tool usage for audit
// purposes" (2026-07-28, server/tools.mdx, Security Considerations).
//
// Writing never holds up a call: an event is encoded by its caller (a few microseconds, so
// that the caller's buffers can be reused at once) and queued; one goroutine writes what is
// queued. A full queue drops the event, and a write that fails loses the lines it held; both
// are counted (Stats) and written into the log as a "lost" line once writing works again;
// they cost a warning (drops once, failures once until writing works again), never an error
// to a call.
//
// The file is created with mode 0600, since arguments and results (with Bodies) may hold
// secrets, and appended to; an existing file that others may read is used as it is, with a
// warning. Its size is bounded by rotation, done by github.com/DeRuina/timberjack (see Open):
// at most MaxBackups rotated files of MaxMegabytes each are kept beside it, every one 0600.
package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/DeRuina/timberjack"
)

// Options configure a Log; nil means the defaults.
type Options struct {
	// MaxMegabytes is the size (MiB) past which the file is rotated; 10 when 0.
	MaxMegabytes int
	// MaxBackups is how many rotated files are kept; 5 when 0. The log takes at most
	// (MaxBackups + 1) × MaxMegabytes.
	MaxBackups int
	// Bodies writes the arguments and results of calls (--audit-log-bodies). They may hold
	// secrets, so they are left out by default.
	Bodies bool
	// Queue is how many events may wait for the writer; 4096 when 0. Past it, events are
	// dropped and counted.
	Queue int
	// Warn is told of trouble: an existing file that others may read, a write that fails
	// (once, until one works again, which it is told too), events dropped (once). nil
	// ignores them. It is called from the log's own goroutines (from Open's caller
	// for the file's mode), never from a call's.
	Warn func(msg string)
}

const (
	defaultMaxMegabytes = 10
	defaultMaxBackups   = 5
	// backupTime names a rotated file to the nanosecond: timberjack keeps MaxBackups distinct
	// times, so two rotations in one millisecond (its default's precision; a burst of calls
	// written at once can pass the size twice) kept a file too many, every time.
	backupTime   = "2006-01-02T15-04-05.000000000"
	defaultQueue = 4096
	// maxBody is the largest argument or result written with Bodies: a larger one is left
	// out and its size written instead, so that a line always fits in a file (the rotation
	// refuses a write larger than MaxMegabytes) and one huge result does not push out the
	// record of every call before it.
	maxBody = 256 << 10
	// maxBatch is how much the writer gathers into one write, and gatherFor how long at most
	// it gathers after the first event before it writes: a line is in the file within it.
	maxBatch  = 256 << 10
	gatherFor = 50 * time.Millisecond
	// closeWait is how long Close lets a FIFO or device take what is queued.
	closeWait = 2 * time.Second
)

// Log is an open audit log. A nil *Log is a log that is not kept: its methods do nothing, so
// that callers need not ask whether there is one. A Log is safe for concurrent use.
type Log struct {
	path   string
	bodies bool
	warn   func(string)
	w      io.WriteCloser

	lines chan []byte
	stop  chan struct{}
	done  chan struct{}

	closed     atomic.Bool
	dropped    atomic.Int64 // since the last "lost" line
	dropWarned atomic.Bool  // drops are warned of once: a writer that falls behind once will again

	written, lost, droppedTotal atomic.Int64 // for Stats
}

// Open opens the audit log at path, creating it with mode 0600, and starts its writer. A
// file that cannot be opened for appending (a directory that does not exist, a read-only
// file or directory) is an error, which the caller reports once and then serves without an
// audit log: nothing else is tried, and nothing is moved aside or created elsewhere.
//
// A regular file is rotated by timberjack (chosen over natefinch/lumberjack, whose last
// release is of 2023 and whose Close leaves its cleanup goroutine running: timberjack is
// its maintained fork with the same rotation, a FileMode it sets with chmod on every new
// file whatever the umask, and a Close that waits for its goroutines). Anything else (a
// FIFO, a character device, /dev/stderr) is written as it is, never renamed.
func Open(path string, opts *Options) (*Log, error) {
	if opts == nil {
		opts = &Options{}
	}
	o := *opts
	if o.MaxMegabytes <= 0 {
		o.MaxMegabytes = defaultMaxMegabytes
	}
	if o.MaxBackups <= 0 {
		o.MaxBackups = defaultMaxBackups
	}
	if o.Queue <= 0 {
		o.Queue = defaultQueue
	}
	warn := o.Warn
	if warn == nil {
		warn = func(string) {}
	}
	// A symlinked log is written, and rotated, where the link points: rotation renames the
	// file, and would otherwise replace the link with a file of its own.
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	// Opened here first, so that a file that cannot be written is an error now, rather than
	// moved aside by the rotation, which opens a new file when it cannot append to the old.
	// A FIFO without a reader is an error too (O_NONBLOCK), not a start-up that hangs.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|nonblock, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit log: %w", err)
	}
	var w io.WriteCloser
	if info.Mode().IsRegular() {
		f.Close()
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			warn(fmt.Sprintf("audit log %s: others may read it (mode %#o); it is used as it is, and the files that rotation creates are 0600; "+
				"to keep the calls it records private, run chmod 600 %s", path, perm, path))
		}
		w = &timberjack.Logger{Filename: path, MaxSize: o.MaxMegabytes, MaxBackups: o.MaxBackups, FileMode: 0o600, BackupTimeFormat: backupTime}
	} else {
		w = f
	}
	l := &Log{
		path: path, bodies: o.Bodies, warn: warn, w: w,
		lines: make(chan []byte, o.Queue), stop: make(chan struct{}), done: make(chan struct{}),
	}
	go l.run()
	return l, nil
}

// Bodies reports whether arguments and results are written, so that a caller need not
// gather them otherwise.
func (l *Log) Bodies() bool { return l != nil && l.bodies }

// Stats are the log's counts of events since Open.
type Stats struct {
	// Written are the events written.
	Written int64
	// Lost are the events a failed write lost; Dropped those the queue had no room for.
	Lost, Dropped int64
}

// Stats says how many events were written, lost and dropped.
func (l *Log) Stats() Stats {
	if l == nil {
		return Stats{}
	}
	return Stats{Written: l.written.Load(), Lost: l.lost.Load(), Dropped: l.droppedTotal.Load()}
}

// Close writes what is queued, stops the writer and closes the file. Events after Close are
// dropped without a count.
func (l *Log) Close() error {
	if l == nil || !l.closed.CompareAndSwap(false, true) {
		return nil
	}
	if f, ok := l.w.(*os.File); ok {
		// A FIFO whose reader stopped reading would hold the writer, and so the shutdown,
		// forever: what is not written within closeWait is lost.
		_ = f.SetWriteDeadline(time.Now().Add(closeWait))
	}
	close(l.stop)
	<-l.done
	return l.w.Close()
}

// enqueue queues one encoded line, or counts it dropped; it never waits.
func (l *Log) enqueue(line []byte) {
	if l.closed.Load() {
		return
	}
	select {
	case l.lines <- line:
	default:
		l.dropped.Add(1)
		l.droppedTotal.Add(1)
		if l.dropWarned.CompareAndSwap(false, true) {
			// In a goroutine: whoever Warn writes to must not hold up the call either.
			go l.warn(fmt.Sprintf("audit log %s: the file does not take the events as fast as they come; "+
				"those that do not fit in the queue are dropped, and each gap is recorded in the log as a \"lost\" line", l.path))
		}
	}
}

// run is the writer: it gathers what is queued into one write at a time.
func (l *Log) run() {
	defer close(l.done)
	var (
		batch   bytes.Buffer
		n       int64 // events in batch
		pending int64 // events lost since the last "lost" line
		why     string
		failing bool
		// broken: a failed write left part of a line in the file, to be ended before the
		// next line, so that one line is lost and not the one after it too.
		broken bool
	)
	// flush writes the batch; the last one (final) also records the events lost or dropped
	// since the last line.
	flush := func(final bool) {
		if batch.Len() == 0 && (!final || l.dropped.Load() == 0 && pending == 0) {
			return
		}
		data := batch.Bytes()
		d := l.dropped.Swap(0)
		if d > 0 || pending > 0 || broken {
			// The gap is recorded where it happened.
			var head []byte
			if broken {
				head = append(head, '\n')
			}
			if d > 0 || pending > 0 {
				head = append(head, lostLine(pending, why, d)...)
			}
			data = append(head, data...)
		}
		written, err := l.w.Write(data)
		if err != nil {
			l.dropped.Add(d) // still to be recorded
			pending += n
			l.lost.Add(n)
			why = err.Error()
			broken = broken && written == 0 || written > 0 && data[written-1] != '\n'
			if !failing {
				failing = true
				l.warn(fmt.Sprintf("audit log %s: %v; events are counted and not written until writing works again", l.path, err))
			}
		} else {
			l.written.Add(n)
			if failing {
				l.warn(fmt.Sprintf("audit log %s: writing again, after %d events were lost", l.path, pending))
			}
			failing, pending, why, broken = false, 0, "", false
		}
		batch.Reset()
		n = 0
	}
	gather := time.NewTimer(0)
	<-gather.C
	for {
		select {
		case line := <-l.lines:
			// What comes for the next gatherFor goes into the same write: a busy session's
			// calls cost the writer a wake-up and a write each gatherFor, not one per call (at
			// thousands of calls a second, that was a fifth of the aggregator's CPU).
			batch.Write(line)
			n++
			gather.Reset(gatherFor)
			for more := true; more && batch.Len() < maxBatch; {
				select {
				case line := <-l.lines:
					batch.Write(line)
					n++
				case <-gather.C:
					more = false
				case <-l.stop:
					more = false
					gather.Stop()
				}
			}
			if !gather.Stop() {
				select {
				case <-gather.C:
				default:
				}
			}
			flush(false)
		case <-l.stop:
			for {
				select {
				case line := <-l.lines:
					batch.Write(line)
					n++
					if batch.Len() >= maxBatch {
						flush(false)
					}
					continue
				default:
				}
				break
			}
			flush(true)
			return
		}
	}
}

// lostLine is the line that records a gap: events a failed write lost (why: its error) and
// events the queue dropped.
func lostLine(lost int64, why string, dropped int64) []byte {
	e := struct {
		Time    string `json:"time"`
		Event   string `json:"event"`
		Lost    int64  `json:"lost,omitempty"`
		Error   string `json:"error,omitempty"`
		Dropped int64  `json:"dropped,omitempty"`
	}{timestamp(time.Now()), "lost", lost, why, dropped}
	line, _ := encode(e)
	return line
}

// timestamp is RFC 3339 with milliseconds, in local time with its offset: so that "today"
// is a prefix of the date (jq: startswith("2026-11-25")) and the order of lines is the order
// of the strings within one offset.
func timestamp(t time.Time) string {
	_, offset := t.Zone()
	sec := t.Unix()
	if f := lastSecond.Load(); f != nil && f.unix == sec && f.offset == offset {
		// The same second as the line before (a busy session's calls): only the milliseconds
		// differ, and time.Format was a third of the log's cost on a call.
		ms := t.Nanosecond() / int(time.Millisecond)
		return f.head + "." + string([]byte{byte('0' + ms/100), byte('0' + ms/10%10), byte('0' + ms%10)}) + f.zone
	}
	s := t.Format(timestampLayout)
	lastSecond.Store(&formattedSecond{unix: sec, offset: offset, head: s[:19], zone: s[23:]})
	return s
}

const timestampLayout = "2006-01-02T15:04:05.000Z07:00"

// formattedSecond is the last second timestamp formatted: the date and time before the
// milliseconds, and the offset after them.
type formattedSecond struct {
	unix       int64
	offset     int
	head, zone string
}

var lastSecond atomic.Pointer[formattedSecond]

// encode is one line of JSON: no HTML escaping (a reader reads < as <), a newline at the end.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
