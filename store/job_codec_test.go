package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/workron/workron/internal/binenc"
)

// typicalJob is a shell job as the FSM stores it after two failed attempts
// and a third that succeeded.
func typicalJob() *Job {
	exit1, exit0 := 1, 0
	return &Job{
		ID:          "job-1048576",
		Seq:         1048576,
		Command:     "python3 /opt/etl/nightly.py --date 2026-11-21 --shard 7",
		Env:         map[string]string{"ETL_ENV": "prod", "SHARD": "7"},
		Metadata:    map[string]string{"team": "data"},
		Queue:       "etl",
		Priority:    5,
		Status:      StatusDone,
		MaxAttempts: 3,
		Attempts:    3,
		Timeout:     600e9,
		Backoff:     Backoff{Base: 1e9, Max: 3600e9, Jitter: 0.3},
		CreatedAt:   1763700000000000000,
		RunAt:       1763700004000000000,
		StartedAt:   1763700004100000000,
		DoneAt:      1763700034100000000,
		WorkerID:    "worker-03",
		Lease:       2097160,
		ExitCode:    &exit0,
		Output:      "rows read: 120394\nrows written: 120394\nelapsed: 29.8s\n",
		History: []Attempt{
			{Attempt: 1, WorkerID: "worker-01", Lease: 2097152, Status: StatusFailed, ExitCode: &exit1, Error: "exit status 1: connection refused", Started: 1763700000100000000, Ended: 1763700001100000000},
			{Attempt: 2, WorkerID: "worker-02", Lease: 2097156, Status: StatusFailed, Error: "lease expired", Started: 1763700001500000000, Ended: 1763700003500000000, Expired: true},
			{Attempt: 3, WorkerID: "worker-03", Lease: 2097160, Status: StatusDone, ExitCode: &exit0, Started: 1763700004100000000, Ended: 1763700034100000000},
		},
		Retention:   7 * 24 * 3600e9,
		ExpireAt:    1764304834100000000,
		ModifyIndex: 2097161,
	}
}

// fullJob sets every field, with values at the edges of their encodings.
func fullJob() *Job {
	zero, neg := 0, -7
	env := make(map[string]string)
	for i := range 20 { // more keys than appendMap sorts on the stack
		env[fmt.Sprintf("K%02d", 19-i)] = strings.Repeat("v", i)
	}
	return &Job{
		ID: "job-\x00é", Seq: math.MaxUint64, Command: "", Type: "email.send", Payload: []byte(`{"to":"a@b.c"}`),
		Env: env, Metadata: map[string]string{"": ""}, Queue: "q", Priority: math.MinInt64, Status: "from-the-future",
		DependsOn: []string{"a", ""}, Waiting: 2, Dependents: []string{"x"}, MaxAttempts: math.MaxInt64, Attempts: -1,
		IdempotencyKey: "idem", Timeout: math.MinInt64, Backoff: Backoff{Base: -1, Max: math.MaxInt64, Jitter: 10},
		CreatedAt: 1, RunAt: -1, StartedAt: 2, DoneAt: 3, WorkerID: "w", Lease: 1 << 63, LeaseDeadline: 4,
		ExitCode: &zero, Output: strings.Repeat("o", 300), LastError: "boom",
		History: []Attempt{
			{Attempt: 1, Status: StatusCancelled, ExitCode: &neg, Started: -5},
			{Status: "odd", Expired: true},
		},
		Retention: 5, UniqueFor: 6, ExpireAt: 7, Schedule: "nightly", ScheduledFor: 8, After: "job-1",
		Resources: Resources{VRAMMB: 1, MemoryMB: -2, CPUMillis: 3, Slots: 4}, Tags: []string{"gpu", "a100"},
		GangID: "gang-1", GangIndex: 3, GangSize: 4, PreemptEpoch: 9, ModifyIndex: 10,
		ClaimToken: "fleet1", Fenced: true, ClaimSeq: 1 << 62,
	}
}

