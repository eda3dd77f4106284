package fsm_test

// protocol4PauseEntries are entries of the op codes and names of
// ProtocolPauses: a protocol 3 binary refuses them
// (protocol3_pause_test.go).
var protocol4PauseEntries = [][]byte{
	// op code 17: a capped report of job-1, snoozed for 1ns
	[]byte("\x02\x02\x01\x11\x05job-1\x00\x00\x00\x00\x00\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00" + "\x00\x00\x02\x00\x00"),
	[]byte("\x02\x02\x01\x00" + withLen(`{"op":"set_queue_limits_p","qlimits":{"name":"q","limits":{"pause_q":true}}}`)),
	[]byte("\x02\x02\x01\x00" + withLen(`{"op":"lift_pauses","lift":{"q":"q","all":true}}`)),
}
