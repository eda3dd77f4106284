//go:build race

package clustertest_test

// raceEnabled: the race detector slows this process several times over, so
// the tests of the worst entries scale their load down by raceScale.
const (
	raceEnabled = true
	raceScale   = 10
)
