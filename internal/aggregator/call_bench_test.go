package aggregator

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/config"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/logging"
)

// BenchmarkCall is one tools/call through the core, client to fixture server and back, one at
// a time: its allocations per call are the core's own (the client here writes and reads its
// lines into buffers it keeps, and the server is a process of its own). Its time is a round
// trip to a child, which the machine sets; the allocations are what it measures:
// `go test ./internal/aggregator -run XXX -bench Call -benchmem`.
func BenchmarkCall(b *testing.B) { benchmarkCalls(b, 1) }

// BenchmarkCallBurst is BenchmarkCall with eight calls written together and their answers read
// together, as eight callers at once make them: the core's own work a call weighs more in its
// time than in BenchmarkCall's, where a round trip's wake-ups do (its profile is the core's:
// `-cpuprofile`).
func BenchmarkCallBurst(b *testing.B) { benchmarkCalls(b, 8) }

// benchmarkCalls runs b.N rounds of n calls written together, each round's answers read before
// the next.
func benchmarkCalls(b *testing.B, n int) {
	cfg := &config.Config{File: filepath.Join(b.TempDir(), "config.json"), Servers: []config.Server{fx("fs")}}
	agg, err := Start(context.Background(), cfg, Options{Log: logging.New(io.Discard, slog.LevelError), Stderr: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	cr, cw := io.Pipe()
	ar, aw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = agg.Serve(context.Background(), cr, aw)
		aw.Close()
	}()
	defer func() {
		cw.Close()
		<-done
		agg.Close()
	}()
	in := bufio.NewReaderSize(ar, 1<<16)
	answer := func() []byte {
		line, err := in.ReadSlice('\n')
		if err != nil {
			b.Fatalf("reading the answer: %v", err)
		}
		return line
	}
	write := func(line []byte) {
		if _, err := cw.Write(line); err != nil {
			b.Fatal(err)
		}
	}
	write([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}` + "\n"))
	answer()
	write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
	head := []byte(`{"jsonrpc":"2.0","id":`)
	tail := []byte(`,"method":"tools/call","params":{"name":"fs:echo","arguments":{"text":"hello"}}}` + "\n")
	lines := make([]byte, 0, 256*n)
	id := 0
	b.ReportAllocs()
	for b.Loop() {
		lines = lines[:0]
		for range n {
			id++
			lines = append(strconv.AppendInt(append(lines, head...), int64(id), 10), tail...)
		}
		write(lines)
		for range n {
			if got := answer(); !bytes.Contains(got, []byte(`"hello"`)) {
				b.Fatalf("the answer: %s", got)
			}
		}
	}
}
