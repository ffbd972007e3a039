package shared

import (
	"bytes"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/rawjson"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// A hosted session writes to its client directly: the forwarder hands the shared process the
// client's stdout (or, when that is not a pipe or a socket of its own, a pipe it copies to it:
// clientOutput in pipes_unix.go), so that the session's messages reach the client as an
// unshared session's do, with no process between them in that direction. The forwarder still
// has to know, should the shared process end, which of the client's requests were answered:
// beside the client's output the session writes receipts, into a ring of its journal
// (journal_unix.go), memory that the forwarder maps too, which it takes seldom (when it takes
// the client's input, when the ring fills, and to its end when the shared process ends), so
// that neither process makes a system call for them per message (a write to a pipe each was
// 0.6 system calls a call with eight callers: BENCHMARKS.md). Whether the shared process can
// write more of them the forwarder learns from a pipe that nothing is written to, whose end
// the shared process closes after the client's output (receiptsEnd, pipes_unix.go).
//
// Receipts are lines: after a write that ends an answer to a request of the client's, the
// answer's ID as written ("7", "\"a\""); after a write that leaves a line unfinished (a client
// that does not read at once), "+", and after the write that ends such a line, its ID or "-".
// A write that may be cut short, one that waits for the client (a large message, or one behind
// it: Write) or one a pipe may not take whole (over PIPE_BUF), says "+" before it and, unless it
// leaves a line unfinished, "-" after. So the forwarder knows, when the shared process ends,
// which requests are unanswered and whether the client's output stops in the middle of a line,
// which its errors must not be appended to. The receipts of a write are written after it: a
// shared process killed between the two (a few instructions; a receipt written in part, which
// the ring keeps, is no receipt) leaves an answer the client has that the forwarder answers
// again, which the client takes for an answer to no request of its
// own; and where the client's output is a socket, which may take part of a short write, a line
// cut short there that the forwarder does not know of, so that the first error it writes is
// joined to it and lost to the client.

// clientOut is a hosted session's output to its client, with the receipts beside it. It leaves
// out the answers to the requests the forwarder sent again to a new shared process (their IDs
// are the forwarder's, againPrefix): the client did not send them. The stdio.Conn of the
// session writes to it one call at a time.
type clientOut struct {
	mu   sync.Mutex
	f    *os.File
	try  func([]byte) (int, error) // one non-blocking write to f; nil when f cannot take one
	some func([]byte) (int, error) // a write to f that waits until it takes some
	rec  *os.File                  // the shared process's end of the receipts' end: closed once no receipt follows
	j    *journal                  // its receipts ring; released by close
	// rhead is how far the session wrote the ring; rasked the ring's tail, +1, when the
	// forwarder was last asked to take it.
	rhead, rasked uint64
	rclosed       bool // the receipts ended: nothing more is written to the ring

	// The line being written, when a write ended in the middle of one.
	mid  bool   // a line is under way
	skip bool   // it is left out
	id   []byte // the ID it answers, if it is an answer

	rpending  []byte // receipts the ring had no room for, for flushReceipts
	rflushing bool
	// drain asks the forwarder to take the journal (a line on the log connection), with wait
	// to say when it did (room): it takes it as its client's input grows what the receipts
	// may hold, which the "+" and "-" of writes that may be cut short grow too, with no input.
	drain     func(wait bool)
	room      chan struct{} // the forwarder took the journal
	done      chan struct{} // closed once the receipts ended
	flushed   chan struct{} // closed when flushReceipts ends, for closeReading
	closeOnce sync.Once

	spans []outSpan // scratch
	batch []byte    // scratch: the IDs a batch's answers answer (batchIDs)
	recs  []byte    // scratch
}

// newClientOut writes to the client's output f, and the receipts into j's ring (holding j
// until it closes), closing end once it writes no more of them.
func newClientOut(f, end *os.File, j *journal) *clientOut {
	j.hold()
	return &clientOut{f: f, try: stdio.TryWrite(f), some: writeSome(f), rec: end, j: j,
		rhead: atomic.LoadUint64(j.receipts.head), drain: func(bool) {},
		room: make(chan struct{}, 1), done: make(chan struct{})}
}

// TryWrite writes what the client's output takes of b at once (stdio.TryWriter). A write of
// more than a pipe takes whole (PIPE_BUF: Linux's 4 KiB) may be cut short, so its receipts say
// "+" before it and "-" after, as a waiting Write's do; a shorter one to a pipe is all or
// nothing.
func (o *clientOut) TryWrite(b []byte) (int, error) {
	if o.try == nil {
		return 0, nil
	}
	if len(b) <= pipeBuf {
		return o.write(b, o.try)
	}
	o.mu.Lock()
	o.receipts([]byte("+\n"))
	o.mu.Unlock()
	n, err := o.write(b, o.try)
	o.closed()
	return n, err
}

// closed says in the receipts, after a write that said "+" before it, that no line is left
// unfinished, unless one is.
func (o *clientOut) closed() {
	o.mu.Lock()
	if !o.mid || o.skip {
		o.receipts([]byte("-\n"))
	}
	o.mu.Unlock()
}

// Write writes b, waiting for the client to take it, with "+" in the receipts before and "-"
// after (unless it leaves a line unfinished).
func (o *clientOut) Write(b []byte) (int, error) {
	o.mu.Lock()
	o.receipts([]byte("+\n"))
	o.mu.Unlock()
	done := 0
	for done < len(b) {
		n, err := o.write(b[done:], o.some)
		done += n
		if err == nil && n == 0 {
			err = io.ErrShortWrite
		}
		if err != nil {
			return done, err
		}
	}
	o.closed()
	return done, nil
}

// Close closes the client's output and ends the receipts. The receipts the ring had no room
// for are left unwritten: the forwarder does not take them when the session ends (see
// closeReading).
func (o *clientOut) Close() error { return o.close(false) }

// closeReading closes the client's output and then ends the receipts, once those the ring had
// no room for are written (for receiptsWait at most): the forwarder takes them to their end
// when the shared process ends under a session that goes on.
func (o *clientOut) closeReading() error { return o.close(true) }

// receiptsWait bounds the wait of closeReading for the forwarder to take the receipts.
const receiptsWait = 5 * time.Second

// receiptsSize is the size of the receipts' ring, and receiptsDrainAt what it holds when the
// session asks the forwarder to take it. As a rule the receipts of what the client sends before
// the forwarder takes its input (journalDrainAt) take far less (an ID a request); the "+" and "-"
// of large messages, which come with no input, and receipts longer than their requests (IDs
// written with escapes) ask on their own.
const (
	receiptsSize    = 64 << 10
	receiptsDrainAt = receiptsSize / 2
)

func (o *clientOut) close(flush bool) error {
	var err error
	o.closeOnce.Do(func() {
		err = o.f.Close() // waits for a write under way: its receipts are then written or waiting
		o.mu.Lock()
		if flush && o.rflushing { // receipts wait for room: flushReceipts writes them all
			o.flushed = make(chan struct{})
			flushed := o.flushed
			o.mu.Unlock()
			select {
			case <-flushed:
			case <-time.After(receiptsWait):
			}
			o.mu.Lock()
		}
		o.rpending, o.rclosed = nil, true
		close(o.done)
		o.mu.Unlock()
		o.rec.Close() // the forwarder takes the ring to its end after this
		o.j.release()
	})
	return err
}

// outSpan is one line, or the part of one, in what a write is given.
type outSpan struct {
	from, to int
	ends     bool   // the line ends here
	skip     bool   // left out
	cont     bool   // continues a line an earlier write left unfinished
	id       []byte // the ID of the request it answers
}

// write writes b with write, leaving out the lines to leave out, and writes the receipts of
// what it wrote. It returns how much of b it is done with: written or left out.
func (o *clientOut) write(b []byte, write func([]byte) (int, error)) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	spans := o.split(b)
	recs := o.recs[:0]
	done := 0
	var err error
	for i := 0; i < len(spans); {
		if spans[i].skip {
			done = spans[i].to
			o.mid, o.skip, o.id = !spans[i].ends, !spans[i].ends, o.id[:0]
			i++
			continue
		}
		j := i // the run of lines written together
		for j < len(spans) && !spans[j].skip {
			j++
		}
		from, to := spans[i].from, spans[j-1].to
		var n int
		n, err = write(b[from:to])
		written := from + n
		for ; i < j && spans[i].to <= written; i++ {
			recs = o.receipt(recs, spans[i])
		}
		done = written
		if i < j { // the write stopped before the end of span i
			if written > spans[i].from || spans[i].cont {
				o.mid, o.skip, o.id = true, false, append(o.id[:0], spans[i].id...)
				if written > spans[i].from && !spans[i].cont {
					recs = append(recs, "+\n"...)
				}
			} else {
				o.mid = false
			}
			break
		}
	}
	o.recs = recs[:0]
	o.receipts(recs)
	return done, err
}

