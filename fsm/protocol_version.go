//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package fsm

// ProtocolVersion is the highest protocol this binary understands (see
// opProtocol): 2 adds retry_deps, the fence fields, forget_worker and flow
// control; 3 adds what the release after it proposes (job records of
// store's jobRecordV4 among them: traces, progress and results); 4 adds the
// bounds against hostile load (issue #28), each op or op code of it named
// in opProtocol or Cmd.Protocol.
const ProtocolVersion = 4
