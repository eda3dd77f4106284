//go:build workron_protocol3 && !workron_protocol1 && !workron_protocol2

package fsm

// ProtocolVersion is the highest protocol this binary understands. The
// workron_protocol3 build tag makes a binary of protocol 3, the release
// before protocol 4: it knows none of protocol 4's ops and op codes, so
// tests can run it beside the current binary as a cluster being upgraded
// (go test -tags workron_protocol3 -run TestProtocol3 ./fsm/).
const ProtocolVersion = 3
