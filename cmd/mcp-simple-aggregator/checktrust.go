package main

import (
	"fmt"
	"io"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/aggregator"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/trust"
)

// writeTrust prints what check found of trust: the hidden characters in what each server tells
// the model, a line each, and when there is a lock file, each definition that differs from it
// (a server the lock has no entry for in one line), and the servers it pins that the
// configuration no longer has. It returns how many runs of hidden characters and how many
// differences that --pinned withholds it printed.
func writeTrust(w io.Writer, rep *aggregator.Report) (hidden, differences int) {
	var found []string
	for _, s := range rep.Servers {
		for _, f := range s.HiddenCharacters {
			found = append(found, fmt.Sprintf("server %q: %s", s.Key, f))
		}
	}
	if len(found) > 0 {
		fmt.Fprintf(w, "\nHidden characters in what the servers tell the model (a person reading the definitions does not see them; the model reads them):\n")
		for _, line := range found {
			fmt.Fprintln(w, line)
		}
	}
	if rep.LockFile == "" {
		return len(found), 0
	}
	var lines []string
	for _, s := range rep.Servers {
		if len(s.Lock) > 0 && s.Lock[0].Status == trust.Unpinned {
			lines = append(lines, fmt.Sprintf("server %q has no entry in the lock: %s", s.Key, counted(s.Lock)))
			differences += len(s.Lock)
			continue
		}
		for _, d := range s.Lock {
			lines = append(lines, d.String())
			if d.Withheld() {
				differences++
			}
		}
	}
	for _, key := range rep.LockOnly {
		lines = append(lines, fmt.Sprintf("server %q has an entry in the lock, and is not in %s", key, rep.File))
	}
	if len(lines) == 0 {
		fmt.Fprintf(w, "\nEvery server is as pinned in %s.\n", rep.LockFile)
		return len(found), 0
	}
	fmt.Fprintf(w, "\nDifferences from the lock file %s (with --pinned, what differs is withheld; to accept it, run mcp-simple-aggregator pin --config %s, with --server KEY for one server):\n",
		rep.LockFile, rep.File)
	for _, line := range lines {
		fmt.Fprintln(w, line)
	}
	return len(found), differences
}

// pinnedWithheld counts the definitions of the report withheld because they differ from the
// lock (check --pinned).
func pinnedWithheld(rep *aggregator.Report) int {
	n := 0
	for _, s := range rep.Servers {
		for _, w := range s.Withheld {
			if w.Difference != nil {
				n++
			}
		}
	}
	return n
}