// receipt adds the receipt of span s, written whole, to recs.
func (o *clientOut) receipt(recs []byte, s outSpan) []byte {
	if !s.ends { // the line goes on in the next write
		o.mid, o.skip = true, false
		o.id = append(o.id[:0], s.id...)
		if !s.cont {
			recs = append(recs, "+\n"...)
		}
		return recs
	}
	switch {
	case s.id != nil:
		recs = append(append(recs, s.id...), '\n')
	case s.cont:
		recs = append(recs, "-\n"...)
	}
	o.mid, o.skip, o.id = false, false, o.id[:0]
	return recs
}

// split cuts b into its lines, saying of each what it is.
func (o *clientOut) split(b []byte) []outSpan {
	spans := o.spans[:0]
	o.batch = o.batch[:0]
	for at := 0; at < len(b); {
		s := outSpan{from: at}
		if o.mid && at == 0 {
			s.cont, s.skip = true, o.skip
			if len(o.id) > 0 {
				s.id = o.id
			}
		} else if b[at] == '[' {
			s.id = o.batchIDs(b[at:])
		} else {
			var failed bool
			s.id, s.skip, failed = answerID(b[at:])
			if failed && s.id != nil {
				s.id = o.failedID(s.id)
			}
		}
		if i := bytes.IndexByte(b[at:], '\n'); i >= 0 {
			s.to, s.ends = at+i+1, true
		} else {
			s.to = len(b)
		}
		spans = append(spans, s)
		at = s.to
	}
	o.spans = spans[:0]
	return spans
}

