package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// compare measures earlier aggregator binaries (-baseline, comma-separated) and this one side
// by side in one run, against the same child connected directly and through a byte relay (the
// floor of any hop, relay.go), interleaved (direct, relay, each build, direct, ...), so that a
// change to the core is judged on the same machine in the same minute. Each figure is the
// median of -runs runs.
//
// The pairings of client and server era are measured apart: a legacy client and the JSON-RPC
// fixture (a legacy server: the pairing nearly every user has), a modern client and that
// fixture, and the go-sdk fixture (a server of both eras, which the aggregator speaks to in
// the modern one) with a legacy and with a modern client. A build that predates the modern
// era serves a modern client in the legacy one (the go-sdk client falls back), which is the
// figure a modern pairing is held to.
func (b *bench) compare() string {
	builds := b.builds()
	var sb strings.Builder
	head := "| measurement | direct | relay |"
	rule := "| --- | --- | --- |"
	for _, bd := range builds {
		head += " " + bd.label + " |"
		rule += " --- |"
	}
	me := len(builds) - 1 // this build, without flags
	if *withTrust {
		me--
	}
	head += " change (this build against " + builds[0].label + ") | this build against the relay |"
	rule += " --- | --- |"
	if *withTrust {
		head += " --pinned --audit-log against this build |"
		rule += " --- |"
	}
	sb.WriteString(head + "\n" + rule + "\n")
	// tr is the change the trust flags make: the last build against this one.
	tr := func(xs []float64) string {
		if !*withTrust {
			return ""
		}
		return pct(xs[len(xs)-1], xs[me])
	}
	row := func(name string, direct, relay string, figures []string, change, floor, trust string) {
		cells := append([]string{name, direct, relay}, append(figures, change, floor)...)
		if *withTrust {
			cells = append(cells, trust)
		}
		fmt.Fprintf(&sb, "| %s |\n", strings.Join(cells, " | "))
		fmt.Fprintf(os.Stderr, "%-58s %s\n", name, strings.Join(cells[1:], "  "))
	}
	want := func(name string) bool { return *only == "" || *only == name }

	for _, p := range pairings {
		if p.name != "legacy client, legacy server" && !want("modern") {
			continue
		}
		if want("latency") || want("modern") {
			d, r, f, rc, fc := b.sideBySide(builds, p, echoP50)
			row("echo p50, "+p.name, usF(d), usF(r), mapTo(f, usF), pct(f[me], f[0]), pct(f[me], r), tr(f))
			row("CPU of the hop per sequential call, "+p.name, "", usF(rc), mapTo(fc, usF), pct(fc[me], fc[0]), pct(fc[me], rc), tr(fc))
		}
		if want("throughput") || want("modern") {
			d, r, f, rc, fc := b.sideBySide(builds, p, throughput8)
			row("throughput, 8 callers, "+p.name+" (calls/s)", perSecond(d), perSecond(r), mapTo(f, perSecond), pct(f[me], f[0]), pct(f[me], r), tr(f))
			row("CPU of the hop per call, 8 callers, "+p.name, "", usF(rc), mapTo(fc, usF), pct(fc[me], fc[0]), pct(fc[me], rc), tr(fc))
		}
	}
	if want("payload") {
		r, f := b.peakRSS(builds)
		row("peak RSS of the hop, one 8 MiB result", "", mibF(r), mapTo(f, mibF), pct(f[me], f[0]), fmt.Sprintf("%.2fx", float64(f[me])/float64(r)), tr(f))
	}
	if want("startup") {
		st, ls := b.startAndList(builds)
		row("start-up: 20 children of 300 ms, to tools/list", "", "", mapTo(st, msF), pct(st[me], st[0]), "", tr(st))
		row("tools/list of 2,000 tools from 10 children, p50", "", "", mapTo(ls, usF), pct(ls[me], ls[0]), "", tr(ls))
	}
	fmt.Fprintf(&sb, "\nChange: + is slower (or more memory), - faster; for throughput + is more calls. Machine: %d cores, %s/%s, %s. Date: %s. Runs: %d, interleaved (direct, relay, %s).\n",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), time.Now().UTC().Format("2006-01-02"), *runs, strings.Join(labels(builds), ", "))
	return sb.String()
}

