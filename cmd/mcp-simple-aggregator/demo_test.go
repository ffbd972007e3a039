package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's first command: the program on the bundled demo config, from the repository's
// root, shows the demo servers' tools working.
func TestReadmeDemo(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	session, err := os.Open(filepath.Join(root, "examples", "demo-session.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	cmd := exec.Command(aggBinary, "--config", "examples/demo.json")
	cmd.Dir = root
	cmd.Stdin = session
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nstderr:\n%s", err, &stderr)
	}
	for _, want := range []string{
		`"name":"calc:add"`, `"name":"calc:divide"`, `"name":"notes:add_note"`, `"name":"notes:list_notes"`,
		// The demo servers are go-sdk ones of both eras, spoken to in the modern era: their
		// results carry resultType and their serverInfo in _meta too.
		`"content":[{"type":"text","text":"{\"result\":42}"}],"structuredContent":{"result":42}`,
		`"content":[{"type":"text","text":"note 1 saved"}]`,
		`"content":[{"type":"text","text":"cannot divide 1 by zero"}],"isError":true`,
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %s\nstdout:\n%s\nstderr:\n%s", want, &stdout, &stderr)
		}
	}
}

// check on the bundled demo config: both servers healthy, with their tools, prompts and
// resources counted.
func TestCheckDemo(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(aggBinary, "check", "--config", "examples/demo.json")
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^calc +ok +[0-9]+ms +2026-07-28 +modern +3 +0 +0 +0$`),
		regexp.MustCompile(`(?m)^notes +ok +[0-9]+ms +2026-07-28 +modern +2 +1 +1 +0$`),
		regexp.MustCompile(`(?m)^2 of 2 servers healthy, 5 tools.$`),
	} {
		if !want.Match(stdout.Bytes()) {
			t.Errorf("stdout lacks %s:\n%s", want, &stdout)
		}
	}
}
