package aggregator

import (
	"fmt"
	"strings"
	"testing"
)

// What waits for the client is bounded by count and by size; the oldest messages go first.
func TestEarlyQueueBounds(t *testing.T) {
	var q earlyQueue
	for i := range earlyMessages + 5 {
		q.hold([][]byte{[]byte(fmt.Sprintf("m%d", i)), []byte("\n")})
	}
	if len(q.msgs) != earlyMessages || q.dropped != 5 || string(q.msgs[0]) != "m5\n" {
		t.Errorf("after %d messages: %d kept, %d dropped, first %q; want %d, 5, \"m5\\n\"", earlyMessages+5, len(q.msgs), q.dropped, q.msgs[0], earlyMessages)
	}

	q = earlyQueue{}
	big := []byte(strings.Repeat("x", earlyBytes/3))
	for range 4 {
		q.hold([][]byte{big})
	}
	if len(q.msgs) != 3 || q.dropped != 1 || q.size != 3*len(big) {
		t.Errorf("four messages of a third of the limit: %d kept (%d bytes), %d dropped; want 3, 1", len(q.msgs), q.size, q.dropped)
	}

	// One message larger than the limit is still delivered.
	q = earlyQueue{}
	q.hold([][]byte{make([]byte, earlyBytes+1)})
	if len(q.msgs) != 1 {
		t.Errorf("a message over the limit alone was dropped")
	}

	q.done = true
	if q.hold([][]byte{[]byte("late")}) {
		t.Errorf("a message held after the flush")
	}
}
