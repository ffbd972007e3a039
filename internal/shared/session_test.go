package shared

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/child"
)

// The session's side of an attachment: the control lines of the shared process taken out of
// the server's messages (controlReader), and what decides whether a process can be shared
// (identity).

// ctl is a control line, as the shared process writes it.
func ctl(c control) string {
	line, _ := json.Marshal(c)
	return string(line) + "\n"
}

// testAttachment is an Attachment whose messages come from src, through a buffer of bufSize
// (the prefix's length at least, as the shared process's 64 KiB are).
func testAttachment(src io.Reader, bufSize int) (*Attachment, *bytes.Buffer) {
	stderr := &bytes.Buffer{}
	a := &Attachment{exited: make(chan struct{}), stderr: stderr, prefix: "[k] "}
	a.out = &controlReader{r: bufio.NewReaderSize(src, bufSize), on: a.control, eof: a.ended}
	return a, stderr
}

// readAll reads r to its end, readSize bytes at most at a time.
func readAll(t testing.TB, r io.Reader, readSize int) []byte {
	t.Helper()
	var out []byte
	p := make([]byte, readSize)
	for {
		n, err := r.Read(p)
		out = append(out, p[:n]...)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if n == 0 {
			t.Fatalf("Read returned 0 bytes and no error")
		}
	}
}

// chunked is a reader that gives at most n bytes a read (a socket that splits lines anywhere).
type chunked struct {
	r io.Reader
	n int
}

func (c chunked) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

// The server's messages come out byte for byte, and the control lines between them are taken
// out wherever they fall, however the reads split the stream and whatever their sizes.
func TestControlReaderTakesOutControlLines(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":2,"result":{"text":"` + strings.Repeat("x", 5000) + `"}}` + "\n"
	// A control line's prefix inside a message, even where a read may end, is the message's.
	inside := `{"jsonrpc":"2.0","id":3,"result":` + `{"mcp-simple-aggregator":"stderr","line":"not a control line"}}` + "\n"
	parts := []string{
		ctl(control{Control: "stderr", Line: "first, before any message"}),
		`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n",
		ctl(control{Control: "stderr", Line: "between"}),
		ctl(control{Control: "stderr", Line: "two in a row, with \"quotes\" and a \\n"}),
		long,
		inside,
		ctl(control{Control: "stderr", Line: ""}),
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}` + "\n",
		ctl(control{Control: "exit", Description: "exited with status 3"}),
		`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`, // the last, without its newline
	}
	stream := strings.Join(parts, "")
	var want strings.Builder
	for _, p := range parts {
		if !strings.HasPrefix(p, controlPrefix) {
			want.WriteString(p)
		}
	}
	wantStderr := "[k] first, before any message\n[k] between\n[k] two in a row, with \"quotes\" and a \\n\n[k] \n"
	wantTail := []string{"first, before any message", "between", `two in a row, with "quotes" and a \n`, ""}

	sources := map[string]func() io.Reader{
		"whole":    func() io.Reader { return strings.NewReader(stream) },
		"one byte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(stream)) },
		"7 bytes":  func() io.Reader { return chunked{strings.NewReader(stream), 7} },
		"30 bytes": func() io.Reader { return chunked{strings.NewReader(stream), 30} },
	}
	for name, src := range sources {
		for _, bufSize := range []int{len(controlPrefix), 32, 64 << 10} {
			for _, readSize := range []int{1, 5, 33, 4096} {
				t.Run(fmt.Sprintf("%s/buffer %d/reads of %d", name, bufSize, readSize), func(t *testing.T) {
					a, stderr := testAttachment(src(), bufSize)
					if got := readAll(t, a.out, readSize); string(got) != want.String() {
						t.Errorf("the server's messages:\n%q\nwant\n%q", got, want.String())
					}
					if stderr.String() != wantStderr {
						t.Errorf("stderr:\n%q\nwant\n%q", stderr, wantStderr)
					}
					if tail := a.Tail(); !slices.Equal(tail, wantTail) {
						t.Errorf("Tail %q, want %q", tail, wantTail)
					}
					select {
					case <-a.Exited():
					default:
						t.Fatal("Exited is not closed after the exit line")
					}
					if d := a.ExitDescription(); d != "exited with status 3" {
						t.Errorf("ExitDescription %q, want the exit line's", d)
					}
				})
			}
		}
	}
}

