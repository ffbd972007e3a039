// Command bench measures mcp-simple-aggregator against a direct connection to the same child,
// in one run, with the Go SDK's client on both paths. The child is the fixture server
// (internal/fixture/server): an echo tool, a big tool returning N bytes, a start-up delay and
// N filler tools. Every figure is the median of several interleaved runs (direct, aggregated,
// direct, ...), so that drift of a shared machine hits both sides alike.
//
//	go run ./internal/bench -aggregator bin/mcp-simple-aggregator -fixture bin/fixture-server -out BENCHMARKS.md
//
// `make bench` builds both binaries and runs it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/era"
	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/mcpschema"
)

var (
	aggBin     = flag.String("aggregator", "bin/mcp-simple-aggregator", "the aggregator binary")
	fixtureBin = flag.String("fixture", "bin/fixture-server", "the fixture server binary")
	out        = flag.String("out", "", "also write the report (Markdown) to this file")
	runs       = flag.Int("runs", 5, "interleaved runs per measurement")
	calls      = flag.Int("calls", 2000, "sequential calls per latency run")
	inFlight   = flag.Int("in-flight", 1, "-only hops: calls written together, and their answers read, as many callers at once make them")
	gap        = flag.Duration("gap", 0, "-only hops: how long the client works after each round of calls before the next, as an SDK client does")
	tputTime   = flag.Duration("throughput-time", 3*time.Second, "length of a throughput run")
	only       = flag.String("only", "", "run only this measurement: latency, modern, probe, throughput, startup, discovery, schema, payload, idle, reload, lazy, toolsearch, shared, hops (with -baseline too)")
	searchData = flag.String("toolsearch-data", "testdata/toolsearch", "the labelled sets of the tool search's benchmark")
	baseline   = flag.String("baseline", "", "compare with these aggregator binaries (earlier builds, comma-separated), interleaved in one run with a direct connection and a byte relay, instead of the usual report")
	baseLabel  = flag.String("baseline-label", "baseline", "what the baselines are, for the report (commits, comma-separated)")
	withTrust  = flag.Bool("trust", true, "in the comparison, also run this build with --pinned and --audit-log (issue #30)")
	gosdkBin   = flag.String("gosdk-fixture", "bin/gosdk-fixture", "the go-sdk fixture server binary (a server of either era), for the comparison's modern pairings")
)

func main() {
	if len(os.Args) > 2 && os.Args[1] == relayArg {
		runRelay(os.Args[2:])
		return
	}
	flag.Parse()
	log.SetFlags(0)
	var err error
	if *aggBin, err = filepath.Abs(*aggBin); err != nil {
		log.Fatal(err)
	}
	if *fixtureBin, err = filepath.Abs(*fixtureBin); err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "mcp-bench")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	b := &bench{dir: dir}
	if *only == "hops" {
		b.hops()
		return
	}
	if *baseline != "" {
		report := b.compare()
		fmt.Print(report)
		if *out != "" {
			if err := writeSection(*out, "compare", "make bench-compare BASE="+*baseLabel, report); err != nil {
				log.Fatal(err)
			}
		}
		return
	}

	if *only == "toolsearch" {
		b.toolSearch()
		return
	}
	if *only == "shared" {
		b.sharedSection()
		return
	}

	var rows []row
	add := func(r ...row) {
		rows = append(rows, r...)
		for _, x := range r {
			fmt.Fprintf(os.Stderr, "%-44s %14s %14s %s\n", x.name, x.direct, x.aggregated, x.ratio)
		}
	}
	want := func(name string) bool { return *only == "" || *only == name }
	if want("latency") {
		add(b.latency()...)
	}
	if want("modern") {
		add(b.modernLatency())
	}
	if want("probe") {
		add(b.probeOnly())
	}
	if want("throughput") {
		add(b.throughput())
	}
	if want("startup") {
		add(b.startup())
	}
	if want("discovery") {
		add(b.discovery())
	}
	if want("schema") {
		add(b.schemaCheck())
	}
	if want("payload") {
		add(b.payload()...)
	}
	if want("idle") {
		add(b.idle())
	}
	if want("reload") {
		add(b.reload()...)
	}
	if want("lazy") {
		add(b.lazy()...)
	}

	report := render(rows)
	fmt.Print(report)
	if *out != "" {
		if err := writeResults(*out, report); err != nil {
			log.Fatal(err)
		}
	}
	if *only == "" {
		b.toolSearch()
		b.sharedSection()
	}
}

