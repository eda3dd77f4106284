//go:build workron_bench_noindex

package store

// searchIndexOff: this build, for benchmarks only, keeps no search index
// (index.go); lists and counts scan (plan), and the file is left for a
// normal build to index again (SetApplied does not mark it current).
const searchIndexOff = true
