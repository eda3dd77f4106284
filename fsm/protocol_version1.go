//go:build workron_protocol1

package fsm

// ProtocolVersion is the highest protocol this binary understands. The
// workron_protocol1 build tag makes a binary of protocol 1, which knows none
// of the later ops (Decode refuses them as unknown, Encode does not write
// them), as the releases before protocol versions did: the upgrade tests run
// it beside the current binary.
const ProtocolVersion = 1
