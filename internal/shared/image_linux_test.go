package shared

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestReleaseImage: what start-up touched of the program's file is no longer resident in the
// process (a forwarder's memory, BENCHMARKS.md "Shared servers"), and the process runs on.
func TestReleaseImage(t *testing.T) {
	before := imageRSS(t)
	releaseImage()
	after := imageRSS(t)
	t.Logf("the program's read-only pages resident: %d KiB before, %d KiB after", before, after)
	// Reading smaps touches some of them again (a fault maps up to 64 KiB): without the release
	// nothing goes, and after is at least before.
	if before == 0 || after > before*3/4 {
		t.Fatalf("resident pages of the program's file: %d KiB before, %d KiB after: want under three quarters", before, after)
	}
}

// imageRSS is how much of the program's file's read-only mappings is resident, in KiB.
func imageRSS(t *testing.T) int {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	total, in := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			in = len(fields) >= 6 && fields[5] == exe && (fields[1] == "r-xp" || fields[1] == "r--p")
		case in && fields[0] == "Rss:":
			kb, _ := strconv.Atoi(fields[1])
			total += kb
		}
	}
	return total
}
