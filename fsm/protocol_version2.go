//go:build workron_protocol2 && !workron_protocol1

package fsm

// ProtocolVersion is the highest protocol this binary understands. The
// workron_protocol2 build tag makes a binary of protocol 2, the release
// before protocol 3: it knows none of protocol 3's ops and op codes, so
// tests can run it beside the current binary as a cluster being upgraded.
const ProtocolVersion = 2
