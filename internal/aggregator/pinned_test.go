package aggregator

import "testing"

// The command a message suggests can be pasted into a shell as it is: a path or key that a
// shell would split, expand or glob is quoted.
func TestPinCommand(t *testing.T) {
	for _, tc := range []struct{ config, key, want string }{
		{"/home/ada/mcp.json", "", "mcp-simple-aggregator pin --config /home/ada/mcp.json"},
		{"mcp.json", "github", "mcp-simple-aggregator pin --config mcp.json --server github"},
		{"/home/ada/My Servers/mcp.json", "b/é x", "mcp-simple-aggregator pin --config '/home/ada/My Servers/mcp.json' --server 'b/é x'"},
		{"c.json", "it's $HOME", `mcp-simple-aggregator pin --config c.json --server 'it'\''s $HOME'`},
		{"~/c.json", "*", "mcp-simple-aggregator pin --config '~/c.json' --server '*'"},
	} {
		if got := pinCommand(tc.config, tc.key); got != tc.want {
			t.Errorf("pinCommand(%q, %q) = %s, want %s", tc.config, tc.key, got, tc.want)
		}
	}
}