// build is one aggregator binary of the comparison; trust runs it with --pinned (on a lock
// written by pin) and --audit-log.
type build struct {
	label, bin string
	trust      bool
}

// command is the build serving config: with trust, the lock is written first (pin) and the
// audit log goes to a file beside the configuration.
func (bd build) command(config string) *exec.Cmd {
	args := []string{"--config", config, "--separator", "__"}
	if bd.trust {
		pin := exec.Command(bd.bin, "pin", "--config", config)
		if out, err := pin.CombinedOutput(); err != nil {
			log.Fatalf("pin: %v\n%s", err, out)
		}
		args = append(args, "--pinned", "--audit-log", config+".audit.jsonl")
	}
	return exec.Command(bd.bin, args...)
}

// builds are the baselines, in the order given, then this build.
func (b *bench) builds() []build {
	bins := strings.Split(*baseline, ",")
	names := strings.Split(*baseLabel, ",")
	var out []build
	for i, bin := range bins {
		abs, err := filepath.Abs(bin)
		if err != nil {
			log.Fatal(err)
		}
		label := filepath.Base(bin)
		if i < len(names) {
			label = names[i]
		}
		out = append(out, build{label, abs, false})
	}
	out = append(out, build{"this build", *aggBin, false})
	if *withTrust {
		out = append(out, build{"this build with --pinned --audit-log", *aggBin, true})
	}
	return out
}

func labels(builds []build) []string {
	var out []string
	for _, bd := range builds {
		out = append(out, bd.label)
	}
	return out
}

// pairing is a client era and a child.
type pairing struct {
	name   string
	modern bool     // the client speaks 2026-07-28 where its peer does
	gosdk  bool     // the child is the go-sdk fixture (both eras) instead of the JSON-RPC one
	args   []string // the child's arguments
}

var pairings = []pairing{
	{name: "legacy client, legacy server"},
	{name: "modern client, legacy server", modern: true},
	{name: "legacy client, modern server", gosdk: true, args: []string{"-era", "dual"}},
	{name: "modern client, modern server", modern: true, gosdk: true, args: []string{"-era", "dual"}},
}

// child is the command of the pairing's child.
func (p pairing) child() *exec.Cmd {
	if p.gosdk {
		return exec.Command(absBin(*gosdkBin), p.args...)
	}
	return exec.Command(*fixtureBin, p.args...)
}

func absBin(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		log.Fatal(err)
	}
	return abs
}

// sideBySide opens a session of the pairing directly, through the relay and through each
// build, and measures each with m in turn, -runs times; it returns the medians, and the CPU
// time the process between client and child (the relay, each build) spent per call.
func (b *bench) sideBySide(builds []build, p pairing, m measure) (direct, relay float64, figures []float64, relayCPU float64, cpu []float64) {
	d := connectAs(p.child(), p.modern)
	r := connectAs(relayed(p.child()), p.modern)
	aggs := make([]*session, len(builds))
	for i, bd := range builds {
		cmd := p.child()
		aggs[i] = connectAs(bd.command(b.configOf(1, cmd.Path, cmd.Args[1:])), p.modern)
	}
	var ds, rs, rcs []float64
	fs := make([][]float64, len(builds))
	fcs := make([][]float64, len(builds))
	for range *runs {
		x, _ := m(d, "echo")
		ds = append(ds, x)
		x, c := cpuPerCall(r, "echo", m)
		rs, rcs = append(rs, x), append(rcs, c)
		for i := range builds {
			x, c := cpuPerCall(aggs[i], "s00__echo", m)
			fs[i], fcs[i] = append(fs[i], x), append(fcs[i], c)
		}
	}
	for _, s := range append([]*session{d, r}, aggs...) {
		s.Close()
	}
	for i := range builds {
		figures, cpu = append(figures, median(fs[i])), append(cpu, median(fcs[i]))
	}
	return median(ds), median(rs), figures, median(rcs), cpu
}

// measure runs one measurement on a session: its figure, and how many calls it made.
type measure func(s *session, name string) (figure float64, calls int)

// cpuPerCall runs m on s and returns its figure and the CPU time (user and system, every
// thread, from /proc/<pid>/task/*/schedstat) the session's process spent per call: the cost of
// the hop itself, which the machine's other load does not change as it changes wall time.
func cpuPerCall(s *session, name string, m measure) (figure, perCall float64) {
	before := cpuTime(s.cmd.Process.Pid)
	figure, n := m(s, name)
	return figure, float64(cpuTime(s.cmd.Process.Pid)-before) / float64(n)
}