// A read of nothing changes nothing: in the middle of a message, a control line's prefix that
// follows is still the message's.
func TestControlReaderEmptyRead(t *testing.T) {
	head := `{"jsonrpc":"2.0","result":`
	msg := head + `{"mcp-simple-aggregator":"stderr","line":"x"},"id":1}` + "\n"
	a, stderr := testAttachment(strings.NewReader(msg), 64<<10)
	p := make([]byte, len(head))
	if n, err := io.ReadFull(a.out, p); err != nil || string(p[:n]) != head {
		t.Fatalf("read %q, %v", p[:n], err)
	}
	if n, err := a.out.Read(nil); n != 0 || err != nil {
		t.Fatalf("an empty read: %d, %v", n, err)
	}
	rest := readAll(t, a.out, 4096)
	if got := head + string(rest); got != msg {
		t.Errorf("the message came out as\n%q\nwant\n%q", got, msg)
	}
	if stderr.Len() > 0 || len(a.Tail()) > 0 {
		t.Errorf("a part of a message was taken for a stderr line: %q", stderr)
	}
}

// The tail keeps the last child.TailLines stderr lines, as a process of the session's own
// would; every line reaches the session's stderr.
func TestControlReaderTail(t *testing.T) {
	var stream strings.Builder
	var want []string
	n := child.TailLines + 7
	for i := range n {
		stream.WriteString(ctl(control{Control: "stderr", Line: fmt.Sprintf("line %d", i)}))
		want = append(want, fmt.Sprintf("line %d", i))
	}
	stream.WriteString(`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n")
	a, stderr := testAttachment(strings.NewReader(stream.String()), 64<<10)
	if got := readAll(t, a.out, 4096); string(got) != `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n" {
		t.Errorf("the server's messages: %q", got)
	}
	if tail := a.Tail(); !slices.Equal(tail, want[n-child.TailLines:]) {
		t.Errorf("Tail %q, want the last %d lines %q", tail, child.TailLines, want[n-child.TailLines:])
	}
	if got := strings.Count(stderr.String(), "\n"); got != n || !strings.HasPrefix(stderr.String(), "[k] line 0\n") {
		t.Errorf("stderr has %d lines, want %d:\n%s", got, n, stderr)
	}
	// Tail is a copy.
	a.Tail()[0] = "changed"
	if a.Tail()[0] == "changed" {
		t.Error("Tail gives the attachment's own slice")
	}
}

// Exited is closed by the exit line, with its description; an end without one (the shared
// process ended, or the session stopped using the process) says so; until either, it is open.
func TestControlReaderExit(t *testing.T) {
	t.Run("exit line", func(t *testing.T) {
		pr, pw := io.Pipe()
		a, _ := testAttachment(pr, 64<<10)
		go func() {
			_, _ = io.WriteString(pw, `{"jsonrpc":"2.0","id":1,"result":{}}`+"\n")
		}()
		p := make([]byte, 4096)
		if _, err := a.out.Read(p); err != nil {
			t.Fatal(err)
		}
		select {
		case <-a.Exited():
			t.Fatal("Exited is closed while the process runs")
		default:
		}
		go func() {
			_, _ = io.WriteString(pw, ctl(control{Control: "exit", Description: "was killed by a signal (killed)"}))
			pw.Close()
		}()
		if n, err := a.out.Read(p); err != io.EOF {
			t.Fatalf("read after the exit line: %q, %v; want EOF", p[:n], err)
		}
		<-a.Exited()
		if d := a.ExitDescription(); d != "was killed by a signal (killed)" {
			t.Errorf("ExitDescription %q", d)
		}
	})
	t.Run("end without exit", func(t *testing.T) {
		a, _ := testAttachment(strings.NewReader(`{"jsonrpc":"2.0","id":1,"result":{}}`+"\n"), 64<<10)
		readAll(t, a.out, 4096)
		<-a.Exited()
		if d := a.ExitDescription(); d != "ended with the shared process that ran it" {
			t.Errorf("ExitDescription %q", d)
		}
	})
	t.Run("end in a control line", func(t *testing.T) {
		a, stderr := testAttachment(strings.NewReader(strings.TrimSuffix(ctl(control{Control: "stderr", Line: "last"}), "\n")), 64<<10)
		if got := readAll(t, a.out, 4096); len(got) > 0 {
			t.Errorf("the server's messages: %q", got)
		}
		<-a.Exited()
		if stderr.String() != "[k] last\n" || a.ExitDescription() != "ended with the shared process that ran it" {
			t.Errorf("stderr %q, ExitDescription %q", stderr, a.ExitDescription())
		}
	})
	t.Run("close", func(t *testing.T) {
		pr, _ := io.Pipe()
		a, _ := testAttachment(pr, 64<<10)
		conn, peer := net.Pipe()
		a.conn, a.out.conn = conn, conn
		a.out.Close()
		if _, err := peer.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("the connection is open after Close: %v", err)
		}
		<-a.Exited()
		if d := a.ExitDescription(); d != "ended with the shared process that ran it" {
			t.Errorf("ExitDescription %q", d)
		}
	})
}

