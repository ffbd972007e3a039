//go:build race

package main

// Under the race detector the program under test is built with it too, so that the
// end-to-end tests check the aggregator's own concurrency.
func init() {
	buildFlags = append(buildFlags, "-race")
	raceEnabled = true
}
