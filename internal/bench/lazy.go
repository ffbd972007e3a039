package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Servers by use (issue #28): the time to the first tools/list answer with 25 servers that take
// 2 s each to start, from a warm catalog cache with --lazy, against the same aggregator with no
// server at all (the floor of a session); and the processes and memory of a session of 10
// servers before and after --idle-stop stops them.
func (b *bench) lazy() []row {
	cache := filepath.Join(b.dir, "lazy-cache")
	os.Setenv("XDG_CACHE_HOME", cache)
	defer os.Unsetenv("XDG_CACHE_HOME")

	args := func(i int) []string { return []string{"-start-delay", "2s", "-prefix", fmt.Sprintf("t%02d_", i)} }
	slow := b.configOfEach(25, args)
	empty := b.configOfEach(0, nil)
	warm, _ := connect(exec.Command(b.bin(), "--config", slow, "--separator", "__", "--lazy")) // fills the cache
	if _, err := warm.ListTools(context.Background(), nil); err != nil {
		log.Fatal(err)
	}
	warm.Close()
	firstList := func(config string, flags ...string) time.Duration {
		start := time.Now()
		s, _ := connect(exec.Command(b.bin(), append([]string{"--config", config, "--separator", "__"}, flags...)...))
		if _, err := s.ListTools(context.Background(), nil); err != nil {
			log.Fatal(err)
		}
		took := time.Since(start)
		s.Close()
		return took
	}
	var floor, lazy, eager []time.Duration
	for range *runs {
		floor = append(floor, firstList(empty))
		lazy = append(lazy, firstList(slow, "--lazy"))
	}
	eager = append(eager, firstList(slow))
	rows := []row{
		{"first tools/list, 25 servers of 2 s, --lazy from a warm cache", ms(median(floor)) + " (no server)", ms(median(lazy)),
			fmt.Sprintf("+%s over a session with no server; %s without --lazy", ms(median(lazy)-median(floor)), ms(eager[0])), "well under one server's start"},
	}

	// Idle stop: 10 servers, each called once, then left alone.
	s, _ := connect(exec.Command(b.bin(), "--config", b.configOfEach(10, nil), "--separator", "__", "--idle-stop", "500ms"))
	for i := range 10 {
		call(s, fmt.Sprintf("s%02d__echo", i), map[string]any{})
	}
	procs, mem := tree(s.cmd.Process.Pid)
	deadline := time.Now().Add(10 * time.Second)
	afterProcs, afterMem := procs, mem
	for afterProcs > 2 && time.Now().Before(deadline) { // the aggregator and its watchdog
		time.Sleep(50 * time.Millisecond)
		afterProcs, afterMem = tree(s.cmd.Process.Pid)
	}
	s.Close()
	rows = append(rows, row{"processes and total RSS of a session of 10 servers, before and after --idle-stop 500ms",
		fmt.Sprintf("%d, %s", procs, mib(mem)), fmt.Sprintf("%d, %s", afterProcs, mib(afterMem)),
		fmt.Sprintf("%.0f%% of the memory", 100*float64(afterMem)/float64(mem)), ""})
	return rows
}

// configOfEach writes a configuration of n fixture servers, the i-th started with args(i) (none
// when args is nil), and returns its path.
func (b *bench) configOfEach(n int, args func(i int) []string) string {
	var entries []string
	for i := range n {
		a := []string{}
		if args != nil {
			a = args(i)
		}
		q := make([]string, len(a))
		for j, x := range a {
			q[j] = strconv.Quote(x)
		}
		entries = append(entries, fmt.Sprintf(`"s%02d":{"command":%q,"args":[%s]}`, i, *fixtureBin, strings.Join(q, ",")))
	}
	b.seq++
	path := filepath.Join(b.dir, fmt.Sprintf("config-%d.json", b.seq))
	if err := os.WriteFile(path, []byte(`{"mcpServers":{`+strings.Join(entries, ",")+`}}`), 0o600); err != nil {
		log.Fatal(err)
	}
	return path
}

// tree counts the processes of the tree rooted at pid (itself included) and sums their RSS.
func tree(pid int) (procs int, rssBytes int64) { return trees([]int{pid}) }

// trees counts the processes of the trees rooted at pids, each process once (a root may be in
// another's tree), and sums their RSS.
func trees(pids []int) (procs int, rssBytes int64) {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its closing ')'.
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(fields) > 1 {
			ppid, _ := strconv.Atoi(fields[1])
			children[ppid] = append(children[ppid], p)
		}
	}
	seen := map[int]bool{}
	var walk func(int)
	walk = func(p int) {
		if seen[p] {
			return
		}
		seen[p] = true
		procs++
		rssBytes += rss(p, "VmRSS")
		for _, c := range children[p] {
			walk(c)
		}
	}
	for _, p := range pids {
		walk(p)
	}
	return procs, rssBytes
}
