// Package client is the Go SDK for Workron's HTTP API, and the one client of
// it: every route has a method here (jobs, gangs, the worker calls that
// package worker builds on, workers, queues, schedules, the cluster, health,
// digest, backup and restore), and Do sends any other request and hands back
// its raw reply. The CLI, the worker runtime and the chaos harness use it;
// nothing else builds API requests by hand.
//
// It speaks only the JSON shapes of package wire and never imports the server
// side. It does not track the Raft leader: any node accepts every request and
// forwards writes itself. A Client fails over between the configured servers
// when one is unreachable or answers 503 (no leader), 502 or 504. Health and
// Digest, which describe one node, skip only the servers that refuse the
// connection and give the first answer, whatever it is.
//
// # Retries
//
// A request is retried on the next server, a bounded number of rounds with a
// small backoff, only when doing so cannot apply it twice:
//
//   - every request is retried when the connection could not be made (dial
//     errors such as "connection refused") or when the server answered 503;
//   - reads (GET), submits that carry an idempotency key, batch reports,
//     checkpoints, queue and schedule pauses, schedule updates and restores
//     are also retried on any other transport error and on 502 and 504.
//
// Other writes whose connection broke after the request was sent, that got
// 502 or 504, or whose 2xx reply was empty or cut short (ErrIncompleteReply),
// are not retried: the outcome is unknown and the caller decides. Such a
// reply is never taken for a success.
// The next request goes to the next server all the same.
//
// # Errors
//
// Every reply outside 2xx becomes an *Error carrying the status, the code and
// the server's message; its text is "client: <status> <code>: <message>".
// Match it with errors.Is against the sentinels (ErrNotFound, ErrConflict,
// ErrStaleLease, ErrUnavailable, ...) or with IsNotFound, IsConflict and
// IsUnavailable; StatusOf and CodeOf read its fields through any wrapping.
package client
