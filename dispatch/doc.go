// Package dispatch decides how a leader's ready jobs reach the long-polls
// waiting for them: the claim gate (Gate) lets out only as many claims at
// once as there are jobs ready, and the parked waiters (Waiters) let a
// submit hand each new job that can start at once to the longest-waiting
// long-poll of its queue, whose claim then goes in the submit's own log
// entry.
//
// It holds the policy and the in-memory bookkeeping only: it never
// proposes a command, reads the state, serves HTTP or decides a claim's
// outcome (the FSM does, when the claim applies). The API calls it around
// its proposals.
package dispatch