// batchIDs are the IDs of the requests that the batch's answer at the start of b answers (as
// the session writes one, in one write: stdio.writeBatch, the protocol of 2025-03-26 and
// before), one line each, for its receipt; nil when there are none, or the array does not end
// in b. They are kept in o.batch until the next split.
func (o *clientOut) batchIDs(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	start := len(o.batch)
	whole := rawjson.Array(b, func(s, e int) bool {
		if id, _, failed := answerID(b[s:e]); id != nil {
			if failed {
				o.batch = append(o.batch, '!')
			}
			o.batch = append(append(o.batch, id...), '\n')
		}
		return true
	})
	if !whole || len(o.batch) == start {
		o.batch = o.batch[:start]
		return nil
	}
	return o.batch[start : len(o.batch)-1]
}

// failedID is the receipt of an error answer to the request of ID id: "!" and the ID, kept in
// o.batch until the next split.
func (o *clientOut) failedID(id []byte) []byte {
	start := len(o.batch)
	o.batch = append(append(o.batch, '!'), id...)
	return o.batch[start:]
}

// answerID is the ID of the request that the message at the start of line answers (as the
// session writes answers: stdio.Response), nil if it is not an answer or its start is not
// whole in line; again says it answers a request the forwarder sent again, failed that it is
// an error.
func answerID(line []byte) (id []byte, again, failed bool) {
	rest, ok := bytes.CutPrefix(line, responseHead)
	if !ok {
		return nil, false, false
	}
	end := idEnd(rest)
	if end < 0 {
		return nil, false, false
	}
	after := rest[end:]
	failed = bytes.HasPrefix(after, []byte(`,"error"`))
	if !failed && !bytes.HasPrefix(after, []byte(`,"result"`)) {
		return nil, false, false // a request of the server's
	}
	return rest[:end], bytes.HasPrefix(rest, againPrefix), failed
}

// receipts writes recs into the receipts' ring without waiting: what it has no room for is
// written by flushReceipts, in order. Callers hold o.mu.
func (o *clientOut) receipts(recs []byte) {
	if len(recs) == 0 || o.rclosed {
		return
	}
	if !o.rflushing {
		n := o.put(recs)
		if recs = recs[n:]; len(recs) == 0 {
			return
		}
	}
	o.rpending = coalesce(append(o.rpending, recs...))
	if !o.rflushing {
		o.rflushing = true
		go o.flushReceipts()
	}
}

