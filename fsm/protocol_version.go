//go:build !workron_protocol1

package fsm

// ProtocolVersion is the highest protocol this binary understands (see
// opProtocol): 2 adds retry_deps and forget_worker.
const ProtocolVersion = 2
