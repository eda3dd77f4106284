//go:build !race

package fsm_test

const raceScale = 1
