//go:build !workron_protocol1 && !workron_protocol2

package fsm_test

// claimAckEntry is an entry of one claim of op code 23 (fsm.ProtocolAck):
// the code, then a claim of op code 2 by worker "w" with a lease TTL of 1.
// A binary of protocol 4 reads it as a claim with Ack (TestClaimAckEncoding);
// one of protocol 3 refuses it (TestProtocol3RefusesClaimAck).
var claimAckEntry = []byte("\x02\x00\x01\x17\x02\x01w\x00\x00\x00\x00\x02")
