package stdio

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Send never waits for a peer that does not read, and what it sends arrives whole and in
// order, also mixed with blocking writes from other goroutines.
func TestSendDoesNotWaitAndKeepsOrder(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := New(strings.NewReader(""), w, nil)
	defer c.Close()

	const n = 300
	pad := strings.Repeat("p", 10<<10) // 300 x 10 KiB: far more than a pipe holds
	sent := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // blocking writes, as the SDK's session makes them
		defer wg.Done()
		for i := range 20 {
			if err := c.WriteParts([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"other","params":{"i":%d}}`+"\n", i))); err != nil {
				t.Error(err)
			}
		}
	}()
	go func() {
		for i := range n {
			c.Send(func(err error) { t.Errorf("message %d: %v", i, err) },
				[]byte(`{"jsonrpc":"2.0","method":"m","params":{"i":`), []byte(fmt.Sprint(i)), []byte(`,"pad":"`+pad+`"}}`+"\n"))
		}
		close(sent)
	}()
	select {
	case <-sent:
	case <-time.After(30 * time.Second):
		t.Fatal("Send waited for a peer that does not read")
	}

	in := bufio.NewReaderSize(r, 1<<20)
	next, others := 0, 0
	for next < n || others < 20 {
		line, err := in.ReadBytes('\n')
		if err != nil {
			t.Fatalf("after %d messages: %v", next, err)
		}
		var m struct {
			Method string
			Params struct{ I int }
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("a message arrived broken: %v: %.100s", err, line)
		}
		if m.Method == "other" {
			others++
			continue
		}
		if m.Params.I != next {
			t.Fatalf("message %d arrived when %d was next", m.Params.I, next)
		}
		next++
	}
	wg.Wait()
}

// A message Send cannot write is reported to its failed function.
func TestSendReportsFailure(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	c := New(strings.NewReader(""), w, nil)
	defer c.Close()
	failed := make(chan error, 2)
	c.Send(func(err error) { failed <- err }, []byte("{}\n"))                              // written at once
	c.Send(func(err error) { failed <- err }, []byte(strings.Repeat(" ", 100<<10)+"{}\n")) // by the background writer
	for range 2 {
		select {
		case err := <-failed:
			if err == nil {
				t.Error("failed called without an error")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a write to a closed pipe was not reported")
		}
	}
}
