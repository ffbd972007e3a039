package watch

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// debounce is the delay of the tests' watchers (the program's is 200 ms; the burst test uses that).
const debounce = 100 * time.Millisecond

// quiet is how long a test waits to see that no (further) call comes: well beyond a debounce.
// A call comes from the debounce's timer after file events, which nothing else is ordered
// with: only time marks its absence.
const quiet = 3 * debounce

// recorder counts the calls of onChange and what the watched file held at each.
type recorder struct {
	t    *testing.T
	file string // read at each call, when not empty

	mu       sync.Mutex
	contents []string
	running  bool
}

func (r *recorder) onChange() {
	r.mu.Lock()
	if r.running {
		r.mu.Unlock()
		r.t.Error("onChange called while it runs")
		return
	}
	r.running = true
	r.mu.Unlock()
	var content string
	if r.file != "" {
		b, _ := os.ReadFile(r.file)
		content = string(b)
	}
	r.mu.Lock()
	r.contents = append(r.contents, content)
	r.running = false
	r.mu.Unlock()
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.contents)
}

func (r *recorder) content(i int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.contents[i]
}

// waitCalls waits until there have been n calls, and fails the test if that takes too long.
func (r *recorder) waitCalls(n int) {
	r.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.calls() < n {
		if time.Now().After(deadline) {
			r.t.Fatalf("%d calls of onChange after 5s, want %d", r.calls(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stays checks that the count of calls stays n for the quiet time.
func (r *recorder) stays(n int) {
	r.t.Helper()
	deadline := time.Now().Add(quiet)
	for time.Now().Before(deadline) {
		if got := r.calls(); got != n {
			r.t.Fatalf("%d calls of onChange, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// start watches files with a recorder that reads the first of them at each call.
func start(t *testing.T, files ...string) (*Watcher, *recorder) {
	t.Helper()
	return startWith(t, debounce, files...)
}

func startWith(t *testing.T, debounce time.Duration, files ...string) (*Watcher, *recorder) {
	t.Helper()
	r := &recorder{t: t}
	if len(files) > 0 {
		r.file = files[0]
	}
	w, err := New(files, debounce, r.onChange, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, r
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestAtomicRename(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "config.json")
	write(t, file, "v1")
	_, r := start(t, file)

	tmp := filepath.Join(dir, ".config.json.swp")
	write(t, tmp, "v2")
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	r.waitCalls(1)
	if got := r.content(0); got != "v2" {
		t.Errorf("onChange read %q, want v2", got)
	}
	r.stays(1)

	// The watch survived the replacement of the file: a second save is seen too.
	write(t, tmp, "v3")
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	r.waitCalls(2)
	if got := r.content(1); got != "v3" {
		t.Errorf("onChange read %q, want v3", got)
	}
}

func TestTruncateThenWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "config.json")
	write(t, file, `{"mcpServers": {}}`)
	_, r := start(t, file)

	f, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // an editor between its truncation and its write
	if _, err := f.WriteString(`{"mcpServers": {"a": {"command": "x"}}}`); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	r.waitCalls(1)
	if got := r.content(0); got != `{"mcpServers": {"a": {"command": "x"}}}` {
		t.Errorf("onChange read %q, want the final content", got)
	}
	r.stays(1)
}

func TestBurstIsOneCall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "config.json")
	write(t, file, "start")
	_, r := startWith(t, 200*time.Millisecond, file)

	// Ten saves within a second, each well within the debounce of the one before.
	for i := range 10 {
		if i > 0 {
			time.Sleep(40 * time.Millisecond)
		}
		write(t, file, "save "+strconv.Itoa(i))
	}
	r.waitCalls(1)
	// The one call came after the last save: it read the final content.
	if got := r.content(0); got != "save 9" {
		t.Errorf("onChange read %q, want the last save", got)
	}
	r.stays(1)
}

func TestDeleteAndRecreate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "config.json")
	write(t, file, "v1")
	_, r := start(t, file)

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	r.waitCalls(1)
	if got := r.content(0); got != "" {
		t.Errorf("onChange read %q after the removal, want nothing", got)
	}
	write(t, file, "v2")
	r.waitCalls(2)
	if got := r.content(1); got != "v2" {
		t.Errorf("onChange read %q, want v2", got)
	}
	r.stays(2)
}

func TestSymlinkRepointed(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	t.Parallel()
	targets, links := t.TempDir(), t.TempDir()
	real1 := filepath.Join(targets, "real1.json")
	real2 := filepath.Join(targets, "real2.json")
	write(t, real1, "one")
	write(t, real2, "two")
	file := filepath.Join(links, "config.json")
	if err := os.Symlink(real1, file); err != nil {
		t.Fatal(err)
	}
	_, r := start(t, file)

	// A change of the target is a change of the file.
	write(t, real1, "one, changed")
	r.waitCalls(1)
	if got := r.content(0); got != "one, changed" {
		t.Errorf("onChange read %q", got)
	}

	// The link is re-pointed as dotfile managers do: a new link renamed over the old.
	tmp := filepath.Join(links, "config.json.new")
	if err := os.Symlink(real2, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	r.waitCalls(2)
	if got := r.content(1); got != "two" {
		t.Errorf("onChange read %q, want the new target's content", got)
	}
	r.stays(2)

	// The old target no longer counts; the new one does.
	write(t, real1, "one, changed again")
	r.stays(2)
	write(t, real2, "two, changed")
	r.waitCalls(3)
	if got := r.content(2); got != "two, changed" {
		t.Errorf("onChange read %q", got)
	}
}

// A Kubernetes ConfigMap: config.json -> ..data/config.json, ..data -> ..v1, and an update
// renames a new ..data over the old one, pointing to ..v2.
func TestSymlinkedDirectorySwapped(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	t.Parallel()
	dir := t.TempDir()
	for _, v := range []string{"..v1", "..v2"} {
		if err := os.Mkdir(filepath.Join(dir, v), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, v, "config.json"), v)
	}
	if err := os.Symlink("..v1", filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "config.json")
	if err := os.Symlink(filepath.Join("..data", "config.json"), file); err != nil {
		t.Fatal(err)
	}
	_, r := start(t, file)

	if err := os.Symlink("..v2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	r.waitCalls(1)
	if got := r.content(0); got != "..v2" {
		t.Errorf("onChange read %q, want ..v2", got)
	}
	r.stays(1)
	// The old version is gone (as the kubelet removes it) and the new one is watched.
	if err := os.RemoveAll(filepath.Join(dir, "..v1")); err != nil {
		t.Fatal(err)
	}
	r.stays(1)
	write(t, filepath.Join(dir, "..v2", "config.json"), "..v2 changed")
	r.waitCalls(2)
}

func TestSetMovesTheWatch(t *testing.T) {
	t.Parallel()
	dir1, dir2 := t.TempDir(), t.TempDir()
	old := filepath.Join(dir1, "config.json")
	oldEnv := filepath.Join(dir1, "old.env")
	newEnv := filepath.Join(dir2, "new.env")
	write(t, old, "{}")
	write(t, oldEnv, "A=1")
	write(t, newEnv, "B=1")
	w, r := start(t, old, oldEnv)

	write(t, oldEnv, "A=2")
	r.waitCalls(1)

	// After a reload the configuration names another envFile.
	if err := w.Set([]string{old, newEnv}); err != nil {
		t.Fatal(err)
	}
	write(t, oldEnv, "A=3")
	r.stays(1)
	write(t, newEnv, "B=2")
	r.waitCalls(2)
	write(t, old, `{"mcpServers": {}}`)
	r.waitCalls(3)

	// The whole watch moves elsewhere: the old files count no more.
	if err := w.Set([]string{newEnv}); err != nil {
		t.Fatal(err)
	}
	write(t, old, "{}")
	r.stays(3)
	write(t, newEnv, "B=3")
	r.waitCalls(4)
	r.stays(4)
}

func TestOtherFilesDoNotCount(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "config.json")
	write(t, file, "{}")
	_, r := start(t, file)

	// Everything an editor or another program may do next to the file.
	other := filepath.Join(dir, "other.json")
	write(t, other, "x")
	write(t, other, "y")
	tmp := filepath.Join(dir, "config.json~")
	write(t, tmp, "backup")
	if err := os.Rename(tmp, filepath.Join(dir, "config.json.bak")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(other); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "sub", "config.json"), "nested")
	// A change of mode alone does not change the content.
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	r.stays(0)

	// The watcher works: its own file counts.
	write(t, file, `{"mcpServers": {}}`)
	r.waitCalls(1)
	r.stays(1)
}

func TestCloseStops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "config.json")
	write(t, file, "{}")
	w, r := start(t, file)

	write(t, file, "v2")
	r.waitCalls(1)
	// A burst under way when Close is called is dropped.
	write(t, file, "v3")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	write(t, file, "v4")
	r.stays(1)
	if err := w.Set([]string{file}); err != ErrClosed {
		t.Errorf("Set after Close gave %v, want ErrClosed", err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("a second Close gave %v", err)
	}
}

// Close waits for a call under way, and onChange may call Set.
func TestCloseWaitsForTheCall(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "config.json")
	write(t, file, "{}")
	entered, release := make(chan struct{}), make(chan struct{})
	var w *Watcher
	var setErr error
	var finished bool
	w, err := New(nil, debounce, func() {
		close(entered)
		<-release
		setErr = w.Set([]string{file})
		finished = true
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Set([]string{file}); err != nil {
		t.Fatal(err)
	}
	write(t, file, "v2")
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("no call of onChange after 5s")
	}
	closed := make(chan struct{})
	go func() {
		w.Close()
		close(closed)
	}()
	// That Close does not return has no signal: a while is all a test can give it.
	select {
	case <-closed:
		t.Fatal("Close returned while onChange was running")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-closed
	if !finished {
		t.Fatal("Close returned before onChange")
	}
	if setErr != ErrClosed {
		t.Errorf("Set during Close gave %v, want ErrClosed", setErr)
	}
}

func TestMissingDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "config.json")
	write(t, file, "{}")
	missing := filepath.Join(dir, "nowhere", "server.env")
	var log bytes.Buffer
	var logMu sync.Mutex
	r := &recorder{t: t, file: file}
	w, err := New([]string{file, missing}, debounce, r.onChange,
		slog.New(slog.NewTextHandler(lockedWriter{&logMu, &log}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	logMu.Lock()
	text := log.String()
	logMu.Unlock()
	if !strings.Contains(text, "level=WARN") || !strings.Contains(text, filepath.Dir(missing)) {
		t.Errorf("no warning naming the missing directory; the log:\n%s", text)
	}
	write(t, file, "v2")
	r.waitCalls(1)
	logMu.Lock()
	warnings := strings.Count(log.String(), "level=WARN")
	logMu.Unlock()
	if warnings != 1 {
		t.Errorf("%d warnings, want 1 (not one per event); the log:\n%s", warnings, log.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func TestResolve(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symbolic links need privileges on Windows")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "real.json"), "{}")
	if err := os.Symlink("real.json", filepath.Join(dir, "link1")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "link1"), filepath.Join(dir, "link2")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loop", filepath.Join(dir, "loop")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		file string
		want []string
	}{
		{"real.json", []string{"real.json"}},
		{"missing.json", []string{"missing.json"}},
		{"nowhere/missing.json", []string{"nowhere/missing.json"}},
		{"link2", []string{"link2", "link1", "real.json"}},
	}
	for _, tt := range tests {
		got := resolve(filepath.Join(dir, tt.file))
		var want []string
		for _, w := range tt.want {
			want = append(want, filepath.Join(dir, w))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("resolve(%s) = %q, want %q", tt.file, got, want)
		}
	}
	// A loop of links ends.
	if got := resolve(filepath.Join(dir, "loop")); len(got) != maxLinks+1 {
		t.Errorf("resolve(loop) gave %d names, want %d", len(got), maxLinks+1)
	}
}
