package aggregator

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// The mode's tools/list stays under 2,000 tokens whatever the number of servers: with 100
// servers of long keys, instructions and many tools, the search tool's description names as
// many keys as fit its budget and counts the rest. Tokens are counted as bytes / 3, the rate
// of JSON (English prose is nearer bytes / 4).
func TestToolSearchListSize(t *testing.T) {
	for _, n := range []int{1, 24, 100, 1000} {
		var list []*server
		for i := range n {
			s := &server{key: fmt.Sprintf("a-server-with-a-long-key-%04d", i), log: slog.New(slog.DiscardHandler),
				instructions: strings.Repeat("This server does many things for its users. ", 10)}
			for j := range 30 {
				s.lists[kindTools] = append(s.lists[kindTools], json.RawMessage(fmt.Sprintf(`{"name":"tool_%d","description":"Does thing %d.","inputSchema":{"type":"object"}}`, j, j)))
			}
			list = append(list, s)
		}
		c, err := buildCatalog(list, "__")
		if err != nil {
			t.Fatal(err)
		}
		got := c.searching().list
		if tokens := len(got) / 3; tokens >= 2000 {
			t.Errorf("%d servers: tools/list of %d bytes, about %d tokens; want under 2,000:\n%s", n, len(got), tokens, got)
		}
		var desc struct {
			Tools []struct{ Description string } `json:"tools"`
		}
		json.Unmarshal(got, &desc)
		if !strings.Contains(desc.Tools[0].Description, "a-server-with-a-long-key-0000") || (n > 20) != strings.Contains(desc.Tools[0].Description, "more") {
			t.Errorf("%d servers: the search tool's description does not name the first key, or count the rest:\n%s", n, desc.Tools[0].Description)
		}
		t.Logf("%d servers: %d bytes", n, len(got))
	}
}
