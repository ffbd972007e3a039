package main

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// hops measures finely what a call costs each process between client and server (-only hops):
// -calls sequential calls of the echo tool (after a warm-up) from a client that writes each
// request and reads its answer, as raw lines (no SDK on the client's side, whose own timing
// would move the figures), through two byte relays in a row (the floor of a shared path), then
// through each build, unshared and with --share, the builds alternating, -runs times. For each:
// the CPU time per call of both relays, of the unshared aggregator, and apart, of a shared
// session's forwarder and of the shared process (which hosts the session). The builds are
// -baseline's (with -baseline-label) and this one. Beside the CPU, the read and write system
// calls and the context switches of each per call. It prints the medians and every run's
// figures, which make bench-compare's shorter runs cannot tell apart from the machine's spread
// when they differ by a few per cent. With -in-flight N the client writes N calls at once and
// then reads their answers, as N callers in step do; with -gap D it works D after each round
// before its next, as an SDK client does (the processes between go idle, and pay waking up).
func (b *bench) hops() {
	builds := []build{{"this build", *aggBin, false}}
	if *baseline != "" {
		builds = nil
		for _, bd := range b.builds() {
			if !bd.trust {
				builds = append(builds, bd)
			}
		}
	}
	cell := func(xs []float64) string {
		return fmt.Sprintf("%s [%s]", usF(median(xs)), strings.Join(mapTo(xs, usF), " "))
	}
	config := b.config(1, nil)
	type figures struct {
		unshared, forwarder, shared          []float64
		unsharedSys, forwarderSys, sharedSys []float64
		unsharedCS, forwarderCS, sharedCS    []float64
	}
	got := make([]figures, len(builds))
	var relays, relaysSys, relaysCS []float64
	for run := range *runs {
		c := startRaw(relayed(relayed(exec.Command(*fixtureBin))))
		pids := append([]int{c.cmd.Process.Pid}, childrenOf(c.cmd.Process.Pid)...)
		both := c.cpuPerCall("echo", pids...)
		relays = append(relays, both[0]+both[1])
		relaysSys = append(relaysSys, c.syscalls[0]+c.syscalls[1])
		relaysCS = append(relaysCS, c.switches[0]+c.switches[1])
		c.close()
		for i, bd := range builds {
			c := startRaw(exec.Command(bd.bin, "--config", config, "--separator", "__"))
			got[i].unshared = append(got[i].unshared, c.cpuPerCall("s00__echo", c.cmd.Process.Pid)[0])
			got[i].unsharedSys = append(got[i].unsharedSys, c.syscalls[0])
			got[i].unsharedCS = append(got[i].unsharedCS, c.switches[0])
			c.close()

			rt := filepath.Join(b.dir, fmt.Sprintf("hops-%d-%d", run, i)) // a shared process of its own
			if err := os.Mkdir(rt, 0o700); err != nil {
				log.Fatal(err)
			}
			os.Setenv("XDG_RUNTIME_DIR", rt)
			c = startRaw(exec.Command(bd.bin, "--config", config, "--separator", "__", "--share", "--linger", "1s"))
			daemons := sharedDaemons(rt)
			if len(daemons) != 1 {
				log.Fatalf("%s: %d shared processes, want one", bd.label, len(daemons))
			}
			apart := c.cpuPerCall("s00__echo", c.cmd.Process.Pid, daemons[0])
			got[i].forwarder = append(got[i].forwarder, apart[0])
			got[i].shared = append(got[i].shared, apart[1])
			got[i].forwarderSys = append(got[i].forwarderSys, c.syscalls[0])
			got[i].sharedSys = append(got[i].sharedSys, c.syscalls[1])
			got[i].forwarderCS = append(got[i].forwarderCS, c.switches[0])
			got[i].sharedCS = append(got[i].sharedCS, c.switches[1])
			c.close()
			waitNoDaemon(rt)
			os.Unsetenv("XDG_RUNTIME_DIR")
		}
	}
	fmt.Printf("CPU per call, %d calls, %d at a time, median of %d runs (each run's figures in brackets)\n", *calls, max(*inFlight, 1), *runs)
	fmt.Printf("two byte relays in a row (both): %s\n", cell(relays))
	fmt.Printf("%-12s | %-40s | %-40s | %s\n", "build", "unshared aggregator", "shared: forwarder", "shared: shared process")
	for i, bd := range builds {
		fmt.Printf("%-12s | %-40s | %-40s | %s\n", bd.label, cell(got[i].unshared), cell(got[i].forwarder), cell(got[i].shared))
	}
	count := func(xs []float64) string {
		return fmt.Sprintf("%.2f [%s]", median(xs), strings.Join(mapTo(xs, func(x float64) string { return fmt.Sprintf("%.2f", x) }), " "))
	}
	fmt.Printf("read and write system calls per call (/proc/PID/io), the same runs\n")
	fmt.Printf("two byte relays in a row (both): %s\n", count(relaysSys))
	for i, bd := range builds {
		fmt.Printf("%-12s | %-40s | %-40s | %s\n", bd.label, count(got[i].unsharedSys), count(got[i].forwarderSys), count(got[i].sharedSys))
	}
	fmt.Printf("context switches per call, all threads (/proc/PID/task/*/status), the same runs\n")
	fmt.Printf("two byte relays in a row (both): %s\n", count(relaysCS))
	for i, bd := range builds {
		fmt.Printf("%-12s | %-40s | %-40s | %s\n", bd.label, count(got[i].unsharedCS), count(got[i].forwarderCS), count(got[i].sharedCS))
	}
}

