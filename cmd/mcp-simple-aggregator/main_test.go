package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

var update = flag.Bool("update", false, "rewrite the expected output in testdata/script")

// binDir holds the binaries built by TestMain: the program itself (the scripts and tests run
// the real program, as a user would) and the fixture server.
var (
	buildFlags  []string // extra flags for building the binaries under test
	raceEnabled bool
	binDir      string
	aggBinary   string
	fixtureBin  string
	gosdkBin    string // the go-sdk fixture: a server of both eras
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "mcp-simple-aggregator-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := func() int {
		defer os.RemoveAll(dir)
		aggBinary = filepath.Join(dir, exeName("mcp-simple-aggregator"))
		fixtureBin = filepath.Join(dir, exeName("fixture-server"))
		gosdkBin = filepath.Join(dir, exeName("gosdk-fixture"))
		for pkg, exe := range map[string]string{".": aggBinary, "../../internal/fixture/server": fixtureBin, "../../internal/fixture/gosdk": gosdkBin} {
			build := exec.Command("go", append(append([]string{"build"}, buildFlags...), "-o", exe, pkg)...)
			build.Stdout, build.Stderr = os.Stderr, os.Stderr
			if err := build.Run(); err != nil {
				fmt.Fprintln(os.Stderr, "building", pkg, err)
				return 1
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

func exeName(name string) string {
	if runtime.GOOS == "windows" {
		return name + ".exe"
	}
	return name
}

// TestScripts runs testdata/script/*.txtar: each runs the binary and checks its exit status,
// stdout and stderr.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: *update,
		Setup: func(env *testscript.Env) error {
			env.Setenv("PATH", binDir+string(os.PathListSeparator)+env.Getenv("PATH"))
			env.Setenv("FIXTURE", fixtureBin)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// exits N PROGRAM [ARGS...] runs PROGRAM and checks that it exits with status N;
			// its output is then checked with stdout and stderr like exec's.
			"exits": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) < 2 {
					ts.Fatalf("usage: exits N PROGRAM [ARGS...]")
				}
				want, err := strconv.Atoi(args[0])
				if err != nil {
					ts.Fatalf("exits: bad status %q", args[0])
				}
				got := 0
				if err := ts.Exec(args[1], args[2:]...); err != nil {
					var ee *exec.ExitError
					if !errors.As(err, &ee) {
						ts.Fatalf("exits: %v", err)
					}
					got = ee.ExitCode()
				}
				if got != want {
					ts.Fatalf("%s exited with status %d, want %d", args[1], got, want)
				}
			},
		},
	})
}
