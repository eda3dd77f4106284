package fsm_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// everyOp is one command of each kind, with arguments
// (TestEveryOpIsCovered checks that none is missing).
func everyOp() []fsm.Cmd {
	tick := t0.Add(time.Minute).UnixNano()
	cmds := []fsm.Cmd{
		submit(fsm.NewJob{Command: "x", DependsOn: []string{"$1"}, Env: map[string]string{"b": "2", "a": "1"}}, fsm.NewJob{Type: "t", Payload: []byte(`{"k":[1,2]}`)}),
		claimCmd(fsm.Claim{WorkerID: "w", Queues: []string{"a", "b"}, Types: []string{"t"}, Shell: true, Max: 3, LeaseTTL: 5}),
		heartbeat("job-1", 7, ttl),
		workerHeartbeat("w", ttl),
		{Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: &fsm.WorkerHeartbeat{WorkerID: "w", LeaseTTL: 1, Listed: true, Leases: []fsm.LeaseRef{{JobID: "job-1", Lease: 3}, {JobID: "job-2"}}}},
		report(fsm.Report{JobID: "job-1", Lease: 7, ExitCode: intp(1), Output: "o", Error: "e", Final: true, Draw: 0.25}),
		report(fsm.Report{JobID: "job-1", Success: true, ExitCode: intp(0), Draw: 0.1}),
		{Op: fsm.OpExpire, Expire: &fsm.Expire{JobID: "job-1", Lease: 7, Draw: 0.5}},
		register(store.Worker{ID: "w", Tags: []string{"gpu"}}),
		cancel("job-1", true),
		retry("job-1"),
		retryDeps("job-1"),
		{Op: fsm.OpSetNode, Node: &store.Node{ID: "n1", HTTP: "h", Raft: "r"}},
		{Op: fsm.OpRemoveNode, Node: &store.Node{ID: "n1"}},
		pause("q", true),
		{Op: fsm.OpDelete, Delete: &fsm.Delete{IDs: []string{"job-1", "job-2"}}},
		{Op: fsm.OpPutSchedule, PutSchedule: &fsm.PutSchedule{Name: "s", Cron: "* * * * *", Timezone: "UTC", Job: fsm.NewJob{Command: "tick", Payload: []byte(`{}`)},
			Overlap: fsm.OverlapQueue, Catchup: fsm.CatchupOne, Paused: true, Create: true}},
		{Op: fsm.OpDeleteSchedule, DeleteSchedule: &fsm.DeleteSchedule{Name: "s"}},
		{Op: fsm.OpPauseSchedule, PauseSchedule: &fsm.PauseSchedule{Name: "s", Paused: true}},
		{Op: fsm.OpFire, Fire: &fsm.Fire{Name: "s", Tick: tick, JobID: fsm.FireJobID("s", tick, false), Manual: true, Skip: true, Missed: 2}},
		submitGang(2, fsm.NewJob{Command: "g", Resources: store.Resources{VRAMMB: 1, Slots: 1}}),
		reserveGang("gang-1", 2, "a", "b"),
		unreserveGang("gang-1", 3),
		forceDrain("gang-1", 4),
		{Op: fsm.OpWorkerOffline, WorkerOffline: &fsm.WorkerOffline{WorkerID: "w", SeenAt: 99, Draw: 0.75}},
		preempted("job-1", 5),
		checkpoint("job-1", 5, []byte{0, 1, 2, 255}),
		forget("w", 99),
		setLimits("q", store.QueueLimits{Concurrency: 3, KeyConcurrency: 1, Rate: store.Rate{Count: 10, Per: 1e9}, Burst: 2,
			KeyRate: store.Rate{Count: 1, Per: 60e9}, KeyBurst: 1}),
	}
	if fsm.ProtocolVersion >= 3 {
		cmds = append(cmds, fsm.Cmd{Op: fsm.OpPruneBuckets, PruneBuckets: &fsm.PruneBuckets{After: []byte("q\x00ka"), Limit: 100}})
	}
	if fsm.ProtocolVersion >= fsm.ProtocolPauses {
		cmds = append(cmds, fsm.Cmd{Op: fsm.OpLiftPauses, LiftPauses: &fsm.LiftPauses{Queue: "q", Key: "k"}})
	}
	return cmds
}