// rawClient speaks JSON-RPC to a process as lines, with nothing between.
type rawClient struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
	// syscalls and switches are, after cpuPerCall, the read and write system calls and the
	// context switches each process made per call.
	syscalls, switches []float64
}

// startRaw starts cmd and initializes its session (a legacy client).
func startRaw(cmd *exec.Cmd) *rawClient {
	cmd.Stderr = io.Discard
	in, out := pipesOf(cmd)
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	c := &rawClient{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}
	c.roundTrip(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	c.write(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return c
}

func (c *rawClient) write(line string) {
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		log.Fatal(err)
	}
}

// roundTrip writes a request and reads the next line, its answer (a call of echo is answered
// with nothing before it).
func (c *rawClient) roundTrip(line string) {
	c.write(line)
	if _, err := c.out.ReadSlice('\n'); err != nil {
		log.Fatalf("%s: %v", c.cmd.Path, err)
	}
}

// cpuPerCall makes -calls calls of tool (after echoWarmUp), -in-flight at a time (written in one
// write, then their answers read), and returns the CPU time each of the processes pids spent per
// call.
func (c *rawClient) cpuPerCall(tool string, pids ...int) []float64 {
	n := max(*inFlight, 1)
	call := func(i int) {
		if i%n != 0 {
			return // written with the round's first
		}
		var lines []string
		for j := range n {
			lines = append(lines, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i+j)+`,"method":"tools/call","params":{"name":"`+tool+`","arguments":{"text":"hello"}}}`)
		}
		c.write(strings.Join(lines, "\n"))
		for range n {
			if _, err := c.out.ReadSlice('\n'); err != nil {
				log.Fatalf("%s: %v", c.cmd.Path, err)
			}
		}
		// The client's own work before its next call, as an SDK's is (busy: a client that
		// sleeps would not compete for the cores as one that works does).
		for end := time.Now().Add(*gap); time.Now().Before(end); {
		}
	}
	for i := range echoWarmUp {
		call(i + 1)
	}
	before := make([]int64, len(pids))
	sysBefore := make([]int64, len(pids))
	csBefore := make([]int64, len(pids))
	for i, pid := range pids {
		before[i], sysBefore[i], csBefore[i] = cpuTime(pid), syscallCount(pid), switchCount(pid)
	}
	for i := range *calls {
		call(echoWarmUp + i + 1)
	}
	per := make([]float64, len(pids))
	c.syscalls = make([]float64, len(pids))
	c.switches = make([]float64, len(pids))
	for i, pid := range pids {
		per[i] = float64(cpuTime(pid)-before[i]) / float64(*calls)
		c.syscalls[i] = float64(syscallCount(pid)-sysBefore[i]) / float64(*calls)
		c.switches[i] = float64(switchCount(pid)-csBefore[i]) / float64(*calls)
	}
	return per
}

// syscallCount is how many read and write system calls the process pid has made, all its
// threads (syscr and syscw of /proc/PID/io: read, readv, recvmsg... and write, writev,
// sendmsg...).
func syscallCount(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0
	}
	var total int64
	for _, line := range strings.Split(string(data), "\n") {
		name, value, _ := strings.Cut(line, ": ")
		if name == "syscr" || name == "syscw" {
			n, _ := strconv.ParseInt(value, 10, 64)
			total += n
		}
	}
	return total
}

// switchCount is how many times the threads of the process pid have been switched out, willing
// (to wait: a read, a futex, a sleep of the runtime's monitor) or not, summed over the threads
// it has now (voluntary_ctxt_switches and nonvoluntary_ctxt_switches of each
// /proc/PID/task/TID/status; the runtime keeps its threads).
func switchCount(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	var total int64
	for _, status := range tasks {
		data, err := os.ReadFile(status)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			name, value, _ := strings.Cut(line, ":")
			if name == "voluntary_ctxt_switches" || name == "nonvoluntary_ctxt_switches" {
				n, _ := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
				total += n
			}
		}
	}
	return total
}

func (c *rawClient) close() {
	c.in.Close()
	if err := c.cmd.Wait(); err != nil {
		log.Printf("%s: %v", c.cmd.Path, err)
	}
}
