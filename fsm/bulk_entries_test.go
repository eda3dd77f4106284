package fsm_test

// protocol4BulkEntries are entries of the op names of ProtocolBulk: a
// protocol 3 binary refuses them (protocol3_bulk_test.go).
var protocol4BulkEntries = [][]byte{
	[]byte("\x02\x02\x01\x00" + withLen(`{"op":"bulk_start","bulk_start":{"action":"retry","sel":"status=failed","status":"failed"}}`)),
	[]byte("\x02\x02\x01\x00" + withLen(`{"op":"bulk_step","bulk_step":{"id":1,"from":9,"next":0,"ids":["job-3"]}}`)),
	[]byte("\x02\x02\x01\x00" + withLen(`{"op":"bulk_stop","bulk_stop":{"id":1}}`)),
}
