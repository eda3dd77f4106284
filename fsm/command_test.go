package fsm_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// everyOp is one command of each kind, with arguments.
func everyOp() []fsm.Cmd {
	return []fsm.Cmd{
		submit(fsm.NewJob{Command: "x", DependsOn: []string{"$1"}, Env: map[string]string{"b": "2", "a": "1"}}, fsm.NewJob{Type: "t", Payload: []byte(`{"k":[1,2]}`)}),
		claimCmd(fsm.Claim{WorkerID: "w", Queues: []string{"a", "b"}, Types: []string{"t"}, Shell: true, Max: 3, LeaseTTL: 5}),
		heartbeat("job-1", 7, ttl),
		workerHeartbeat("w", ttl),
		report(fsm.Report{JobID: "job-1", Lease: 7, ExitCode: intp(1), Output: "o", Error: "e", Final: true, Draw: 0.25}),
		{Op: fsm.OpExpire, Expire: &fsm.Expire{JobID: "job-1", Lease: 7, Draw: 0.5}},
		register(store.Worker{ID: "w", Tags: []string{"gpu"}}),
		cancel("job-1", true),
		retry("job-1"),
		retryDeps("job-1"),
		{Op: fsm.OpSetNode, Node: &store.Node{ID: "n1", HTTP: "h", Raft: "r"}},
		{Op: fsm.OpRemoveNode, Node: &store.Node{ID: "n1"}},
		pause("q", true),
		{Op: fsm.OpDelete, Delete: &fsm.Delete{IDs: []string{"job-1", "job-2"}}},
	}
}

func TestEncoding(t *testing.T) {
	t.Run("EveryOpRoundTrips", func(t *testing.T) {
		e := &fsm.Entry{Now: ns(t0), Cmds: everyOp()}
		data, err := fsm.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		if data[0] != fsm.EncodingVersion {
			t.Fatalf("first byte %d, want the encoding version %d", data[0], fsm.EncodingVersion)
		}
		got, err := fsm.Decode(data)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("round trip = %+v\nwant %+v", got, e)
		}
	})

	t.Run("EncodingIsStable", func(t *testing.T) {
		// Maps must encode in one order, or two leaders would log
		// different bytes for the same command.
		e := &fsm.Entry{Now: 1, Cmds: everyOp()}
		a, _ := fsm.Encode(e)
		for i := 0; i < 20; i++ {
			b, _ := fsm.Encode(e)
			if string(a) != string(b) {
				t.Fatal("the same entry encoded two ways")
			}
		}
	})

	t.Run("NewerVersionIsAVersionError", func(t *testing.T) {
		data, _ := fsm.Encode(&fsm.Entry{Now: 1})
		data[0] = 99
		_, err := fsm.Decode(data)
		var ve *fsm.VersionError
		if !errors.As(err, &ve) || ve.Got != 99 {
			t.Fatalf("err = %v, want *VersionError{Got: 99}", err)
		}
	})

	cases := []struct {
		name string
		data string
	}{
		{"Empty", ""},
		{"VersionOnly", "\x01"},
		{"NotJSON", "\x01hello"},
		{"TruncatedJSON", "\x01" + `{"now":1,"cmds":[{"op":"submit"`},
		{"WrongTypes", "\x01" + `{"now":"soon","cmds":{}}`},
		{"UnknownOp", "\x01" + `{"now":1,"cmds":[{"op":"format_disk"}]}`},
		{"EmptyOp", "\x01" + `{"now":1,"cmds":[{}]}`},
		{"OpWithoutItsArguments", "\x01" + `{"now":1,"cmds":[{"op":"claim","submit":{"jobs":[]}}]}`},
		{"RemoveNodeWithoutNode", "\x01" + `{"now":1,"cmds":[{"op":"remove_node"}]}`},
		{"DeleteWithoutIDs", "\x01" + `{"now":1,"cmds":[{"op":"delete"}]}`},
		{"OneBadCommandAmongGoodOnes", "\x01" + `{"now":1,"cmds":[{"op":"retry","retry":{"job":"a"}},{"op":"cancel"}]}`},
	}
	for _, c := range cases {
		t.Run("Refuses"+c.name, func(t *testing.T) {
			e, err := fsm.Decode([]byte(c.data))
			if err == nil {
				t.Fatalf("decoded %q as %+v", c.data, e)
			}
			var ve *fsm.VersionError
			if errors.As(err, &ve) {
				t.Fatalf("err = %v, a VersionError for bytes of the current version", err)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, c := range everyOp() {
		data, err := fsm.Encode(&fsm.Entry{Now: 5, Cmds: []fsm.Cmd{c}})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{99, '{', '}'})
	f.Add([]byte("\x01null"))
	f.Add([]byte("\x01{\"cmds\":[null]}"))
	f.Add([]byte("\x01{\"now\":-1,\"cmds\":[{\"op\":\"submit\",\"submit\":null}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := fsm.Decode(data)
		if err != nil {
			return
		}
		// Whatever decodes must encode and decode to the same entry.
		again, err := fsm.Encode(e)
		if err != nil {
			t.Fatalf("decoded entry does not encode: %v", err)
		}
		e2, err := fsm.Decode(again)
		if err != nil {
			t.Fatalf("re-encoded entry does not decode: %v", err)
		}
		// Encoding may canonicalise (raw payloads are compacted), but
		// only once.
		if third, _ := fsm.Encode(e2); string(third) != string(again) {
			t.Fatalf("encode/decode not stable:\n%s\n%s", again, third)
		}
	})
}