// cpuTime is the time the threads of process pid have run on a CPU, in nanoseconds.
func cpuTime(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total int64
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		var ns int64
		if _, err := fmt.Sscan(string(data), &ns); err == nil {
			total += ns
		}
	}
	return total
}

// connectAs connects to cmd as a client of the legacy era, or of the modern one where the peer
// speaks it.
func connectAs(cmd *exec.Cmd, modern bool) *session {
	modernClient = modern
	defer func() { modernClient = false }()
	s, _ := connect(cmd)
	return s
}

// echoP50 is the p50 of sequential echo calls, in nanoseconds.
func echoP50(s *session, name string) (float64, int) {
	p50, _ := echoLatency(s, name)
	return float64(p50), *calls + echoWarmUp
}

// throughput8 is the calls per second of 8 concurrent callers for -throughput-time.
func throughput8(s *session, name string) (float64, int) {
	var n atomic.Int64
	deadline := time.Now().Add(*tputTime)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				call(s, name, map[string]any{"text": "hello"})
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return float64(n.Load()) / tputTime.Seconds(), int(n.Load())
}

// peakRSS is the peak resident memory (VmHWM) of the process between the client and the child
// (the relay, each build) after one 8 MiB result, each in a new process, median of -runs.
func (b *bench) peakRSS(builds []build) (relay float64, figures []float64) {
	one := func(cmd *exec.Cmd) float64 {
		s, _ := connect(cmd)
		call(s, "big", map[string]any{"bytes": 8 << 20})
		peak := rss(s.cmd.Process.Pid, "VmHWM")
		s.Close()
		return float64(peak)
	}
	var rs []float64
	fs := make([][]float64, len(builds))
	for range *runs {
		rs = append(rs, one(relayed(exec.Command(*fixtureBin))))
		for i, bd := range builds {
			s, _ := connect(bd.command(b.config(1, nil)))
			call(s, "s00__big", map[string]any{"bytes": 8 << 20})
			fs[i] = append(fs[i], float64(rss(s.cmd.Process.Pid, "VmHWM")))
			s.Close()
		}
	}
	for i := range builds {
		figures = append(figures, median(fs[i]))
	}
	return median(rs), figures
}

// startAndList measures each build's start-up with 20 children of 300 ms (to the first
// tools/list answer) and the p50 of tools/list of 2,000 tools from 10 children.
func (b *bench) startAndList(builds []build) (start, list []float64) {
	st := make([][]float64, len(builds))
	ls := make([][]float64, len(builds))
	for range *runs {
		for i, bd := range builds {
			cmd := bd.command(b.config(20, []string{"-start-delay", "300ms"})) // and its pin, untimed
			began := time.Now()
			a, _ := connect(cmd)
			if _, err := a.ListTools(context.Background(), nil); err != nil {
				log.Fatal(err)
			}
			st[i] = append(st[i], float64(time.Since(began)))
			a.Close()

			a, _ = connect(bd.command(b.config(10, []string{"-only-fillers", "-tools", "200"})))
			lat := make([]time.Duration, 15)
			for j := range lat {
				began := time.Now()
				res, err := a.ListTools(context.Background(), nil)
				if err != nil || len(res.Tools) != 2000 {
					log.Fatalf("tools/list: %v", err)
				}
				lat[j] = time.Since(began)
			}
			a.Close()
			slices.Sort(lat)
			ls[i] = append(ls[i], float64(lat[len(lat)/2]))
		}
	}
	for i := range builds {
		start, list = append(start, median(st[i])), append(list, median(ls[i]))
	}
	return start, list
}

// pct is the change from base to x in percent.
func pct(x, base float64) string {
	if base == 0 {
		return ""
	}
	change := 100 * (x - base) / base
	return fmt.Sprintf("%+.1f%%", change)
}

func mapTo(xs []float64, f func(float64) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func perSecond(x float64) string { return fmt.Sprintf("%.0f", x) }

func usF(x float64) string  { return us(time.Duration(x)) }
func msF(x float64) string  { return ms(time.Duration(x)) }
func mibF(x float64) string { return mib(int64(x)) }
