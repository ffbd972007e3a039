package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What a session on a shared set costs, seen from the outside only (the processes of /proc and
// MCP over stdio), so that it holds whatever the program does inside (issue #34): the processes
// of the program that one more session adds to a shared set already running, and a hundred
// sessions of one configuration started at once.

// hundred is how many sessions sharedHundred starts at once.
const hundred = 100

// sharedScale measures a session's footprint and a hundred sessions at once, each in a runtime
// directory of its own (a shared process of its own, told from any other by its environment),
// and returns their table, with the targets of issue #34.
func (b *bench) sharedScale() string {
	var sb strings.Builder
	sb.WriteString("| measurement | shared | target |\n| --- | --- | --- |\n")
	line := func(name, figure, target string) {
		fmt.Fprintf(&sb, "| %s | %s | %s |\n", name, figure, target)
		if target != "" {
			figure += " (target: " + target + ")"
		}
		fmt.Fprintf(os.Stderr, "%-50s %s\n", name, figure)
	}
	fp := b.sessionFootprint()
	line("a session on a shared set of 10 servers: processes of the program it adds, and their RSS (PSS)",
		fmt.Sprintf("%d, %s (%s; PSS %s)", fp.procs, mib(fp.rss), fp.roles, mib(fp.pss)), "1, under 10 MiB")
	h := b.sharedHundred()
	const of = "100 sessions at once of 3 servers: "
	line(of+"time for all to connect (from their start to every session's tools/list answered)",
		fmt.Sprintf("%s (median session %s)", ms(h.all), ms(h.median)), "")
	line(of+"sessions initialized, listed and answered with their own answer", fmt.Sprintf("%d of %d", h.ok, hundred), fmt.Sprintf("%d of %d", hundred, hundred))
	line(of+"server processes", strconv.Itoa(h.servers), "3, one per server")
	line(of+"processes and total RSS of the program (sessions, shared process, watchdogs), and their PSS",
		fmt.Sprintf("%d, %s (%s; PSS %s)", h.program.procs, mib(h.program.rss), h.program.roles, mib(h.program.pss)), "under 1,100 MiB")
	line(of+"processes left once all are closed", h.left, "none, after the linger (1 s)")
	return sb.String()
}

// footprint is what some processes of the program hold: how many, their RSS summed, and both
// by role (the first argument of a process the program runs as, else a session).
type footprint struct {
	procs int
	rss   int64
	pss   int64 // the proportional set: the pages of the program's file, which every process of it shares, counted once in all
	roles string
}

// footprintOf sums ps.
func footprintOf(ps []proc) footprint {
	type role struct {
		n   int
		rss int64
	}
	byRole := map[string]*role{}
	var f footprint
	for _, p := range ps {
		f.procs++
		f.rss += p.rss
		f.pss += p.pss
		if byRole[p.role] == nil {
			byRole[p.role] = &role{}
		}
		byRole[p.role].n++
		byRole[p.role].rss += p.rss
	}
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(byRole)) {
		parts = append(parts, fmt.Sprintf("%d %s: %s", byRole[name].n, name, mib(byRole[name].rss)))
	}
	f.roles = strings.Join(parts, ", ")
	return f
}

// sessionFootprint starts a session of ten servers with --share, then, -runs times, one more
// session of the same configuration (connected, tools/list and a call answered): the processes
// of the program that appeared with it, other than a shared process, and their RSS. The run of
// median RSS is returned.
func (b *bench) sessionFootprint() footprint {
	rt, restore := b.runtimeDir("rt-one")
	defer restore()
	config := b.config(10, nil)
	share := func() *exec.Cmd {
		return exec.Command(b.bin(), "--config", config, "--separator", "__", "--share", "--linger", "1s")
	}
	listed := func(s *session) {
		if _, err := s.ListTools(context.Background(), nil); err != nil {
			log.Fatal(err)
		}
	}
	first, _ := connect(share())
	listed(first) // the ten servers run
	var results []footprint
	for range *runs {
		before := map[int]bool{}
		program, _ := b.procsOf(rt)
		for _, p := range program {
			before[p.pid] = true
		}
		s, _ := connect(share())
		listed(s)
		call(s, "s00__echo", map[string]any{"text": "hello"})
		program, _ = b.procsOf(rt)
		var added []proc
		for _, p := range program {
			if !before[p.pid] && p.role != daemonRole {
				added = append(added, p)
			}
		}
		results = append(results, footprintOf(added))
		s.Close()
		b.waitProcs(rt, 10*time.Second, func(program, _ []proc) bool {
			return !slices.ContainsFunc(program, func(p proc) bool { return !before[p.pid] && p.role != daemonRole })
		})
	}
	first.Close()
	b.waitGone(rt)
	slices.SortFunc(results, func(x, y footprint) int { return cmp.Compare(x.rss, y.rss) })
	return results[len(results)/2]
}

