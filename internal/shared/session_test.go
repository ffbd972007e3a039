package shared

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/child"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// The session's side of an attachment: its input, which hands the multiplexer whole lines
// however the session's writes split them, and its stderr tail.

// testInput is the input of an attachment that the multiplexer serves, whose lines are
// collected.
func testInput() (*input, *[]string) {
	var lines []string
	a := &Attachment{p: &proc{}, key: "k", served: true, exited: make(chan struct{})}
	a.in = input{a: a, to: func(line []byte) { lines = append(lines, string(line)) }}
	return &a.in, &lines
}

// writeChunks writes data to w in writes of at most n bytes.
func writeChunks(t testing.TB, w io.Writer, data []byte, n int) {
	t.Helper()
	for len(data) > 0 {
		k := min(n, len(data))
		if m, err := w.Write(data[:k]); err != nil || m != k {
			t.Fatalf("write: %d of %d, %v", m, k, err)
		}
		data = data[k:]
	}
}

// Lines reach the multiplexer whole and byte for byte, however the writes split them; blank
// lines carry nothing. Once the attachment is no longer served (its process ended, or the
// session stopped), a write fails as to a closed pipe.
func TestInputLines(t *testing.T) {
	msgs := []string{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}`, `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"x","result":{"big":"` + strings.Repeat("y", 200<<10) + `"}}`}
	stream := strings.Join(msgs, "\n") + "\n\n \n"
	for _, n := range []int{1, 7, 4096, 64 << 10, len(stream)} {
		in, got := testInput()
		writeChunks(t, in, []byte(stream), n)
		if !slices.Equal(*got, msgs) {
			t.Errorf("writes of %d bytes: %d lines, want %d", n, len(*got), len(msgs))
		}
		if cap(in.part) > 1<<20 {
			t.Errorf("writes of %d bytes: the input keeps %d bytes", n, cap(in.part))
		}
	}
	in, _ := testInput()
	in.a.served = false // detached
	if _, err := in.Write([]byte(msgs[0] + "\n")); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("a write after the end: %v, want a closed pipe", err)
	}
}

// Random lines through writes of random sizes reach the multiplexer whole, byte for byte.
func FuzzInput(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n"), uint8(1))
	f.Add([]byte("a\n\n\nb"), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		var want []string
		lines := bytes.Split(data, []byte("\n"))
		for i, l := range lines {
			if l = bytes.TrimSpace(l); len(l) > 0 && i < len(lines)-1 {
				want = append(want, string(l))
			}
		}
		in, got := testInput()
		writeChunks(t, in, data, int(chunk)+1)
		if !slices.Equal(*got, want) {
			t.Fatalf("lines %q, want %q", *got, want)
		}
	})
}

// The tail keeps the last child.TailLines stderr lines, as a process of the session's own
// would; every line reaches the session's stderr, with its key.
func TestAttachmentTail(t *testing.T) {
	stderr := &bytes.Buffer{}
	a := &Attachment{stderr: stderr, prefix: "[k] ", exited: make(chan struct{})}
	var want []string
	n := child.TailLines + 7
	for i := range n {
		a.stderrLine(fmt.Sprintf("line %d", i))
		want = append(want, fmt.Sprintf("line %d", i))
	}
	if tail := a.Tail(); !slices.Equal(tail, want[n-child.TailLines:]) {
		t.Errorf("Tail %q, want the last %d lines %q", tail, child.TailLines, want[n-child.TailLines:])
	}
	if got := strings.Count(stderr.String(), "\n"); got != n || !strings.HasPrefix(stderr.String(), "[k] line 0\n") {
		t.Errorf("stderr has %d lines, want %d:\n%s", got, n, stderr)
	}
	a.Tail()[0] = "changed"
	if a.Tail()[0] == "changed" {
		t.Error("Tail gives the attachment's own slice")
	}
}

func reversed(s []string) []string {
	s = slices.Clone(s)
	slices.Reverse(s)
	return s
}

// withValue is env with name set to value.
func withValue(env []string, name, value string) []string {
	out := slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	return append(out, name+"="+value)
}

// recorder is an aggregator.Feed that keeps the IDs of what it is handed.
type recorder struct {
	mu  sync.Mutex
	ids []string
}

func (r *recorder) Message(msg jsonrpc.Message, _ bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ids = append(r.ids, fmt.Sprint(msg.(*jsonrpc.Response).ID.Raw()))
}
func (r *recorder) Flush()                      {}
func (r *recorder) End()                        {}
func (r *recorder) OwnsTask(string) bool        { return false }
func (r *recorder) BadLine(*stdio.BadLineError) {}

// The multiplexer's own answers reach the session in the order they were posted.
func TestAttachmentPostsInOrder(t *testing.T) {
	r := &recorder{}
	a := &Attachment{recv: r, exited: make(chan struct{})}
	var want []string
	for i := range 200 {
		id, _ := jsonrpc.MakeID(fmt.Sprintf("p-%d", i))
		a.post(&jsonrpc.Response{ID: id, Result: []byte(`{}`)})
		want = append(want, fmt.Sprintf("p-%d", i))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		n := len(r.ids)
		r.mu.Unlock()
		if n == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d posts handed over", n, len(want))
		}
		time.Sleep(time.Millisecond)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Equal(r.ids, want) {
		t.Errorf("handed over in the order %v", r.ids)
	}
}