// sharedSection runs the benchmark of --share and writes its section.
func (b *bench) sharedSection() {
	report := b.shared()
	fmt.Print(report)
	if *out != "" {
		if err := writeSection(*out, "shared", "make bench-shared", report); err != nil {
			log.Fatal(err)
		}
	}
}

// toolSearch runs the tool search's benchmark and writes its section.
func (b *bench) toolSearch() {
	report := b.toolSearchReport(*searchData)
	fmt.Print(report)
	if *out != "" {
		command := "make bench"
		if *only == "toolsearch" {
			command = "make bench-toolsearch"
		}
		if err := writeSection(*out, "toolsearch", command, report); err != nil {
			log.Fatal(err)
		}
	}
}

type row struct {
	name, direct, aggregated, ratio, target string
}

type bench struct {
	dir string
	seq int
}

// session is a client connected to a process.
type session struct {
	*mcp.ClientSession
	cmd *exec.Cmd
}

// modernClient makes connect speak the modern era (2026-07-28) where the peer does; the
// sessions are legacy otherwise, like-for-like with the legacy fixture.
var modernClient bool

// connect starts cmd and connects the SDK's client to it. The SDK's CommandTransport caps
// lines at 16 MiB, too little for the 64 MiB measurement: IOTransport takes a limit.
func connect(cmd *exec.Cmd) (*session, time.Duration) {
	return connectWith(cmd, nil)
}

// connectWith is connect with the client's options (handlers of notifications). A cmd.Stderr
// already set is kept; otherwise the process's stderr is ours.
func connectWith(cmd *exec.Cmd, opts *mcp.ClientOptions) (*session, time.Duration) {
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	stdin, stdout := pipesOf(cmd)
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, opts)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	sessionOpts := &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
	if modernClient {
		sessionOpts = nil // the SDK's default: probe with server/discover, modern when it can
	}
	s, err := client.Connect(context.Background(), &mcp.IOTransport{Reader: stdout, Writer: stdin, MaxLineLength: 256 << 20}, sessionOpts)
	if err != nil {
		log.Fatalf("connecting to %s: %v", cmd.Path, err)
	}
	return &session{s, cmd}, time.Since(start)
}

// pipesOf makes cmd's stdin and stdout pipes, before it starts.
func pipesOf(cmd *exec.Cmd) (io.WriteCloser, io.ReadCloser) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		log.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		log.Fatal(err)
	}
	return stdin, stdout
}

// Close ends the session and waits for the process.
func (s *session) Close() {
	s.ClientSession.Close()
	s.cmd.Wait()
}

func (b *bench) direct(args ...string) *session {
	s, _ := connect(exec.Command(*fixtureBin, args...))
	return s
}

// aggregated starts the aggregator over n children started with args.
func (b *bench) aggregated(n int, args ...string) (*session, time.Duration) {
	return connect(exec.Command(b.bin(), "--config", b.config(n, args), "--separator", "__"))
}

// config writes a configuration of n fixture servers started with args, and returns its path.
func (b *bench) config(n int, args []string) string {
	return b.configOf(n, *fixtureBin, args)
}

// configOf writes a configuration of n children, each the command with args, and returns its
// path.
func (b *bench) configOf(n int, command string, args []string) string {
	servers := map[string]any{}
	if args == nil {
		args = []string{} // null is not an array: the schema would reject it
	}
	for i := range n {
		servers[fmt.Sprintf("s%02d", i)] = map[string]any{"command": command, "args": args}
	}
	data, _ := json.Marshal(map[string]any{"mcpServers": servers})
	b.seq++
	path := filepath.Join(b.dir, fmt.Sprintf("config-%d.json", b.seq))
	if err := os.WriteFile(path, data, 0o600); err != nil {
		log.Fatal(err)
	}
	return path
}

