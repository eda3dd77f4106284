package fsm

import "testing"

// SetMaxDeleteStepKeys lowers the journal steps one delete removes for
// the test (not parallel ones), restored when it ends.
func SetMaxDeleteStepKeys(t *testing.T, n int) {
	old := maxDeleteStepKeys
	maxDeleteStepKeys = n
	t.Cleanup(func() { maxDeleteStepKeys = old })
}