// codedOps are the ops with a binary layout of their own; the others are
// JSON inside a binary entry (op code 0).
var codedOps = map[fsm.Op]bool{fsm.OpSubmit: true, fsm.OpClaim: true, fsm.OpHeartbeat: true,
	fsm.OpWorkerHeartbeat: true, fsm.OpReport: true, fsm.OpExpire: true}

// jsonEntryBytes encodes e in version 1, JSON, as Workron wrote entries
// before binary ones.
func jsonEntryBytes(tb testing.TB, e *fsm.Entry) []byte {
	tb.Helper()
	v, err := json.Marshal(e)
	if err != nil {
		tb.Fatal(err)
	}
	return append([]byte{1}, v...)
}

func mustDecode(tb testing.TB, data []byte) *fsm.Entry {
	tb.Helper()
	e, err := fsm.Decode(data)
	if err != nil {
		tb.Fatalf("decode %q: %v", data, err)
	}
	return e
}

// TestEveryOpIsCovered checks that everyOp has a command of every Op
// constant declared in command.go.
func TestEveryOpIsCovered(t *testing.T) {
	file, err := parser.ParseFile(token.NewFileSet(), "command.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, c := range everyOp() {
		covered[string(c.Op)] = true
	}
	ast.Inspect(file, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || fmt.Sprint(vs.Type) != "Op" {
			return true
		}
		for _, v := range vs.Values {
			op := strings.Trim(v.(*ast.BasicLit).Value, `"`)
			if c := (fsm.Cmd{Op: fsm.Op(op)}); !covered[op] && c.Protocol() <= fsm.ProtocolVersion {
				t.Errorf("everyOp has no %q command", op)
			}
		}
		return true
	})
	if len(covered) < 20 {
		t.Fatalf("everyOp covers %d ops; did the parse find the constants?", len(covered))
	}
}

