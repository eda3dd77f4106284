// Package jobfilter compiles the filter expressions of GET /jobs and GET
// /jobs/count into a match function over *store.Job, and names the terms of
// an expression's top-level conjunction that an index could serve (Terms).
//
// # Language
//
// The syntax is hashicorp/go-bexpr's (the parser is its grammar package):
// `and`, `or`, `not`, parentheses, and the match operators ==, !=,
// contains, not contains, matches, not matches (Go regular expressions),
// in, not in, is empty, is not empty. Before parsing, a comparison
// `field < value` (also <=, >, >=) is rewritten into a selector bexpr
// parses (`field/lt == value`), and a bare time after it (now-1h,
// 2026-11-23) is quoted; error positions are given in the text as typed.
//
// The fields are the job's, by their API names: id, status, queue, type,
// priority, attempts, max_attempts, worker_id (or worker), concurrency_key,
// schedule, gang_id, command, last_error, created_at, run_at, started_at,
// done_at, and metadata (`metadata["k"]` or `metadata.k`, and `"k" in
// metadata`). Times take RFC 3339 ("2026-11-23T10:00:00Z"), a date
// ("2026-11-23", midnight UTC), or now with an offset ("now-1h30m",
// "now-2d"); status is the one the API shows, so "scheduled" is a pending
// job whose run time is still ahead.
//
// A filter is bounded before it is parsed (MaxLength, MaxDepth: bexpr's
// grammar backtracks about four times as much per level of parentheses)
// and while (a parser step budget, then MaxTerms).
//
// The package evaluates the tree itself, over the job's fields, without
// reflection or allocation per job. It reads no store and no clock: Compile
// takes the time that "now" and "scheduled" mean.
package jobfilter
