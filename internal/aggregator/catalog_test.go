package aggregator

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
)

func testCatalog(b testing.TB, servers, tools int) *catalog {
	var list []*server
	for i := range servers {
		s := &server{key: fmt.Sprintf("s%02d", i), log: slog.New(slog.DiscardHandler)}
		for j := range tools {
			s.lists[kindTools] = append(s.lists[kindTools], json.RawMessage(fmt.Sprintf(`{"name":"tool_%d","inputSchema":{"type":"object"}}`, j)))
		}
		list = append(list, s)
	}
	c, err := buildCatalog(list, "__")
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// The routing lookup of every call allocates nothing.
func TestLookupAllocs(t *testing.T) {
	var cat atomicCatalog
	cat.Store(testCatalog(t, 10, 200))
	name := "s07__tool_123"
	allocs := testing.AllocsPerRun(1000, func() {
		if _, ok := cat.Load().tools[name]; !ok {
			t.Fatal("not found")
		}
	})
	if allocs != 0 {
		t.Errorf("the routing lookup allocates %v times per call, want 0", allocs)
	}
}

func BenchmarkLookup(b *testing.B) {
	var cat atomicCatalog
	cat.Store(testCatalog(b, 10, 200))
	name := "s07__tool_123"
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := cat.Load().tools[name]; !ok {
			b.Fatal("not found")
		}
	}
}
