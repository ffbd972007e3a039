//go:build !linux

package shared

// releaseImage does nothing here: macOS counts a process's clean pages of its file apart from
// its own memory already.
func releaseImage() {}
