//go:build !unix

package audit

import (
	"os"
	"testing"
)

func setUmask(int) func() { return func() {} }

func readOnly(t *testing.T, path string) {
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
}
