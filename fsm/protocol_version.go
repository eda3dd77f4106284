//go:build !workron_protocol1 && !workron_protocol2

package fsm

// ProtocolVersion is the highest protocol this binary understands (see
// opProtocol): 2 adds retry_deps, the fence fields, forget_worker and flow
// control; 3 adds what the release after it proposes (job records of
// store's jobRecordV4 among them: traces, progress and results).
const ProtocolVersion = 3
