package store

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/workron/workron/internal/testkit/golden"
)

// goldenRecords are jobs whose record bytes testdata/job_records.golden
// holds as Workron wrote them before the job codec became one walk
// (jobCodec): one of each record version, every field of it set.
func goldenRecords() map[string]*Job {
	v1 := fullJob()
	v1.ClaimToken, v1.Fenced, v1.ClaimSeq = "", false, 0
	keyed := fullJob()
	keyed.ConcurrencyKey = "acme"
	traced := typicalJob()
	traced.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	v4 := fullJob()
	v4.ConcurrencyKey = "acme"
	v4.TraceParent = traced.TraceParent
	v4.Progress = &Progress{Percent: 100, Message: "all rows", At: -3}
	v4.Result = []byte(`{"rows":12}`)
	v5 := fullJob()
	v5.ConcurrencyKey = "acme"
	v5.TraceParent = traced.TraceParent
	v5.Progress = &Progress{Percent: 42, Message: "half", At: 1 << 60}
	v5.Result = []byte(`[1]`)
	v5.AwaitingAck = true
	v5.Unacked = 3
	return map[string]*Job{
		"Zero": {}, "Typical": typicalJob(), "V1Full": v1, "V2Full": fullJob(), "V3Full": keyed,
		"V4Traced": traced, "V4Full": v4, "V5Full": v5,
	}
}

// TestJobRecordBytesArePinned checks that each golden job encodes to the
// bytes releases wrote, and that those bytes decode to the job: state.db
// files hold them.
func TestJobRecordBytesArePinned(t *testing.T) {
	golden := golden.ReadHex(t, "testdata/job_records.golden")
	jobs := goldenRecords()
	if len(golden) != len(jobs) {
		t.Fatalf("%d golden records for %d jobs", len(golden), len(jobs))
	}
	for name, j := range jobs {
		want, ok := golden[name]
		if !ok {
			t.Fatalf("no golden record %s", name)
		}
		if got := mustAppendJob(t, j); !bytes.Equal(got, want) {
			t.Errorf("%s encodes to\n%x\nreleases wrote\n%x", name, got, want)
		}
		got := new(Job)
		if err := decodeJob(want, got); err != nil || !reflect.DeepEqual(got, j) {
			t.Errorf("%s: released bytes decode to %+v, %v\nwant %+v", name, got, err, j)
		}
	}
}
