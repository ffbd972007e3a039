package shared

import (
	"errors"
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
func lockFile(*os.File) error        { return errUnsupported }
func private(string) error           { return errUnsupported }

func sessionPipes() (in, out *os.File, theirs []*os.File, err error) {
	return nil, nil, nil, errUnsupported
}
func sendHello(net.Conn, []byte, []*os.File) error      { return errUnsupported }
func readHello(net.Conn) ([]byte, []byte, []int, error) { return nil, nil, nil, errUnsupported }
func receivePipes([]int) (in, out *os.File, err error)  { return nil, nil, errUnsupported }
func closeFDs([]int)                                    {}