func mustAppendJob(t testing.TB, j *Job) []byte {
	t.Helper()
	b, err := appendJob(nil, j)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestJobHeadReusedAcrossRecords(t *testing.T) {
	keyed := typicalJob()
	keyed.ConcurrencyKey = "acme"
	var h JobHead
	names := interner{}
	for _, j := range []*Job{keyed, typicalJob()} {
		if err := decodeJobHead(mustAppendJob(t, j), &h, names); err != nil {
			t.Fatal(err)
		}
		if h.Key != j.ConcurrencyKey {
			t.Fatalf("head key %q, want %q (a reused head kept the last record's)", h.Key, j.ConcurrencyKey)
		}
	}
}

func TestJobRecord(t *testing.T) {
	keyed := fullJob()
	keyed.ConcurrencyKey = "acme"
	keyedV1 := typicalJob()
	keyedV1.ConcurrencyKey = "tenant-7"
	traced := typicalJob()
	traced.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	withResult := fullJob()
	withResult.ConcurrencyKey = "acme"
	withResult.Progress = &Progress{Percent: 100, Message: "all rows", At: -3}
	withResult.Result = []byte(`{"rows":12}`)
	progressOnly := typicalJob()
	progressOnly.Progress = &Progress{}
	awaiting := typicalJob()
	awaiting.AwaitingAck = true
	unacked := fullJob()
	unacked.ConcurrencyKey = "acme"
	unacked.TraceParent = traced.TraceParent
	unacked.Unacked = math.MaxInt64
	jobs := map[string]*Job{
		"Zero": {}, "Typical": typicalJob(), "Full": fullJob(), "Keyed": keyed, "KeyedWithoutClaim": keyedV1,
		"Traced": traced, "WithResult": withResult, "ZeroProgress": progressOnly,
		"AwaitingAck": awaiting, "Unacked": unacked,
	}
	for name, j := range jobs {
		t.Run(name+"RoundTrips", func(t *testing.T) {
			b := mustAppendJob(t, j)
			// V2 only for a job with the fields V2 adds: others keep
			// the bytes that nodes before V2 read.
			// V3 only for a job with a concurrency key.
			want := byte(jobRecordV1)
			if j.ClaimToken != "" || j.Fenced || j.ClaimSeq != 0 {
				want = jobRecordV2
			}
			if j.ConcurrencyKey != "" {
				want = jobRecordV3
			}
			// V4 only for a job with a trace, progress or a result.
			if j.TraceParent != "" || j.Progress != nil || j.Result != nil {
				want = jobRecordV4
			}
			// V5 only for a job a claim of protocol 4 marked.
			if j.AwaitingAck || j.Unacked != 0 {
				want = jobRecordV5
			}
			if b[0] != want {
				t.Fatalf("first byte %#x, want %#x", b[0], want)
			}
			got := new(Job)
			if err := decodeJob(b, got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, j) {
				t.Fatalf("decoded\n%+v\nwant\n%+v", got, j)
			}
			var h JobHead
			if err := decodeJobHead(b, &h, nil); err != nil || !reflect.DeepEqual(h, j.Head()) {
				t.Fatalf("head %+v, %v; want %+v", h, err, j.Head())
			}
		})
		t.Run(name+"ReadsItsJSONRecord", func(t *testing.T) {
			v, err := encodeJSON(j)
			if err != nil {
				t.Fatal(err)
			}
			fromJSON := new(Job)
			if err := decodeJob(v, fromJSON); err != nil {
				t.Fatal(err)
			}
			// JSON keeps what binary keeps, so both give the same bytes.
			if got, want := mustAppendJob(t, fromJSON), mustAppendJob(t, j); !bytes.Equal(got, want) {
				t.Fatalf("JSON record reads back as\n%+v\nwant\n%+v", fromJSON, j)
			}
			var h JobHead
			if err := decodeJobHead(v, &h, nil); err != nil || !reflect.DeepEqual(h, fromJSON.Head()) {
				t.Fatalf("head of JSON %+v, %v; want %+v", h, err, fromJSON.Head())
			}
		})
	}
	t.Run("SameJobSameBytes", func(t *testing.T) {
		a, b := mustAppendJob(t, fullJob()), mustAppendJob(t, fullJob())
		if !bytes.Equal(a, b) {
			t.Fatal("two encodings of one job differ")
		}
	})
	t.Run("NilAndZeroExitCodeDiffer", func(t *testing.T) {
		zero := 0
		for _, want := range []*int{nil, &zero} {
			got := new(Job)
			if err := decodeJob(mustAppendJob(t, &Job{ExitCode: want}), got); err != nil {
				t.Fatal(err)
			}
			if (got.ExitCode == nil) != (want == nil) || (want != nil && *got.ExitCode != 0) {
				t.Fatalf("exit code %v read back as %v", want, got.ExitCode)
			}
		}
	})
	t.Run("EmptyListsAndMapsReadBackNilAsFromJSON", func(t *testing.T) {
		got := new(Job)
		j := &Job{Payload: []byte{}, Env: map[string]string{}, Tags: []string{}, History: []Attempt{}}
		if err := decodeJob(mustAppendJob(t, j), got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, &Job{}) {
			t.Fatalf("read back %+v, want the zero job", got)
		}
	})
	t.Run("NegativeZeroJitterIsZero", func(t *testing.T) {
		a := mustAppendJob(t, &Job{Backoff: Backoff{Jitter: math.Copysign(0, -1)}})
		if b := mustAppendJob(t, &Job{}); !bytes.Equal(a, b) {
			t.Fatal("-0 and 0 jitter encode differently")
		}
	})
	t.Run("NonFiniteJitterIsRefused", func(t *testing.T) {
		for _, f := range []float64{math.NaN(), math.Inf(1)} {
			if _, err := appendJob(nil, &Job{Backoff: Backoff{Jitter: f}}); err == nil {
				t.Errorf("encoded jitter %v", f)
			}
		}
	})
}

func TestJobRecordRefusesBadBytes(t *testing.T) {
	good := mustAppendJob(t, fullJob())
	for n := range len(good) {
		if err := decodeJob(good[:n], new(Job)); err == nil {
			t.Fatalf("decoded the record cut to %d of %d bytes", n, len(good))
		}
	}
	hc := jobCodec{Codec: binenc.Writing([]byte{jobRecordV1}), version: jobRecordV1}
	hc.jobHead(&JobHead{})
	zeroHead := hc.Written()
	zero := mustAppendJob(t, &Job{})
	// In the zero job, the body's one-byte fields before ExitCode, then
	// Jitter and three times.
	exitFlag := len(zeroHead) + 13 + 8 + 3*8
	cases := []struct {
		name, want string
		b          []byte
	}{
		{"NewerFormat", "unknown record format", append([]byte{jobRecordV5 + 1}, good[1:]...)},
		{"V1WithV2Fields", "trailing bytes", append([]byte{jobRecordV1}, good[1:]...)},
		{"TrailingBytes", "trailing bytes", append(append([]byte(nil), good...), 0)},
		{"NotJSON", "invalid character", []byte("{not json")},
		{"HugeCount", "count past the end", binary.AppendUvarint(zeroHead[:len(zeroHead)-1], 1<<40)},
		{"LongString", "length past the end", []byte{jobRecordV1, 5, 'a'}},
		{"BadVarint", "bad uvarint", []byte{jobRecordV1, 0x80, 0x80}},
		{"BadBool", "bad bool", append(zero[:exitFlag:exitFlag], 2)},
		{"UnknownStatus", "unknown status code", []byte{jobRecordV1, 0, 0, 99}},
		{"NaNJitter", "not a number", func() []byte {
			b := mustAppendJob(t, &Job{Backoff: Backoff{Jitter: 0.5}})
			i := bytes.Index(b, []byte{0, 0, 0, 0, 0, 0, 0xe0, 0x3f}) // 0.5
			copy(b[i:], []byte{1, 0, 0, 0, 0, 0, 0xf8, 0x7f})
			return b
		}()},
	}
	for _, c := range cases {
		err := decodeJob(c.b, new(Job))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: decode of %x: err %v, want %q", c.name, c.b, err, c.want)
		}
	}
}

