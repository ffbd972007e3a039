package main

import (
	"io"
	"log"
	"os"
	"os/exec"
	"sync"

	"github.com/mcp-simple-aggregator/mcp-simple-aggregator/internal/stdio"
)

// The floor of any hop: a process between the client and the child that copies bytes both
// ways and does nothing else (no framing, no JSON). Whatever an aggregator costs over it is
// its own doing; what the relay costs over a direct connection is the price of a third
// process, which no code in the aggregator removes.
//
// The benchmark starts itself as the relay: `bench -relay CHILD ARGS...` (relayArg first).

// relayArg, as the first argument, makes the benchmark binary a relay for the command after it.
const relayArg = "-relay"

// runRelay copies stdin to the child's stdin and the child's stdout to stdout until either
// side ends, then waits for the child.
func runRelay(argv []string) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	in, out := pipesOf(cmd)
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		// Its stdin is read as the aggregator reads its own (stdio.Yielding): a floor that paid
		// the runtime's monitor for its blocking reads would flatter whatever is measured
		// against it.
		_, _ = io.CopyBuffer(in, stdio.Yielding(os.Stdin), make([]byte, 64<<10))
		in.Close()
	})
	_, _ = io.CopyBuffer(os.Stdout, out, make([]byte, 64<<10))
	_ = cmd.Wait()
	os.Exit(0)
}

// relayed is cmd run behind the relay.
func relayed(cmd *exec.Cmd) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	return exec.Command(self, append([]string{relayArg, cmd.Path}, cmd.Args[1:]...)...)
}