// put writes what of recs the ring has room for, and asks the forwarder to take the journal
// once the ring holds receiptsDrainAt (once until it took it): on a goroutine of its own, since
// the ask is a write to the log connection, which a forwarder that does not read (stopped, or
// stuck writing the session's stderr) can keep waiting, and callers hold o.mu, which the
// session's writes to its client take on whatever goroutine writes them (a shared server's
// reader, which serves other sessions too). Callers hold o.mu.
func (o *clientOut) put(recs []byte) int {
	r := o.j.receipts
	var n int
	o.rhead, n = r.put(o.rhead, recs)
	if used := r.used(o.rhead); used >= receiptsDrainAt {
		if tail := o.rhead - used; o.rasked != tail+1 {
			o.rasked = tail + 1
			go o.drain(false)
		}
	}
	return n
}

// coalesce drops from recs the "+" and "-" that change nothing the forwarder reads from them
// (whether the client's output stops in the middle of a line, which the last of them says):
// so that a client that reads slowly, whose writes each say "+" and "-", does not grow the
// receipts waiting for room in the ring without bound.
func coalesce(recs []byte) []byte {
	for {
		switch {
		case bytes.HasSuffix(recs, []byte("+\n-\n")):
			recs = append(recs[:len(recs)-4], "-\n"...)
		case bytes.HasSuffix(recs, []byte("-\n-\n")), bytes.HasSuffix(recs, []byte("+\n+\n")):
			recs = recs[:len(recs)-2]
		default:
			return recs
		}
	}
}

// drainBy sets how the forwarder is asked to take the journal.
func (o *clientOut) drainBy(drain func(wait bool)) {
	o.mu.Lock()
	o.drain = drain
	o.mu.Unlock()
}

// roomMade tells flushReceipts that the forwarder took the journal.
func (o *clientOut) roomMade() {
	select {
	case o.room <- struct{}{}:
	default:
	}
}

// flushReceipts writes the receipts the ring had no room for, asking the forwarder to take
// the journal and say so, until they are all written or the receipts end. The forwarder takes
// them when it takes the client's input (journalDrainAt), and when asked to (receiptsDrainAt).
// Receipts that wait here are lost with a shared process killed meanwhile (the forwarder would
// answer requests that were answered), so they do not wait for the client's next message.
func (o *clientOut) flushReceipts() {
	for {
		o.mu.Lock()
		if !o.rclosed && len(o.rpending) > 0 {
			n := o.put(o.rpending)
			o.rpending = o.rpending[:copy(o.rpending, o.rpending[n:])]
		}
		if o.rclosed || len(o.rpending) == 0 {
			o.rpending = nil
			o.flushEnded()
			o.mu.Unlock()
			return
		}
		drain := o.drain
		o.mu.Unlock()
		drain(true)
		select {
		case <-o.room:
		case <-o.done:
		}
	}
}

// flushEnded notes that flushReceipts ends. Callers hold o.mu.
func (o *clientOut) flushEnded() {
	o.rflushing = false
	if o.flushed != nil {
		close(o.flushed)
		o.flushed = nil
	}
}

// againPrefix starts the IDs of the requests a forwarder sends again to a new shared process
// (forwarder.replay), as they appear in the answers.
var againPrefix = []byte(`"` + againID)

// againID starts the IDs of the requests a forwarder sends again.
const againID = "mcp-simple-aggregator/again-"

// responseHead starts every answer the session writes (stdio.Response), the ID after it.
var responseHead = []byte(`{"jsonrpc":"2.0","id":`)

// idEnd is the end of the JSON value (a string or a number, as IDs are) at the start of b; -1
// when b does not hold it whole.
func idEnd(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	if b[0] != '"' {
		i := 0
		for i < len(b) && (b[i] == '-' || b[i] == '+' || b[i] == '.' || b[i] == 'e' || b[i] == 'E' || (b[i] >= '0' && b[i] <= '9')) {
			i++
		}
		if i == 0 || i == len(b) {
			return -1
		}
		return i
	}
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}