func TestEncoding(t *testing.T) {
	t.Run("EveryOpRoundTrips", func(t *testing.T) {
		e := &fsm.Entry{Now: ns(t0), Cmds: everyOp()}
		data := mustEncode(t, e)
		if data[0] != fsm.EncodingVersion || fsm.EncodingVersion != 2 {
			t.Fatalf("first byte %d, want the encoding version %d (2)", data[0], fsm.EncodingVersion)
		}
		if got := mustDecode(t, data); !reflect.DeepEqual(got, e) {
			t.Fatalf("round trip = %+v\nwant %+v", got, e)
		}
		for _, c := range e.Cmds {
			one := &fsm.Entry{Now: -1, Cmds: []fsm.Cmd{c}}
			if got := mustDecode(t, mustEncode(t, one)); !reflect.DeepEqual(got, one) {
				t.Errorf("%s: round trip = %+v\nwant %+v", c.Op, got, one)
			}
		}
	})

	t.Run("JSONEntriesStillDecode", func(t *testing.T) {
		// What Raft logs hold from before binary entries.
		e := &fsm.Entry{Now: ns(t0), Cmds: everyOp()}
		if got := mustDecode(t, jsonEntryBytes(t, e)); !reflect.DeepEqual(got, e) {
			t.Fatalf("version 1 = %+v\nwant %+v", got, e)
		}
		old := "\x01" + `{"now":5,"cmds":[` +
			`{"op":"submit","submit":{"jobs":[{"cmd":"x","payload":{"a": 1},"env":{"k":"v"},"q":"etl","prio":2,"deps":["$1"],"max_att":3,"backoff":{"base":1,"jitter":0.5},"res":{"vram":8},"tags":["gpu"]}]}},` +
			`{"op":"claim","claim":{"worker":"w","queues":["etl"],"shell":true,"max":2,"ttl":9}},` +
			`{"op":"heartbeat","hb":{"job":"job-1","ttl":9}},` +
			`{"op":"worker_heartbeat","whb":{"worker":"w","ttl":9,"listed":true,"leases":[{"job":"job-1","lease":4}]}},` +
			`{"op":"report","report":{"job":"job-1","lease":4,"ok":true,"exit":0,"out":"o","draw":0.125}},` +
			`{"op":"expire","expire":{"job":"job-2","lease":6}},` +
			`{"op":"cancel","cancel":{"job":"job-3","cascade":true}}]}`
		want := &fsm.Entry{Now: 5, Cmds: []fsm.Cmd{
			submit(fsm.NewJob{Command: "x", Payload: json.RawMessage(`{"a": 1}`), Env: map[string]string{"k": "v"}, Queue: "etl", Priority: 2,
				DependsOn: []string{"$1"}, MaxAttempts: 3, Backoff: store.Backoff{Base: 1, Jitter: 0.5}, Resources: store.Resources{VRAMMB: 8}, Tags: []string{"gpu"}}),
			claimCmd(fsm.Claim{WorkerID: "w", Queues: []string{"etl"}, Shell: true, Max: 2, LeaseTTL: 9}),
			heartbeat("job-1", 0, 9),
			{Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: &fsm.WorkerHeartbeat{WorkerID: "w", LeaseTTL: 9, Listed: true, Leases: []fsm.LeaseRef{{JobID: "job-1", Lease: 4}}}},
			report(fsm.Report{JobID: "job-1", Lease: 4, Success: true, ExitCode: intp(0), Output: "o", Draw: 0.125}),
			{Op: fsm.OpExpire, Expire: &fsm.Expire{JobID: "job-2", Lease: 6}},
			cancel("job-3", true),
		}}
		got := mustDecode(t, []byte(old))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("version 1 entry = %+v\nwant %+v", got, want)
		}
		// Re-encoded in version 2, it is the same entry.
		if again := mustDecode(t, mustEncode(t, got)); !reflect.DeepEqual(again, want) {
			t.Fatalf("in version 2 = %+v\nwant %+v", again, want)
		}
	})

	t.Run("EveryFieldRoundTrips", func(t *testing.T) {
		// Each argument with every field set, to a value its own: a field
		// added to a command but not to its binary layout fails here.
		for _, c := range everyOp() {
			c := filledCmd(t, c)
			e := &fsm.Entry{Now: math.MinInt64, Cmds: []fsm.Cmd{c}}
			if got := mustDecode(t, mustEncode(t, e)); !reflect.DeepEqual(got, e) {
				t.Errorf("%s: round trip = %s\nwant %s", c.Op, dump(got), dump(e))
			}
			if got := mustDecode(t, jsonEntryBytes(t, e)); !reflect.DeepEqual(got, e) {
				t.Errorf("%s: version 1 round trip = %s\nwant %s", c.Op, dump(got), dump(e))
			}
		}
	})

	t.Run("ReadsBackWhatJSONDid", func(t *testing.T) {
		// Edge values read back from version 2 as they did from JSON:
		// empty lists, maps and payloads as nil, -0 as 0, bytes that are
		// not UTF-8 as U+FFFD.
		e := &fsm.Entry{Now: 0, Cmds: []fsm.Cmd{
			submit(fsm.NewJob{Env: map[string]string{}, Metadata: map[string]string{"\xff": "1", "\xfe": "2", "k\xc3": "v\xff"}, Payload: json.RawMessage{},
				DependsOn: []string{}, Tags: []string{"a\xffb", ""}, Backoff: store.Backoff{Jitter: math.Copysign(0, -1)}, ID: "\xed\xa0\x80"}),
			claimCmd(fsm.Claim{WorkerID: "w", Queues: []string{}, Types: nil}),
			{Op: fsm.OpWorkerHeartbeat, WorkerHeartbeat: &fsm.WorkerHeartbeat{WorkerID: "w\x80", Leases: []fsm.LeaseRef{}}},
			report(fsm.Report{JobID: "%ff\xff", ExitCode: nil, Draw: math.Copysign(0, -1)}),
			report(fsm.Report{JobID: "j", ExitCode: intp(math.MinInt64), Draw: math.Nextafter(1, 0)}),
			{Op: fsm.OpExpire, Expire: &fsm.Expire{JobID: "j", Draw: math.SmallestNonzeroFloat64}},
		}}
		got := mustDecode(t, mustEncode(t, e))
		want := mustDecode(t, jsonEntryBytes(t, e))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("version 2 = %s\nJSON = %s", dump(got), dump(want))
		}
		if got.Cmds[4].Report.Draw != math.Nextafter(1, 0) || got.Cmds[5].Expire.Draw != math.SmallestNonzeroFloat64 {
			t.Fatal("a draw changed")
		}
	})

	t.Run("EncodingIsStable", func(t *testing.T) {
		// Maps must encode in one order, or two leaders would log
		// different bytes for the same command.
		e := &fsm.Entry{Now: 1, Cmds: everyOp()}
		e.Cmds = append(e.Cmds, submit(fsm.NewJob{Metadata: map[string]string{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5", "f": "6", "g": "7", "h": "8", "i": "9"}}))
		a := mustEncode(t, e)
		for i := 0; i < 20; i++ {
			if b := mustEncode(t, e); !bytes.Equal(a, b) {
				t.Fatal("the same entry encoded two ways")
			}
		}
	})

	t.Run("NewerVersionIsAVersionError", func(t *testing.T) {
		data := mustEncode(t, &fsm.Entry{Now: 1})
		data[0] = 99
		_, err := fsm.Decode(data)
		var ve *fsm.VersionError
		if !errors.As(err, &ve) || ve.Got != 99 {
			t.Fatalf("err = %v, want *VersionError{Got: 99}", err)
		}
	})

	t.Run("EncodeRefuses", func(t *testing.T) {
		cases := map[string]fsm.Cmd{
			"NaNDraw":            report(fsm.Report{JobID: "j", Draw: math.NaN()}),
			"InfiniteExpireDraw": {Op: fsm.OpExpire, Expire: &fsm.Expire{JobID: "j", Draw: math.Inf(1)}},
			"NaNJitter":          submit(fsm.NewJob{Backoff: store.Backoff{Jitter: math.NaN()}}),
			"PayloadNotJSON":     submit(fsm.NewJob{Payload: json.RawMessage(`{"a":`)}),
			"NoArguments":        {Op: fsm.OpClaim},
			"WrongArguments":     {Op: fsm.OpCancel, Retry: &fsm.Retry{JobID: "j"}},
			"UnknownOp":          {Op: "format_disk", Cancel: &fsm.Cancel{JobID: "j"}},
			"NaNInAJSONCommand":  {Op: fsm.OpWorkerOffline, WorkerOffline: &fsm.WorkerOffline{WorkerID: "w", Draw: math.NaN()}},
		}
		for name, c := range cases {
			if data, err := fsm.Encode(&fsm.Entry{Cmds: []fsm.Cmd{succeed("ok", 1), c}}); err == nil {
				t.Errorf("%s: encoded as %q", name, data)
			} else if !strings.Contains(err.Error(), "command 1") {
				t.Errorf("%s: error %q does not name the command", name, err)
			}
		}
	})

	good := mustEncode(t, &fsm.Entry{Now: 1, Cmds: everyOp()})
	t.Run("RefusesEveryCutOfAGoodEntry", func(t *testing.T) {
		for n := range len(good) {
			if _, err := fsm.Decode(good[:n]); err == nil {
				t.Fatalf("decoded the entry cut to %d of %d bytes", n, len(good))
			}
		}
	})

	cases := []struct {
		name string
		data string
	}{
		{"Empty", ""},
		{"VersionZero", "\x00{}"},
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
		{"BinaryVersionOnly", "\x02"},
		{"BinaryTrailingBytes", string(good) + "\x00"},
		{"BinaryBadVarint", "\x02\x80\x80"},
		{"BinaryHugeCount", "\x02\x02\xff\xff\xff\xff\x0f"},
		{"BinaryUnknownOpCode", "\x02\x02\x01\x07\x00\x00"},
		{"BinaryJSONNotJSON", "\x02\x02\x01\x00\x02{x"},
		{"BinaryJSONUnknownOp", "\x02\x02\x01\x00" + withLen(`{"op":"format_disk"}`)},
		{"BinaryJSONWithoutArguments", "\x02\x02\x01\x00" + withLen(`{"op":"cancel"}`)},
		{"BinaryJSONOfACodedOp", "\x02\x02\x01\x00" + withLen(`{"op":"submit","submit":{"jobs":[]}}`)},
		{"BinaryNotUTF8", "\x02\x02\x01\x03\x01\xff\x00\x00"},             // heartbeat of job "\xff"
		{"BinaryBadBool", "\x02\x02\x01\x02\x01w\x00\x00\x02\x00\x00"},    // claim, Shell 2
		{"BinaryHugeLeaseCount", "\x02\x02\x01\x04\x01w\x00\x00\x7f\x00"}, // worker heartbeat
		{"BinaryPayloadNotJSON", string(submitBytes(t, `{"a":1}`, `{"a":x}`))},
		{"BinaryNaNDraw", string(nanDraw(t))},
	}
	for _, c := range cases {
		t.Run("Refuses"+c.name, func(t *testing.T) {
			e, err := fsm.Decode([]byte(c.data))
			if err == nil {
				t.Fatalf("decoded %q as %+v", c.data, e)
			}
			var ve *fsm.VersionError
			if errors.As(err, &ve) {
				t.Fatalf("err = %v, a VersionError for bytes of a known version", err)
			}
			t.Log(err)
		})
	}
}

// withLen prefixes s with its length, a one-byte uvarint.
func withLen(s string) string { return string(rune(len(s))) + s }

// submitBytes is a version 2 submit of one job whose payload is good, with
// the payload's bytes then replaced by bad (of the same length).
func submitBytes(t *testing.T, good, bad string) []byte {
	t.Helper()
	data := mustEncode(t, &fsm.Entry{Cmds: []fsm.Cmd{submit(fsm.NewJob{Payload: json.RawMessage(good)})}})
	i := bytes.Index(data, []byte(good))
	copy(data[i:], bad)
	return data
}

// nanDraw is a version 2 report whose Draw's bytes are a NaN.
func nanDraw(t *testing.T) []byte {
	t.Helper()
	data := mustEncode(t, &fsm.Entry{Cmds: []fsm.Cmd{report(fsm.Report{JobID: "j", Draw: 0.5})}})
	copy(data[len(data)-8:], []byte{1, 0, 0, 0, 0, 0, 0xf8, 0x7f})
	return data
}

// filledCmd returns c with its argument replaced by one of the same type
// whose every field holds a value that is not zero, and not another
// field's (a retry keeps Dependents as its op requires).
func filledCmd(t *testing.T, c fsm.Cmd) fsm.Cmd {
	t.Helper()
	v := reflect.ValueOf(&c).Elem()
	n := 0
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			arg := reflect.New(f.Type().Elem())
			fill(t, arg.Elem(), &n)
			f.Set(arg)
		}
	}
	if c.Op == fsm.OpRetry {
		c.Retry.Dependents = false
	}
	return c
}

func fill(t *testing.T, v reflect.Value, n *int) {
	*n++
	k := *n
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i), n)
		}
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d", k))
	case reflect.Int, reflect.Int64:
		v.SetInt(-int64(k) << 40)
	case reflect.Uint64:
		v.SetUint(uint64(k) << 40)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Float64:
		v.SetFloat(1 / float64(k+2))
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), n)
		v.Set(p)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // a payload, or checkpoint data
			v.SetBytes(fmt.Appendf(nil, `{"n":%d}`, k))
			return
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		fill(t, s.Index(0), n)
		fill(t, s.Index(1), n)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range 2 {
			key, val := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(t, key, n)
			fill(t, val, n)
			m.SetMapIndex(key, val)
		}
		v.Set(m)
	default:
		t.Fatalf("fill: no value for a %s", v.Type())
	}
}

