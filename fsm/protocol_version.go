//go:build !workron_protocol1

package fsm

// ProtocolVersion is the highest protocol this binary understands (see
// opProtocol): 2 adds retry_deps, the fence fields, forget_worker and flow
// control.
const ProtocolVersion = 2
