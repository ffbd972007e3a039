package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Shared servers (issue #29, --share): a call through a shared session crosses one hop more
// than through an unshared one (client, session, shared process, server), so it is held to the
// floor of two hops, two byte relays in a row, as an unshared session is to one; each figure
// beside the direct connection, one relay, two relays and an unshared session, interleaved in
// one run, and the shared session against two relays within each run (the machine's speed moves
// between runs; for throughput, below 1x is fewer calls), measured one after the other
// (measureOrder). Then what sharing is for: the start-up of a session whose servers another session
// already runs, and the memory of five sessions of ten servers, shared and unshared. Last, what
// a session costs on a shared set, and a hundred sessions at once (sharedScale, issue #34).
func (b *bench) shared() string {
	rt := filepath.Join(b.dir, "rt") // the shared process of this run alone
	if err := os.Mkdir(rt, 0o700); err != nil {
		log.Fatal(err)
	}
	os.Setenv("XDG_RUNTIME_DIR", rt)
	defer os.Unsetenv("XDG_RUNTIME_DIR")
	config := b.config(1, nil)
	share := func() *exec.Cmd {
		return exec.Command(b.bin(), "--config", config, "--separator", "__", "--share", "--linger", "1s")
	}
	// hops are the processes between the client and the server, whose CPU time is the path's.
	self := func(s *session) []int { return []int{s.cmd.Process.Pid} }
	ways := []struct { // in the tables' order; measureOrder names them by their places here
		label string
		start func() *session
		tool  string
		hops  func(s *session) []int
	}{
		{"direct", func() *session { return b.direct() }, "echo", nil},
		{"one relay", func() *session { s, _ := connect(relayed(exec.Command(*fixtureBin))); return s }, "echo", self},
		{"two relays", func() *session { s, _ := connect(relayed(relayed(exec.Command(*fixtureBin)))); return s }, "echo",
			func(s *session) []int { return append(self(s), childrenOf(s.cmd.Process.Pid)...) }},
		{"unshared", func() *session { s, _ := b.aggregated(1); return s }, "s00__echo", self},
		{"shared", func() *session { s, _ := connect(share()); return s }, "s00__echo",
			func(s *session) []int { return append(self(s), sharedDaemons(rt)...) }},
	}
	var sb strings.Builder
	head, rule := "| measurement |", "| --- |"
	for _, w := range ways {
		head += " " + w.label + " |"
		rule += " --- |"
	}
	sb.WriteString(head + " shared against unshared | shared against two relays |\n" + rule + " --- | --- |\n")
	line := func(name string, figures []float64, f func(float64) string) {
		cells := mapTo(figures, f)
		n := len(figures)
		fmt.Fprintf(&sb, "| %s | %s | %s | %s |\n", name, strings.Join(cells, " | "), pct(figures[n-1], figures[n-2]), pct(figures[n-1], figures[2]))
		fmt.Fprintf(os.Stderr, "%-50s %s\n", name, strings.Join(cells, "  "))
	}
	cpuLine := func(name string, perCall []float64) {
		cells := mapTo(perCall[1:], usF)
		n := len(perCall)
		fmt.Fprintf(&sb, "| %s |  | %s | %s | %s |\n", name, strings.Join(cells, " | "), pct(perCall[n-1], perCall[n-2]), pct(perCall[n-1], perCall[2]))
		fmt.Fprintf(os.Stderr, "%-50s %s\n", name, strings.Join(cells, "  "))
	}
	// runRatios are a measurement's figures for the shared session and two relays, run by run.
	type runRatios struct {
		name           string
		shared, relays []float64
	}
	var perRun []runRatios
	for _, m := range []struct {
		name, cpuName string
		measure       measure
		f             func(float64) string
	}{{"echo p50", "sequential", echoP50, usF}, {"throughput, 8 callers (calls/s)", "8 callers", throughput8, perSecond}} {
		sessions := make([]*session, len(ways))
		for i, w := range ways {
			sessions[i] = w.start()
		}
		byWay, cpuByWay := make([][]float64, len(ways)), make([][]float64, len(ways))
		userByWay := make([][]float64, len(ways))
		for run := range *runs {
			for _, i := range measureOrder(run) {
				w := ways[i]
				var pids []int
				if w.hops != nil {
					pids = w.hops(sessions[i])
				}
				before, userBefore, sysBefore := cpuTimes(pids), userTicks(pids), sysTicks(pids)
				x, n := m.measure(sessions[i], w.tool)
				byWay[i] = append(byWay[i], x)
				cpu := float64(cpuTimes(pids)-before) / float64(n)
				cpuByWay[i] = append(cpuByWay[i], cpu)
				// The user-mode part of it, by the share of user time in the processes' ticks.
				if user, sys := userTicks(pids)-userBefore, sysTicks(pids)-sysBefore; user+sys > 0 {
					userByWay[i] = append(userByWay[i], cpu*float64(user)/float64(user+sys))
				}
			}
		}
		figures, perCall, userPerCall := make([]float64, len(ways)), make([]float64, len(ways)), make([]float64, len(ways))
		for i, s := range sessions {
			figures[i], perCall[i] = median(byWay[i]), median(cpuByWay[i])
			if len(userByWay[i]) > 0 {
				userPerCall[i] = median(userByWay[i])
			}
			s.Close()
		}
		line(m.name, figures, m.f)
		cpuLine("CPU of the path per call ("+m.cpuName+")", perCall)
		cpuLine("of it in user mode ("+m.cpuName+")", userPerCall)
		last := len(ways) - 1
		perRun = append(perRun, runRatios{m.name, byWay[last], byWay[2]}, runRatios{"CPU of the path per call (" + m.cpuName + ")", cpuByWay[last], cpuByWay[2]})
	}
	// The machine's speed moves between runs, and the two relays' figure with it: the ratio
	// within each run, where the ways were measured minutes apart at most, holds better.
	sb.WriteString("\n| measurement | shared against two relays, within each run: median | each run |\n| --- | --- | --- |\n")
	for _, r := range perRun {
		ratios := make([]float64, len(r.shared))
		for i := range ratios {
			ratios[i] = r.shared[i] / r.relays[i]
		}
		each := mapTo(ratios, func(x float64) string { return fmt.Sprintf("%.2fx", x) })
		fmt.Fprintf(&sb, "| %s | %.2fx | %s |\n", r.name, median(ratios), strings.Join(each, " "))
		fmt.Fprintf(os.Stderr, "%-50s shared against two relays, run by run: %.2fx [%s]\n", r.name, median(ratios), strings.Join(each, " "))
	}
	sb.WriteString("\n")
	sb.WriteString(b.sharedStartAndMemory(rt))
	sb.WriteString("\n")
	sb.WriteString(b.sharedScale())
	return sb.String()
}

// measureOrder is the order in which run measures the ways of shared (their indices): two
// relays and the shared session one after the other, since their ratio within the run is the
// figure held to a target (the machine's speed moves within a run too), and every other run the
// other way round, so that a drift within runs favours neither.
func measureOrder(run int) []int {
	order := []int{0, 1, 3, 2, 4} // direct, one relay, unshared, two relays, shared
	if run%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// sharedStartAndMemory measures ten servers that take 300 ms each to start and hold 40 MiB (a
// Node server idles at 40 to 60): the start-up of a session (connect and tools/list) unshared,
// and shared while another session runs them; and the total RSS of five sessions, every process
// of the program and its servers.
func (b *bench) sharedStartAndMemory(rt string) string {
	config := b.configOfEach(10, func(i int) []string { return []string{"-start-delay", "300ms", "-ballast-mib", "40"} })
	start := func(flags ...string) (*session, time.Duration) {
		s, _ := connect(exec.Command(b.bin(), append([]string{"--config", config, "--separator", "__"}, flags...)...))
		begin := time.Now()
		if _, err := s.ListTools(context.Background(), nil); err != nil {
			log.Fatal(err)
		}
		return s, time.Since(begin)
	}
	shareFlags := []string{"--share", "--linger", "1s"}
	var unshared, shared []time.Duration
	for range *runs {
		t0 := time.Now()
		s, _ := start()
		unshared = append(unshared, time.Since(t0))
		s.Close()
		first, _ := start(shareFlags...)
		t0 = time.Now()
		second, _ := start(shareFlags...)
		shared = append(shared, time.Since(t0))
		second.Close()
		first.Close()
	}
	var sb strings.Builder
	sb.WriteString("| measurement | unshared | shared | shared against unshared |\n| --- | --- | --- | --- |\n")
	fmt.Fprintf(&sb, "| start-up of a session (connect and tools/list), 10 servers of 300 ms, another session already running them | %s | %s | %s |\n",
		ms(median(unshared)), ms(median(shared)), pct(float64(median(shared)), float64(median(unshared))))

	const n = 5
	total := func(flags ...string) (procs int, mem int64) {
		var ss []*session
		for range n {
			s, _ := start(flags...)
			ss = append(ss, s)
		}
		roots := sharedDaemons(rt) // a descendant of the session that started it, or of none
		for _, s := range ss {
			call(s, "s00__echo", map[string]any{})
			roots = append(roots, s.cmd.Process.Pid)
		}
		procs, mem = trees(roots)
		for _, s := range ss {
			s.Close()
		}
		return procs, mem
	}
	up, um := total()
	sp, sm := total(shareFlags...)
	fmt.Fprintf(&sb, "| processes and total RSS of %d sessions of 10 servers of 40 MiB | %d, %s | %d, %s | %s of the memory |\n", n, up, mib(um), sp, mib(sm), pct(float64(sm), float64(um)))
	waitNoDaemon(rt)
	return sb.String()
}

// cpuTimes is the CPU time of the processes pids (every thread), in nanoseconds.
func cpuTimes(pids []int) int64 {
	var total int64
	for _, pid := range pids {
		total += cpuTime(pid)
	}
	return total
}

// userTicks and sysTicks are the user-mode and kernel-mode CPU time of the processes pids (every
// thread), in clock ticks (/proc/PID/stat).
func userTicks(pids []int) int64 { return statTicks(pids, 13) }
func sysTicks(pids []int) int64  { return statTicks(pids, 14) }

// statTicks sums field i (counted from 0) of the processes' /proc/PID/stat.
func statTicks(pids []int, i int) int64 {
	var total int64
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The command, field 1, is in parentheses and may hold spaces: count after it.
		s := string(data)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if n, err := strconv.ParseInt(fields[i-2], 10, 64); err == nil {
			total += n
		}
	}
	return total
}

// childrenOf are the processes pid started, from any of its threads.
func childrenOf(pid int) []int {
	// Each thread's children are its own file: a Go process starts a child from whichever
	// thread the goroutine runs on.
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var pids []int
	for _, file := range files {
		data, _ := os.ReadFile(file)
		for _, f := range strings.Fields(string(data)) {
			if c, err := strconv.Atoi(f); err == nil {
				pids = append(pids, c)
			}
		}
	}
	return pids
}

// sharedDaemons are the shared processes whose socket is under dir.
func sharedDaemons(dir string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(data), "\x00")
		if len(args) > 2 && args[1] == "__shared" && strings.HasPrefix(args[2], dir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitNoDaemon waits for the shared process of dir to end (its linger), so that the next
// measurement runs on a quiet machine.
func waitNoDaemon(dir string) {
	deadline := time.Now().Add(15 * time.Second)
	for len(sharedDaemons(dir)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
}
