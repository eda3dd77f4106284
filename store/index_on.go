//go:build !workron_bench_noindex

package store

// searchIndexOff is true only in a build tagged workron_bench_noindex, the
// A/B baseline of what the search index costs (docs/performance-search.md).
const searchIndexOff = false
