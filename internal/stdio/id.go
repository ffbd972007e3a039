package stdio

import (
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// idOf is the ID whose value is v, a string or an int64: what jsonrpc.MakeID makes of the
// string or the float64 that encoding/json decodes an ID to, made with one conversion to an
// interface instead of MakeID's two. An ID is the SDK's jsonrpc2.ID, a struct of one field,
// `value any`, and MakeID, the one way the SDK offers to make one, takes the value as an `any`
// and converts it again (StringID, Int64ID): a string ID cost its bytes and two headers, an
// integer one a float64 and an int64, for every message read (two a call), which decoding
// spent most of its allocations on. The layout is checked where it is relied on: the sizes
// here, the values in TestIDOf (against MakeID, for the version of the SDK that go.mod gives).
func idOf[T string | int64](v T) jsonrpc.ID {
	var value any = v
	return *(*jsonrpc.ID)(unsafe.Pointer(&value))
}

// An ID is exactly one interface value: a build against an SDK whose ID is not fails here.
var _ = [1]struct{}{}[unsafe.Sizeof(jsonrpc.ID{})-unsafe.Sizeof(any(nil))]