// Random messages and control lines, interleaved, through reads of random sizes: the messages
// come out byte for byte, and the stderr lines and the exit as they were sent.
func FuzzControlReader(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\x01a stderr line\n{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\x02exited\n"), uint8(1), uint8(1), uint8(0))
	f.Add([]byte("\x01\n\x01\n{\"mcp-simple-aggregator\":\"stderr\"}\nshort\n\n\n{\"jsonrpc\":\"2.0\",\"result\":{\"mcp-simple-aggregator\":1}}"), uint8(3), uint8(7), uint8(5))
	f.Add([]byte("\x02first\n\x02second\nafter the exit\n\x01\xff\xfe not UTF-8"), uint8(0), uint8(200), uint8(255))
	// A read that ends just before a control line's prefix inside a message.
	head := `{"jsonrpc":"2.0","result":`
	f.Add([]byte(head+`{"mcp-simple-aggregator":"stderr","line":"x"}}`+"\n\x01y\n"), uint8(8), uint8(len(head)-1), uint8(10))
	f.Add(bytes.Repeat([]byte("\x01a line of the tail\n"), child.TailLines+3), uint8(4), uint8(10), uint8(20))
	f.Fuzz(func(t *testing.T, data []byte, chunk, readSize, bufExtra uint8) {
		var stream, want bytes.Buffer
		var wantLines []string
		wantDesc := "ended with the shared process that ran it"
		exited := false
		lines := bytes.Split(data, []byte("\n"))
		for i, l := range lines {
			last := i == len(lines)-1
			switch {
			case len(l) > 0 && (l[0] == 1 || l[0] == 2):
				c := control{Control: "stderr", Line: string(l[1:])}
				if l[0] == 2 {
					c = control{Control: "exit", Description: string(l[1:])}
				}
				line := ctl(c)
				stream.WriteString(line)
				var back control // what the line says (JSON makes the text valid UTF-8)
				_ = json.Unmarshal([]byte(line), &back)
				if l[0] == 1 {
					wantLines = append(wantLines, back.Line)
				} else if !exited {
					wantDesc, exited = back.Description, true
				}
			default:
				if bytes.HasPrefix(l, []byte(controlPrefix)) {
					l = append([]byte(" "), l...) // no message of the shared process's starts so
				}
				stream.Write(l)
				want.Write(l)
				if !last {
					stream.WriteByte('\n')
					want.WriteByte('\n')
				}
			}
		}
		src := io.Reader(chunked{bytes.NewReader(stream.Bytes()), int(chunk%9) + 1})
		a, stderr := testAttachment(src, len(controlPrefix)+int(bufExtra))
		if got := readAll(t, a.out, int(readSize)+1); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("the server's messages:\n%q\nwant\n%q\nstream\n%q", got, want.Bytes(), stream.Bytes())
		}
		var wantStderr strings.Builder
		for _, l := range wantLines {
			wantStderr.WriteString("[k] " + l + "\n")
		}
		if stderr.String() != wantStderr.String() {
			t.Fatalf("stderr:\n%q\nwant\n%q", stderr, wantStderr.String())
		}
		wantTail := wantLines[max(0, len(wantLines)-child.TailLines):]
		if tail := a.Tail(); !slices.Equal(tail, wantTail) {
			t.Fatalf("Tail %q, want %q", tail, wantTail)
		}
		<-a.Exited()
		if d := a.ExitDescription(); d != wantDesc {
			t.Fatalf("ExitDescription %q, want %q", d, wantDesc)
		}
	})
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