// FuzzDecodeJob feeds arbitrary bytes to the job record decoder: it must
// refuse them or decode a job that encodes and decodes to the same job, with
// bytes that are then stable.
//
// Run it with: go test -run='^$' -fuzz='^FuzzDecodeJob$' -fuzztime=30s ./store
func FuzzDecodeJob(f *testing.F) {
	for _, j := range []*Job{{}, typicalJob(), fullJob()} {
		f.Add(mustAppendJob(f, j))
		v, err := encodeJSON(j)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(v)
	}
	f.Add([]byte{})
	f.Add([]byte{jobRecordV1})
	f.Add([]byte(`{"id":"a","exit":null,"payload":null,"env":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		j := new(Job)
		if err := decodeJob(b, j); err != nil {
			return
		}
		var h JobHead
		if err := decodeJobHead(b, &h, interner{}); err != nil || !reflect.DeepEqual(h, j.Head()) {
			t.Fatalf("head %+v, %v; the whole job's is %+v", h, err, j.Head())
		}
		enc, err := appendJob(nil, j)
		if err != nil {
			if b[0] == '{' { // JSON's own decoder took what its encoder refuses
				return
			}
			t.Fatalf("decoded %+v but cannot encode it: %v", j, err)
		}
		again := new(Job)
		if err := decodeJob(enc, again); err != nil {
			t.Fatalf("decode of the re-encoded job: %v", err)
		}
		// From JSON, an empty list or map ("env":{}, which our encoder never
		// wrote) reads back nil from binary: only the bytes must agree.
		if b[0] != '{' && !reflect.DeepEqual(again, j) {
			t.Fatalf("round trip changed the job:\n%+v\n%+v", j, again)
		}
		if enc2 := mustAppendJob(t, again); !bytes.Equal(enc, enc2) {
			t.Fatalf("re-encoding changed the bytes:\n%x\n%x", enc, enc2)
		}
	})
}

func BenchmarkJobEncode(b *testing.B) {
	j := typicalJob()
	b.Run("JSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeJSON(j); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Binary", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = appendJob(buf[:0], j); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkJobDecode(b *testing.B) {
	j := typicalJob()
	v, err := encodeJSON(j)
	if err != nil {
		b.Fatal(err)
	}
	bin := mustAppendJob(b, j)
	b.Run(fmt.Sprintf("JSON/%dB", len(v)), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := decodeJob(v, new(Job)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run(fmt.Sprintf("Binary/%dB", len(bin)), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := decodeJob(bin, new(Job)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("BinaryHead", func(b *testing.B) {
		b.ReportAllocs()
		var h JobHead
		for b.Loop() {
			if err := decodeJobHead(bin, &h, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