// hundredResult is what sharedHundred measured.
type hundredResult struct {
	all, median time.Duration // until every session's tools/list was answered; one session's
	ok          int           // sessions that got every answer, each its own
	servers     int           // server processes while the hundred run
	program     footprint     // the program's processes while the hundred run
	left        string        // what was left once every session was closed
}

// member is one of the hundred sessions.
type member struct {
	cmd    *exec.Cmd
	s      *mcp.ClientSession
	stderr string // the file of its stderr
	listed time.Duration
	err    error
}

// sharedHundred starts a hundred sessions of one configuration of three servers with --share,
// all at once: each connects (initialize and notifications/initialized), lists the tools and
// calls an echo tool with arguments of its own, which must come back to it, and it alone. Then
// the processes, while all are connected; then all are closed, and nothing may be left.
func (b *bench) sharedHundred() hundredResult {
	rt, restore := b.runtimeDir("rt-100")
	defer restore()
	config := b.config(3, nil)
	logs := filepath.Join(b.dir, "hundred")
	if err := os.Mkdir(logs, 0o700); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	members := make([]*member, hundred)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range members {
		m := &member{stderr: filepath.Join(logs, fmt.Sprintf("session-%03d.log", i))}
		members[i] = m
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.err = m.run(ctx, b.bin(), config, i, start)
		}()
	}
	wg.Wait()
	var r hundredResult
	var listed []time.Duration
	var failed []string
	for i, m := range members {
		if m.err != nil {
			failed = append(failed, fmt.Sprintf("session %d: %v (its stderr: %s)", i, m.err, m.stderr))
			continue
		}
		r.ok++
		listed = append(listed, m.listed)
	}
	for i, f := range failed {
		if i == 5 {
			fmt.Fprintf(os.Stderr, "... and %d more\n", len(failed)-i)
			break
		}
		fmt.Fprintln(os.Stderr, f)
	}
	if len(listed) > 0 {
		r.all, r.median = slices.Max(listed), median(listed)
	}
	program, servers := b.procsOf(rt)
	r.servers, r.program = len(servers), footprintOf(program)

	// Close them all at once, each its stdin, then wait for it; a session that does not end
	// within the bound is killed, and said.
	closed := make(chan struct{})
	go func() {
		var wg sync.WaitGroup
		for _, m := range members {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if m.s != nil {
					m.s.Close()
				}
				m.cmd.Wait()
			}()
		}
		wg.Wait()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "sessions still running 30 s after their input was closed: killed")
		for _, m := range members {
			if m.cmd.Process != nil {
				m.cmd.Process.Kill() // safe beside Wait, and a no-op once it has reaped the process
			}
		}
		<-closed
	}
	ended := time.Now()
	left := b.waitProcs(rt, 20*time.Second, func(program, servers []proc) bool { return len(program)+len(servers) == 0 })
	if len(left) == 0 {
		r.left = fmt.Sprintf("none, %s after the last session ended", ms(time.Since(ended)))
	} else {
		r.left = fmt.Sprintf("%d after %s (killed)", len(left), ms(time.Since(ended)))
		for _, p := range left {
			if proc, err := os.FindProcess(p.pid); err == nil {
				_ = proc.Kill()
			}
		}
	}
	return r
}