// bin is the aggregator binary to start.
func (b *bench) bin() string { return *aggBin }

func call(s *session, name string, args any) {
	if _, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args}); err != nil {
		log.Fatalf("%s: %v", name, err)
	}
}

// echoWarmUp is how many calls echoLatency makes before it measures.
const echoWarmUp = 200

// echoLatency makes -calls sequential echo calls (after a warm-up) and returns their p50 and p99.
func echoLatency(s *session, name string) (p50, p99 time.Duration) {
	args := map[string]any{"text": "hello"}
	for range echoWarmUp {
		call(s, name, args)
	}
	lat := make([]time.Duration, *calls)
	for i := range lat {
		start := time.Now()
		call(s, name, args)
		lat[i] = time.Since(start)
	}
	slices.Sort(lat)
	return lat[len(lat)/2], lat[len(lat)*99/100]
}

// latency: sequential echo calls, p50 and p99 of each run, median over runs.
func (b *bench) latency() []row {
	d := b.direct()
	a, _ := b.aggregated(1)
	defer d.Close()
	defer a.Close()
	var d50, d99, a50, a99 []time.Duration
	for range *runs {
		x, y := echoLatency(d, "echo")
		d50, d99 = append(d50, x), append(d99, y)
		x, y = echoLatency(a, "s00__echo")
		a50, a99 = append(a50, x), append(a99, y)
	}
	dp50, dp99, ap50, ap99 := median(d50), median(d99), median(a50), median(a99)
	return []row{
		{"echo latency p50", us(dp50), us(ap50), fmt.Sprintf("+%s added = %.2fx a direct round trip", us(ap50-dp50), float64(ap50-dp50)/float64(dp50)), "added <= 0.5x"},
		{"echo latency p99", us(dp99), us(ap99), fmt.Sprintf("+%s added", us(ap99-dp99)), ""},
	}
}

// modernLatency: sequential echo calls of a modern client (2026-07-28: the envelope of every
// request checked, the result's put in) through the aggregator to a legacy child, against a
// legacy client directly.
func (b *bench) modernLatency() row {
	d := b.direct()
	modernClient = true
	a, _ := b.aggregated(1)
	modernClient = false
	defer d.Close()
	defer a.Close()
	if v := a.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		log.Fatalf("the modern session speaks %s", v)
	}
	var d50, a50 []time.Duration
	for range *runs {
		x, _ := echoLatency(d, "echo")
		d50 = append(d50, x)
		x, _ = echoLatency(a, "s00__echo")
		a50 = append(a50, x)
	}
	dp50, ap50 := median(d50), median(a50)
	return row{"echo latency p50, modern client", us(dp50), us(ap50), fmt.Sprintf("+%s added = %.2fx a direct round trip", us(ap50-dp50), float64(ap50-dp50)/float64(dp50)), "added <= 0.5x"}
}

// probeOnly: a process that is only probed (server/discover, then the end of its input, as the
// TypeScript SDK's transport does), 20 children, from start to answer and to exit, against a
// child probed directly (which answers the probe with an error, a legacy server).
func (b *bench) probeOnly() row {
	probe := func(cmd *exec.Cmd) (answered, exited time.Duration) {
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		cmd.Stderr = io.Discard
		start := time.Now()
		if err := cmd.Start(); err != nil {
			log.Fatal(err)
		}
		io.WriteString(stdin, `{"jsonrpc":"2.0","id":"probe","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`+"\n")
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || !strings.Contains(line, `"probe"`) {
			log.Fatalf("probe of %s: %q %v", cmd.Path, line, err)
		}
		answered = time.Since(start)
		stdin.Close()
		cmd.Wait()
		return answered, time.Since(start)
	}
	var da, de, aa, ae []time.Duration
	for range 5 {
		x, y := probe(exec.Command(*fixtureBin))
		da, de = append(da, x), append(de, y)
		x, y = probe(exec.Command(b.bin(), "--config", b.config(20, nil), "--separator", "__"))
		aa, ae = append(aa, x), append(ae, y)
	}
	return row{"probe only, 20 children: answer / exit", ms(median(da)) + " / " + ms(median(de)), ms(median(aa)) + " / " + ms(median(ae)),
		fmt.Sprintf("%.1fx a direct probe's exit", float64(median(ae))/float64(median(de))), "exit <= 1 s"}
}

