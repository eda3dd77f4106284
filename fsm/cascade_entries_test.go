package fsm_test

// cascadeEntries are entries of the op names and codes of cascades in
// chunks (fsm.ProtocolCascade): a protocol-4 binary reads them
// (TestCascadeEntriesDecode), a protocol-3 one refuses them
// (TestProtocol3BinaryRefusesChunkedCascades).
var cascadeEntries = [][]byte{
	[]byte("\x02\x02\x01\x00" + withLen(`{"op":"cancel_chunked","cancel":{"job":"job-1","cascade":true}}`)),
	[]byte("\x02\x02\x01\x00" + withLen(`{"op":"retry_deps_chunked","retry":{"job":"job-1","deps":true}}`)),
	[]byte("\x02\x02\x01\x00" + withLen(`{"op":"worker_offline_chunked","offline":{"worker":"w","seen":1}}`)),
	[]byte("\x02\x02\x01\x00" + withLen(`{"op":"force_drain_chunked","gang":{"gang":"g","epoch":1}}`)),
	[]byte("\x02\x02\x01\x00" + withLen(`{"op":"continue_cascade","cont_cascade":{"id":1}}`)),
	[]byte("\x02\x02\x01\x15\x05job-1\x00\x00\x00\x00\x04boom\x00" + "\x00\x00\x00\x00\x00\x00\x00\x00" + "\x00\x00\x00\x00\x00"), // op code 21
	[]byte("\x02\x02\x01\x16\x05job-1\x03" + "\x00\x00\x00\x00\x00\x00\x00\x00"),                                                  // op code 22
}
