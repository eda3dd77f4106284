//go:build race

package fsm_test

// raceScale: the race detector slows this process several times over, so
// the tests of the worst entries divide their load by it.
const raceScale = 10