// throughput: 8 concurrent callers for a few seconds.
func (b *bench) throughput() row {
	d := b.direct()
	a, _ := b.aggregated(1)
	defer d.Close()
	defer a.Close()
	measure := func(s *session, name string) float64 {
		var n atomic.Int64
		deadline := time.Now().Add(*tputTime)
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					call(s, name, map[string]any{"text": "hello"})
					n.Add(1)
				}
			}()
		}
		wg.Wait()
		return float64(n.Load()) / tputTime.Seconds()
	}
	var dr, ar []float64
	for range max(3, *runs/2) {
		dr = append(dr, measure(d, "echo"))
		ar = append(ar, measure(a, "s00__echo"))
	}
	dm, am := median(dr), median(ar)
	return row{"throughput, 8 callers (calls/s)", fmt.Sprintf("%.0f", dm), fmt.Sprintf("%.0f", am), fmt.Sprintf("%.0f%% of direct", 100*am/dm), ">= 70%"}
}

// startup: 20 children that take 300 ms each, from spawn to the first tools/list answer,
// against one such child directly.
func (b *bench) startup() row {
	var dr, ar []time.Duration
	for range 3 {
		start := time.Now()
		d := b.direct("-start-delay", "300ms")
		if _, err := d.ListTools(context.Background(), nil); err != nil {
			log.Fatal(err)
		}
		dr = append(dr, time.Since(start))
		d.Close()

		start = time.Now()
		a, _ := b.aggregated(20, "-start-delay", "300ms")
		if _, err := a.ListTools(context.Background(), nil); err != nil {
			log.Fatal(err)
		}
		ar = append(ar, time.Since(start))
		a.Close()
	}
	dm, am := median(dr), median(ar)
	return row{"start-up: 20 slow children vs 1", ms(dm), ms(am), fmt.Sprintf("%.2fx one child", float64(am)/float64(dm)), "<= 1.3x"}
}

// discovery: tools/list of 2,000 tools, 10 children of 200 against one child of 2,000.
func (b *bench) discovery() row {
	d := b.direct("-only-fillers", "-tools", "2000")
	a, _ := b.aggregated(10, "-only-fillers", "-tools", "200")
	defer d.Close()
	defer a.Close()
	measure := func(s *session) time.Duration {
		lat := make([]time.Duration, 30)
		for i := range lat {
			start := time.Now()
			res, err := s.ListTools(context.Background(), nil)
			if err != nil || len(res.Tools) != 2000 {
				log.Fatalf("tools/list: %v (%d tools)", err, len(res.Tools))
			}
			lat[i] = time.Since(start)
		}
		slices.Sort(lat)
		return lat[len(lat)/2]
	}
	var dr, ar []time.Duration
	for range *runs {
		dr = append(dr, measure(d))
		ar = append(ar, measure(a))
	}
	dm, am := median(dr), median(ar)
	return row{"tools/list of 2,000 tools, p50", us(dm), us(am), fmt.Sprintf("%.2fx one child", float64(am)/float64(dm)), "<= 1.1x"}
}

