// Package client is the Go SDK for Workron's HTTP API: submitting and
// inspecting jobs, and the worker-side calls (register, claim, heartbeat,
// report) that package worker builds on.
//
// It speaks only the JSON shapes of package wire and never imports the server
// side. It does not track the Raft leader: any node accepts every request and
// forwards writes itself. A Client fails over between the configured servers
// when one is unreachable or answers 503 (no leader), 502 or 504.
//
// # Retries
//
// A request is retried on the next server, a bounded number of rounds with a
// small backoff, only when doing so cannot apply it twice:
//
//   - every request is retried when the connection could not be made (dial
//     errors such as "connection refused") or when the server answered 503;
//   - reads (GET) and submits that carry an idempotency key are also retried
//     on any other transport error and on 502 and 504.
//
// Other POSTs whose connection broke after the request was sent, that got
// 502 or 504, or whose 2xx reply was empty or cut short (ErrIncompleteReply),
// are not retried: the outcome is unknown and the caller decides. Such a
// reply is never taken for a success.
// The next request goes to the next server all the same. Replies other than
// 2xx become *APIError; use IsNotFound, IsConflict or errors.Is with the
// sentinels below.
package client
