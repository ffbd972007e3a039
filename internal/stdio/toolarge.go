package stdio

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// TooLargeError is what Options.BadLine gets for a line over the limit: ErrTooLarge, with the
// line's top-level "id" when it had one, wherever it stood (a TypeScript server writes it
// after the result), so that the request it answers can still be failed.
type TooLargeError struct {
	ID json.RawMessage // nil when the line had no top-level id
}

func (e *TooLargeError) Error() string        { return ErrTooLarge.Error() }
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// TooLargeID returns the request ID of a line that was too large to read (err from BadLine).
func TooLargeID(err error) (jsonrpc.ID, bool) {
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.ID == nil {
		return jsonrpc.ID{}, false
	}
	var v any
	if json.Unmarshal(tl.ID, &v) != nil {
		return jsonrpc.ID{}, false
	}
	id, err := jsonrpc.MakeID(v)
	return id, err == nil && id.IsValid()
}

// idScanner finds the top-level "id" member of a JSON object read in pieces, without keeping
// the pieces: it follows strings and nesting, reads the keys of the outermost object, and
// keeps the value of the last "id" (a string or a number, so never nested).
type idScanner struct {
	depth     int
	inString  bool
	escaped   bool
	expectKey bool   // at depth 1: the next string is a key
	inKey     bool   // reading a key at depth 1
	key       []byte // its first bytes
	isID      bool   // the last key read at depth 1 was "id"
	capture   bool   // reading the value of "id"
	value     []byte
	id        []byte
}

// maxIDBytes bounds the captured value: longer is not an ID worth answering.
const maxIDBytes = 256

func (s *idScanner) feed(b []byte) {
	for _, c := range b {
		if s.inString {
			switch {
			case s.escaped:
				s.escaped = false
			case c == '\\':
				s.escaped = true
			case c == '"':
				s.inString = false
				if s.inKey {
					s.inKey = false
					s.isID = string(s.key) == "id"
				}
			}
			if s.inKey && s.inString && len(s.key) <= 2 {
				s.key = append(s.key, c)
			}
			if s.capture {
				s.take(c)
			}
			continue
		}
		switch c {
		case '"':
			s.inString = true
			if s.depth == 1 && s.expectKey {
				s.inKey, s.key, s.expectKey = true, s.key[:0], false
			} else if s.capture {
				s.take(c)
			}
		case '{', '[':
			s.depth++
			if s.depth == 1 && c == '{' {
				s.expectKey = true
			}
			s.capture = s.capture && s.depth == 1 // an id is never nested: give up on it
		case '}', ']':
			if s.depth == 1 {
				s.finish()
			}
			s.depth--
		case ':':
			if s.depth == 1 && s.isID {
				// The last "id" counts, as with encoding/json, even one that is no ID.
				s.capture, s.value, s.isID, s.id = true, s.value[:0], false, nil
			}
		case ',':
			if s.depth == 1 {
				s.finish()
				s.expectKey = true
			}
		case ' ', '\t', '\r', '\n':
		default:
			if s.capture {
				s.take(c)
			}
		}
	}
}

func (s *idScanner) take(c byte) {
	if len(s.value) <= maxIDBytes {
		s.value = append(s.value, c)
	}
}

// finish ends the value being captured at a member's end.
func (s *idScanner) finish() {
	if s.capture {
		s.capture = false
		if v := bytes.TrimSpace(s.value); len(v) > 0 && len(v) <= maxIDBytes {
			s.id = bytes.Clone(v)
		}
	}
}