func dump(e *fsm.Entry) string {
	v, _ := json.Marshal(e)
	return string(v)
}

// FuzzDecode feeds arbitrary bytes to Decode: it must refuse them, or
// return an entry that encodes, in version 2, to bytes that decode to the
// same entry and encode to the same bytes again. From version 2 bytes,
// "the same entry" is reflect.DeepEqual, but for commands of op code 0:
// those are JSON, which reads an empty list as empty and writes it as
// nothing, so they compare as JSON. From version 1 bytes, only the version
// 2 bytes must agree (FuzzDecodeApply checks that both mean the same).
//
// Run it with: go test -run='^$' -fuzz='^FuzzDecode$' -fuzztime=30s ./fsm
func FuzzDecode(f *testing.F) {
	for _, c := range everyOp() {
		e := &fsm.Entry{Now: 5, Cmds: []fsm.Cmd{c}}
		f.Add(mustEncode(f, e))
		f.Add(jsonEntryBytes(f, e))
	}
	f.Add(mustEncode(f, &fsm.Entry{Now: -1, Cmds: everyOp()}))
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{2})
	f.Add([]byte{99, '{', '}'})
	f.Add([]byte("\x01null"))
	f.Add([]byte("\x01{\"cmds\":[null]}"))
	f.Add([]byte("\x01{\"now\":-1,\"cmds\":[{\"op\":\"submit\",\"submit\":null}]}"))
	f.Add([]byte("\x01{\"now\":1,\"cmds\":[{\"op\":\"claim\",\"claim\":{\"worker\":\"w\",\"queues\":[]}}]}"))
	f.Add([]byte("\x02\x02\x01\x00" + withLen(`{"op":"register","register":{"worker":{"id":"w","tags":[]}}}`)))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := fsm.Decode(data)
		if err != nil {
			return
		}
		enc, err := fsm.Encode(e)
		if err != nil {
			t.Fatalf("decoded entry does not encode: %v", err)
		}
		e2, err := fsm.Decode(enc)
		if err != nil {
			t.Fatalf("re-encoded entry does not decode: %v", err)
		}
		if again := mustEncode(t, e2); !bytes.Equal(again, enc) {
			t.Fatalf("encode/decode not stable:\n%q\n%q", enc, again)
		}
		if data[0] != fsm.EncodingVersion {
			return
		}
		if e.Now != e2.Now || len(e.Cmds) != len(e2.Cmds) {
			t.Fatalf("round trip changed the entry:\n%s\n%s", dump(e), dump(e2))
		}
		for i := range e.Cmds {
			a, b := &e.Cmds[i], &e2.Cmds[i]
			if codedOps[a.Op] && !reflect.DeepEqual(a, b) {
				t.Fatalf("round trip changed command %d:\n%+v\n%+v", i, a, b)
			}
			if ja, jb := mustJSON(t, a), mustJSON(t, b); ja != jb {
				t.Fatalf("round trip changed command %d:\n%s\n%s", i, ja, jb)
			}
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
