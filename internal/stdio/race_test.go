//go:build race

package stdio

// The race detector allocates beside the code it watches: allocation counts do not hold.
func init() { raceEnabled = true }
