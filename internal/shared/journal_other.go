//go:build unix && !linux

package shared

import "os"

// journalFile is a file for a session's journal, made in dir (the place's private directory)
// and removed from it at once: nothing of it is left once the processes that map it end.
func journalFile(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, ".journal-*")
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
