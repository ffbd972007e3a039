package config

import "testing"

func TestClosestField(t *testing.T) {
	tests := map[string]string{
		"comand":         "command",
		"commmand":       "command",
		"arg":            "args",
		"ARGS":           "args",
		"evn":            "env",
		"disabled_tools": "disabledTools",
		"exclude-tools":  "excludeTools",
		"cwdd":           "cwd",
		"dir":            "",
		"headers":        "",
		"environment":    "",
		"":               "",
		"x":              "",
	}
	for field, want := range tests {
		if got := closestField(field); got != want {
			t.Errorf("closestField(%q) = %q, want %q", field, got, want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "ab", 2}, {"abc", "abc", 0}, {"abc", "acb", 1},
		{"comand", "command", 1}, {"ca", "abc", 3}, {"kitten", "sitting", 3}, {"ü€", "€ü", 1},
	}
	for _, tt := range tests {
		if got := editDistance(tt.a, tt.b); got != tt.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
