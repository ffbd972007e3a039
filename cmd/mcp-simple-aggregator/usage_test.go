package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUsage pins each command's usage text (what --help prints) to testdata/usage/NAME.txt
// (serve.txt for serving); go test -update rewrites them. A change of a flag, a placeholder or
// a help text shows in the diff of these files.
func TestUsage(t *testing.T) {
	for _, c := range commands() {
		name := c.name()
		if name == "" {
			name = "serve"
		}
		t.Run(name, func(t *testing.T) {
			args := []string{"--help"}
			if c.name() != "" {
				args = []string{c.name(), "--help"}
			}
			var stdout, stderr bytes.Buffer
			if code := run(args, strings.NewReader(""), &stdout, &stderr); code != exitOK || stderr.Len() > 0 {
				t.Fatalf("%v: status %d, stderr %q", args, code, stderr.String())
			}
			got := stdout.String()
			if strings.Contains(got, " long\n") || strings.Contains(got, " duration\n") || strings.Contains(got, " value\n") {
				t.Errorf("a flag's placeholder does not say what it takes:\n%s", got)
			}
			file := filepath.Join("testdata", "usage", name+".txt")
			if *update {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (go test -run TestUsage -update writes it)", err)
			}
			if got != string(want) {
				t.Errorf("%s --help differs from %s (go test -run TestUsage -update rewrites it):\n%s", title(c), file, got)
			}
		})
	}
}

// TestFlagsOfOtherCommands checks that a flag a command does not take is a usage error that
// names the command, and the commands that take it, before anything runs.
func TestFlagsOfOtherCommands(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "--config", "c.json", "--audit-log", "a.jsonl"},
			"mcp-simple-aggregator check: flag provided but not defined: -audit-log (a flag of serving, not of check)\n"},
		{[]string{"pin", "--config", "c.json", "--share"},
			"mcp-simple-aggregator pin: flag provided but not defined: -share (a flag of serving and check, not of pin)\n"},
		{[]string{"--config", "c.json", "--server", "x"},
			"mcp-simple-aggregator: flag provided but not defined: -server (a flag of pin, not of serving)\n"},
		{[]string{"stop", "--config", "c.json"},
			"mcp-simple-aggregator stop: flag provided but not defined: -config (a flag of serving, check and pin, not of stop)\n"},
		{[]string{"cache", "--debug", "clear"},
			"mcp-simple-aggregator cache: flag provided but not defined: -debug (a flag of serving, check and pin, not of cache)\n"},
		{[]string{"check", "--config", "c.json", "--no-such-flag"},
			"mcp-simple-aggregator check: flag provided but not defined: -no-such-flag\n"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, strings.NewReader(""), &stdout, &stderr)
		if code != exitUsage || stdout.Len() > 0 {
			t.Errorf("%v: status %d, stdout %q; want %d and nothing", tc.args, code, stdout.String(), exitUsage)
		}
		first, _, _ := strings.Cut(stderr.String(), "Run '")
		if first != tc.want {
			t.Errorf("%v: stderr\n%q\nwant\n%q", tc.args, first, tc.want)
		}
	}
}
