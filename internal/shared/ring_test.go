package shared

import (
	"bytes"
	"testing"
)

// A ring takes what it has room for, publishing each part as it is written, its parts ending at
// the ring's end; taken, what was written is given in order and zeroed, and with ended what
// was written and not published too, up to the first zero byte.
func TestRing(t *testing.T) {
	var head, tail uint64
	r := ring{head: &head, tail: &tail, data: make([]byte, 16)}
	h, n := r.put(0, []byte("0123456789"))
	if h != 10 || n != 10 || head != 10 {
		t.Fatalf("put 10 bytes: head %d, wrote %d, published %d", h, n, head)
	}
	var got []byte
	each := func(b []byte) { got = append(got, b...) }
	if to := r.take(0, false, each); to != 10 || string(got) != "0123456789" || tail != 10 {
		t.Fatalf("took %q to %d, tail %d", got, to, tail)
	}
	if !bytes.Equal(r.data[:10], make([]byte, 10)) {
		t.Fatalf("what was taken is not zero again: %q", r.data)
	}
	// Across the end, and more than there is room for.
	h, n = r.put(h, []byte("abcdefghijklmnopqrstuvwxyz"))
	if h != 26 || n != 16 || head != 26 || r.used(h) != 16 {
		t.Fatalf("put into a ring of 16: head %d, wrote %d, published %d", h, n, head)
	}
	if _, n := r.put(h, []byte("x")); n != 0 {
		t.Fatal("put into a full ring")
	}
	got = got[:0]
	to := r.take(10, false, each)
	if to != 26 || string(got) != "abcdefghijklmnop" {
		t.Fatalf("took %q to %d", got, to)
	}
	// Written and not published (its writer killed): taken once the writer is gone, up to the
	// first zero byte.
	copy(r.data[to%16:], "late")
	got = got[:0]
	if to = r.take(to, false, each); len(got) != 0 {
		t.Fatalf("took %q that was not published", got)
	}
	if to = r.take(to, true, each); to != 30 || string(got) != "late" || tail != 30 {
		t.Fatalf("at the end, took %q to %d", got, to)
	}
	// A tail past head (a taker that took the writer for gone, and was wrong) fills nothing.
	if h, n := r.put(26, []byte("x")); h != 26 || n != 0 {
		t.Fatalf("put behind the tail: head %d, wrote %d", h, n)
	}
}
