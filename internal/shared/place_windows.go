package shared

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// Supported reports whether sessions can share a process here: not on Windows, where the
// aggregator serves unshared.
const Supported = false

var errUnsupported = errors.New("--share is not supported on Windows")

type place struct{ dir, socket, lock, log string }

func locate(string) (place, error)   { return place{}, errUnsupported }
func build(string, string) string    { return "" }
func sameUser(net.Conn) error        { return errUnsupported }
func detached() *syscall.SysProcAttr { return nil }
func leaveTerminal()                 {}
func lockFile(*os.File) error        { return errUnsupported }
func private(string) error           { return errUnsupported }

type receiptsEnd struct{}

func (*receiptsEnd) wait() error  { return errUnsupported }
func (*receiptsEnd) Close() error { return errUnsupported }

func sessionPipes(*os.File, *os.File, string) (*os.File, *receiptsEnd, *journal, []*os.File, error) {
	return nil, nil, nil, nil, errUnsupported
}
func clientInput(io.Reader, io.Writer, io.Writer) (*os.File, func(), error) {
	return nil, nil, errUnsupported
}

type journal struct{ input, receipts ring }

func (*journal) hold()    {}
func (*journal) release() {}

type journalReader struct{}

func newJournalReader(*os.File, *journal, func(bool)) (*journalReader, error) {
	return nil, errUnsupported
}
func (*journalReader) Read([]byte) (int, error) { return 0, errUnsupported }
func (*journalReader) roomMade()                {}
func (*journalReader) stop()                    {}
func clientOutput(io.Reader, io.Writer, io.Writer) (*os.File, func(), error) {
	return nil, nil, errUnsupported
}
func blocking(*os.File)                                 {}
func restoreMode(*os.File) func()                       { return func() {} }
func writeSome(f *os.File) func([]byte) (int, error)    { return f.Write }
func tryRead(*os.File, []byte) (int, error)             { return 0, errUnsupported }
func sendHello(net.Conn, []byte, []*os.File) error      { return errUnsupported }
func readHello(net.Conn) ([]byte, []byte, []int, error) { return nil, nil, nil, errUnsupported }
func receivePipes([]int) (before, in, out, receipts *os.File, j *journal, err error) {
	return nil, nil, nil, nil, nil, errUnsupported
}
func closeFDs([]int) {}