// schemaCheck: what the start-up spends checking 2,000 tool definitions (the fixture's, as it
// lists them) against the MCP schema, which is done once per list read, not per tools/list
// (that is served from the catalog: see discovery).
func (b *bench) schemaCheck() row {
	d := b.direct("-only-fillers", "-tools", "2000")
	res, err := d.ListTools(context.Background(), nil)
	d.Close()
	if err != nil || len(res.Tools) != 2000 {
		log.Fatalf("tools/list: %v", err)
	}
	defs := make([]json.RawMessage, len(res.Tools))
	for i, t := range res.Tools {
		defs[i], _ = json.Marshal(t)
	}
	var took []time.Duration
	for range max(*runs, 5) {
		start := time.Now()
		for _, def := range defs {
			if v := mcpschema.Check(era.Legacy, mcpschema.Tool, def); v != nil {
				log.Fatalf("a filler tool breaks the schema: %v", v)
			}
		}
		took = append(took, time.Since(start))
	}
	return row{"start-up: checking 2,000 tool definitions against the MCP schema", "", ms(median(took)), "", "<= 50 ms"}
}

// payload: one 8 MiB result (time and the aggregator's peak RSS over its idle footprint), and
// one 64 MiB result.
func (b *bench) payload() []row {
	var rows []row
	for _, size := range []int{8 << 20, 64 << 20} {
		d := b.direct()
		a, _ := b.aggregated(1)
		idle := rss(a.cmd.Process.Pid, "VmRSS")
		n := 3
		if size > 8<<20 {
			n = 1
		}
		var dr, ar []time.Duration
		for range n {
			start := time.Now()
			call(d, "big", map[string]any{"bytes": size})
			dr = append(dr, time.Since(start))
			start = time.Now()
			call(a, "s00__big", map[string]any{"bytes": size})
			ar = append(ar, time.Since(start))
		}
		peak := rss(a.cmd.Process.Pid, "VmHWM")
		d.Close()
		a.Close()
		label := fmt.Sprintf("%d MiB result", size>>20)
		rows = append(rows,
			row{label + ", time", ms(median(dr)), ms(median(ar)), fmt.Sprintf("%.2fx direct", float64(median(ar))/float64(median(dr))), ""},
			row{label + ", aggregator peak RSS over idle", "", mib(peak - idle), fmt.Sprintf("%.2fx the payload", float64(peak-idle)/float64(size)), "<= 4x"},
		)
	}
	return rows
}

// idle: the aggregator's footprint with 10 idle children.
func (b *bench) idle() row {
	a, _ := b.aggregated(10)
	defer a.Close()
	if _, err := a.ListTools(context.Background(), nil); err != nil {
		log.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	return row{"idle RSS, 10 children", "", mib(rss(a.cmd.Process.Pid, "VmRSS")), "", ""}
}

// rss reads a memory figure (VmRSS, VmHWM) of a process, in bytes, from /proc (Linux).
func rss(pid int, field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// writeResults puts report between the markers of the results section of file, keeping the
// rest (the analysis) as it is; a file without markers gets the section appended.
func writeResults(file, report string) error {
	return writeSection(file, "results", "make bench", report)
}

// writeSection puts report, with the command that made it, between the markers of the
// section name of file.
func writeSection(file, name, command, report string) error {
	begin, end := "<!-- "+name+": written by make bench", "<!-- /"+name+" -->\n"
	args := strings.Join(os.Args[1:], " ")
	section := begin + " -->\nCommand: `" + command + "` (`go run ./internal/bench " + args + "`)\n\n" + report + end
	old, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	text := string(old)
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i >= 0 && j > i {
		text = text[:i] + section + text[j+len(end):]
	} else {
		text += section
	}
	return os.WriteFile(file, []byte(text), 0o644)
}

func median[T int64 | float64 | time.Duration](xs []T) T {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
func mib(n int64) string        { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
func render(rows []row) string {
	var b strings.Builder
	cpu := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	fmt.Fprintf(&b, "| measurement | direct | through the aggregator | ratio | target |\n| --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.name, r.direct, r.aggregated, r.ratio, r.target)
	}
	fmt.Fprintf(&b, "\nMachine: %d cores (%s), %s/%s, %s. Date: %s. Runs: %d interleaved.\n",
		runtime.NumCPU(), cpu, runtime.GOOS, runtime.GOARCH, runtime.Version(), time.Now().UTC().Format("2006-01-02"), *runs)
	return b.String()
}
