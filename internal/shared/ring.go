package shared

import "sync/atomic"

// ring is a ring of bytes in memory that two processes map (a session's journal holds two):
// one process writes into it and publishes how far it wrote (head), the other takes what was
// published and publishes how far it took (tail), zeroing what it took, so that a writer killed
// between a write and its publication leaves what it wrote past head up to the first zero byte
// (what a ring holds is JSON and receipts, which hold no zero byte). Each writes its own counter
// only; both grow without bound, the ring's place being a counter modulo its size.
type ring struct {
	head, tail *uint64
	data       []byte
}

// put writes what of b the ring has room for after head (the writer's own count, which it
// passes and gets back), publishing each part as it is written: a part ends at the ring's end,
// so that what a killed writer left unpublished never wraps. It returns the new head and how
// much of b it wrote.
func (r ring) put(head uint64, b []byte) (uint64, int) {
	size := uint64(len(r.data))
	done := 0
	for done < len(b) {
		// Full; or a tail past head, which only a taker that took the writer for gone writes.
		used := head - atomic.LoadUint64(r.tail)
		if used >= size {
			break
		}
		free := size - used
		off := head % size
		n := copy(r.data[off:min(size, off+free)], b[done:])
		head += uint64(n)
		done += n
		atomic.StoreUint64(r.head, head)
	}
	return head, done
}

// used is what the ring holds that was not taken, given the writer's head.
func (r ring) used(head uint64) uint64 { return head - atomic.LoadUint64(r.tail) }

// take passes what the writer published since from (the tail, which only the taker writes) to
// each, part by part in order, zeroes it and publishes the new tail, which it returns. With ended
// (the writer is gone) it passes also what was written and not published: what follows head up
// to the first zero byte, within the part that a write could have filled (put, and the journal's
// reads, stop at the ring's end).
func (r ring) take(from uint64, ended bool, each func([]byte)) uint64 {
	size := uint64(len(r.data))
	head := atomic.LoadUint64(r.head)
	to := from
	for to < head {
		off := to % size
		part := r.data[off:min(size, off+(head-to))]
		each(part)
		clear(part)
		to += uint64(len(part))
	}
	if ended {
		off := to % size
		end := off
		for end < size && r.data[end] != 0 {
			end++
		}
		if end > off {
			each(r.data[off:end])
			clear(r.data[off:end])
			to += end - off
		}
	}
	atomic.StoreUint64(r.tail, to)
	return to
}