// run is one of the hundred: started, connected, its tools listed (listed is the time from
// start until then), and one echo of its own called on the server i%3.
func (m *member) run(ctx context.Context, bin, config string, i int, start time.Time) error {
	m.cmd = exec.Command(bin, "--config", config, "--separator", "__", "--share", "--linger", "1s")
	stderr, err := os.Create(m.stderr)
	if err != nil {
		return err
	}
	defer stderr.Close() // the process has its own copy
	m.cmd.Stderr = stderr
	stdin, err := m.cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := m.cmd.Start(); err != nil {
		return err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	m.s, err = client.Connect(ctx, &mcp.IOTransport{Reader: stdout, Writer: stdin, MaxLineLength: 16 << 20}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		stdin.Close() // the process ends at the end of its input
		return fmt.Errorf("connecting: %w", err)
	}
	tools, err := m.s.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	m.listed = time.Since(start)
	for s := range 3 {
		name := fmt.Sprintf("s%02d__echo", s)
		if !slices.ContainsFunc(tools.Tools, func(t *mcp.Tool) bool { return t.Name == name }) {
			return fmt.Errorf("tools/list: no %s among %d tools", name, len(tools.Tools))
		}
	}
	own := map[string]any{"text": fmt.Sprintf("session %d of %d", i, hundred), "session": float64(i)}
	res, err := m.s.CallTool(ctx, &mcp.CallToolParams{Name: fmt.Sprintf("s%02d__echo", i%3), Arguments: own})
	if err != nil {
		return fmt.Errorf("tools/call: %w", err)
	}
	if res.IsError || !reflect.DeepEqual(res.StructuredContent, own) {
		return fmt.Errorf("tools/call: answered %v (error %v), not its own %v", res.StructuredContent, res.IsError, own)
	}
	return nil
}

// runtimeDir makes dir under the run's directory the XDG_RUNTIME_DIR of the sessions started
// until restore is called (which puts back the one before): their shared process is of this
// directory alone, and every process they start is told by it in its environment.
func (b *bench) runtimeDir(name string) (dir string, restore func()) {
	dir = filepath.Join(b.dir, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		log.Fatal(err)
	}
	prev, had := os.LookupEnv("XDG_RUNTIME_DIR")
	os.Setenv("XDG_RUNTIME_DIR", dir)
	return dir, func() {
		if had {
			os.Setenv("XDG_RUNTIME_DIR", prev)
		} else {
			os.Unsetenv("XDG_RUNTIME_DIR")
		}
	}
}

// daemonRole is the role of the shared process: the first argument it is started with.
const daemonRole = "__shared"

// proc is a process of the program, or a server, as /proc shows it.
type proc struct {
	pid, ppid int
	role      string // the first argument when it starts with "__" (__shared, __watchdog), else "session"
	rss, pss  int64
}

// procsOf are the processes of the program and the servers (fixture servers) of the sessions
// run with the runtime directory rt: those with it in their environment or their arguments,
// and the processes of the program and servers below them (in case a process is started with
// an environment of its own).
func (b *bench) procsOf(rt string) (program, servers []proc) {
	agg, fixture := resolved(b.bin()), resolved(*fixtureBin)
	type candidate struct {
		proc
		server, marked bool
	}
	cands := map[int]*candidate{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil {
			continue // another user's, or gone
		}
		exe = strings.TrimSuffix(exe, " (deleted)") // the binary was rebuilt since it started
		if exe != agg && exe != fixture {
			continue
		}
		c := &candidate{proc: proc{pid: pid, role: "session"}, server: exe == fixture}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
		if len(args) > 1 && strings.HasPrefix(args[1], "__") {
			c.role = args[1]
		}
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		c.marked = slices.Contains(strings.Split(string(environ), "\x00"), "XDG_RUNTIME_DIR="+rt) ||
			slices.ContainsFunc(args, func(a string) bool { return a == rt || strings.HasPrefix(a, rt+"/") })
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its closing ')'.
		if fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(fields) > 1 {
			c.ppid, _ = strconv.Atoi(fields[1])
		}
		c.rss, c.pss = rss(pid, "VmRSS"), pss(pid)
		cands[pid] = c
	}
	// ours: marked, or below a process of the program that is ours.
	var ours func(c *candidate, depth int) bool
	ours = func(c *candidate, depth int) bool {
		if c.marked {
			return true
		}
		parent := cands[c.ppid]
		return parent != nil && !parent.server && depth < 64 && ours(parent, depth+1)
	}
	for _, pid := range slices.Sorted(maps.Keys(cands)) {
		c := cands[pid]
		switch {
		case !ours(c, 0):
		case c.server:
			servers = append(servers, c.proc)
		default:
			program = append(program, c.proc)
		}
	}
	return program, servers
}

// resolved is path with its links resolved, as /proc/PID/exe shows it.
func resolved(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	return path
}

// waitProcs waits, at most bound, until done holds of the processes of rt, and returns the
// program's and servers' processes left when it does not.
func (b *bench) waitProcs(rt string, bound time.Duration, done func(program, servers []proc) bool) []proc {
	deadline := time.Now().Add(bound)
	for {
		program, servers := b.procsOf(rt)
		if done(program, servers) {
			return nil
		}
		if time.Now().After(deadline) {
			return append(program, servers...)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitGone waits (bounded) until no process of rt is left: the shared process's linger.
func (b *bench) waitGone(rt string) {
	if left := b.waitProcs(rt, 15*time.Second, func(program, servers []proc) bool { return len(program)+len(servers) == 0 }); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "%d processes of %s left 15 s after the last session\n", len(left), rt)
	}
}

// pss is the proportional set size of pid (smaps_rollup): its resident pages, each shared one
// divided among the processes that share it. Summed over processes, it counts the pages of the
// program's file that all of them map once, where RSS counts them in every process.
func pss(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
