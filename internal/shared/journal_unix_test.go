//go:build unix

package shared

import (
	"bytes"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// journalPipe is a journal as the forwarder maps it, the reader of a pipe through it (the shared
// process's, with a mapping of its own) and the pipe's write end (the client's), closed with the
// test; drains receives each call to take it.
func journalPipe(t *testing.T) (*journal, *journalReader, *os.File, chan bool) {
	t.Helper()
	j, jf, err := newJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	sj, err := mapJournal(jf) // the shared process's mapping, which the reader holds
	if err != nil {
		t.Fatal(err)
	}
	drains := make(chan bool, 16)
	jr, err := newJournalReader(r, sj, func(wait bool) { drains <- wait })
	sj.release()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { jr.stop(); w.Close(); jf.Close(); j.release() })
	return j, jr, w, drains
}

// The session asks the forwarder to take the journal once it holds journalDrainAt, once until
// it is taken; full, it waits for the forwarder to say it took it, and reads on.
func TestJournalReaderWaitsForRoom(t *testing.T) {
	j, jr, w, drains := journalPipe(t)
	sent := bytes.Repeat([]byte("x"), journalSize+1000)
	go func() { _, _ = w.Write(sent) }()
	var got []byte
	buf := make([]byte, 32<<10)
	for len(got) < journalSize {
		n, err := jr.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, buf[:n]...)
	}
	if len(drains) != 1 || <-drains {
		t.Fatalf("asked %d times to take the journal, or to say so", len(drains)+1)
	}
	read := make(chan int, 1)
	go func() {
		n, _ := jr.Read(buf)
		read <- n
	}()
	select {
	case wait := <-drains:
		if !wait {
			t.Fatal("the full journal did not ask the forwarder to say when it took it")
		}
	case <-time.After(waitTime):
		t.Fatal("the full journal asked nothing")
	}
	select {
	case n := <-read:
		t.Fatalf("read %d bytes into a full journal", n)
	default:
	}
	var taken int
	j.input.take(0, false, func(b []byte) { taken += len(b) })
	jr.roomMade()
	if n := <-read; n != 1000 || taken != journalSize || atomic.LoadUint64(j.input.head) != uint64(len(sent)) {
		t.Errorf("read %d bytes after the forwarder took %d; head %d", n, taken, atomic.LoadUint64(j.input.head))
	}
}

// A read under way when the reading stops ends when the client writes (a blocking read cannot
// be stopped), with what it read published and nothing given to the session; no read follows.
func TestJournalReaderStops(t *testing.T) {
	j, jr, w, _ := journalPipe(t)
	done := make(chan error, 1)
	go func() {
		_, err := jr.Read(make([]byte, 64))
		done <- err
	}()
	waitFor(t, "the read under way", func() bool {
		jr.mu.Lock()
		defer jr.mu.Unlock()
		return jr.reading
	})
	jr.stop()
	if _, err := w.Write([]byte("late\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != errStopped {
			t.Errorf("the read ended with %v", err)
		}
	case <-time.After(waitTime):
		t.Fatal("a stopped read goes on waiting for the client")
	}
	if head := atomic.LoadUint64(j.input.head); head != 5 {
		t.Errorf("published %d bytes of what the stopped read took, want 5", head)
	}
	if _, err := jr.Read(make([]byte, 64)); err != errStopped {
		t.Errorf("read after the stop: %v", err)
	}
}

// An input that something sharing its open file made non-blocking (a client that passes one
// socket for its input and output, which it then sets so) is waited for, not taken for ended.
func TestJournalReaderNonBlockingInput(t *testing.T) {
	j, jr, w, _ := journalPipe(t)
	if err := unix.SetNonblock(jr.fd, true); err != nil { // the open file's mode, as another holder sets it
		t.Fatal(err)
	}
	read := make(chan string, 1)
	go func() {
		buf := make([]byte, 64)
		n, err := jr.Read(buf)
		if err != nil {
			read <- err.Error()
			return
		}
		read <- string(buf[:n])
	}()
	waitFor(t, "the read under way", func() bool {
		jr.mu.Lock()
		defer jr.mu.Unlock()
		return jr.reading
	})
	if _, err := w.Write([]byte("later\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-read:
		if got != "later\n" || atomic.LoadUint64(j.input.head) != 6 {
			t.Errorf("read %q, published %d", got, atomic.LoadUint64(j.input.head))
		}
	case <-time.After(waitTime):
		t.Fatal("the read did not end once the client wrote")
	}
}
