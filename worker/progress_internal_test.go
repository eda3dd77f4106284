package worker

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/workron/workron/api/wire"
)

// Updates made between two heartbeats cost one: the next heartbeat carries
// the latest alone, and once it was answered the next carries nothing
// until another update. A heartbeat that failed carries it again.
func TestProgressIsCoalesced(t *testing.T) {
	w := &Worker{running: map[string]*task{}, reports: newReportQueue()}
	run := &task{job: wire.Job{ID: "run", Lease: 7}}
	w.running["run"] = run
	w.running["quiet"] = &task{job: wire.Job{ID: "quiet", Lease: 2}}
	j := &Job{progress: &run.progress}
	for i := range 50 {
		j.Progress(i*2, "step")
	}
	j.Progress(99, "almost")

	leases := w.runningLeases()
	delivered := w.attachProgress(leases)
	var carried []wire.ProgressUpdate
	for _, l := range leases {
		if l.Progress != nil {
			carried = append(carried, *l.Progress)
		}
	}
	if len(carried) != 1 || carried[0] != (wire.ProgressUpdate{Percent: 99, Message: "almost"}) || delivered == nil {
		t.Fatalf("heartbeat carried %v, want only the latest update", carried)
	}
	// Not delivered (the heartbeat failed): the next carries it again.
	if again := w.attachProgress(w.runningLeases()); again == nil {
		t.Fatal("an update whose heartbeat failed was not sent again")
	}
	delivered()
	if w.attachProgress(w.runningLeases()) != nil {
		t.Fatal("a delivered update was sent again")
	}
	j.Progress(100, "")
	leases = w.runningLeases()
	if w.attachProgress(leases) == nil {
		t.Fatal("a new update after delivery was not sent")
	}
	// A lease of another attempt of the job gets none.
	stale := []wire.JobLease{{JobID: "run", Lease: 6}}
	if w.attachProgress(stale) != nil || stale[0].Progress != nil {
		t.Fatal("progress attached to another attempt's lease")
	}
}

func TestProgressBounds(t *testing.T) {
	var p progressSlot
	(&Job{progress: &p}).Progress(250, strings.Repeat("é", wire.MaxProgressMessage))
	u, _ := p.pending()
	if u.Percent != 100 || len(u.Message) != wire.MaxProgressMessage {
		t.Fatalf("update %d, %d bytes; want 100 and %d bytes", u.Percent, len(u.Message), wire.MaxProgressMessage)
	}
	(&Job{}).Progress(5, "no worker") // does nothing, does not panic
	if err := (&Job{}).SetResult(strings.Repeat("x", wire.MaxResultBytes)); err == nil {
		t.Fatal("SetResult took a result over the limit")
	}
}

// The progress lines of a shell job's output are found however the output
// is cut into writes; other lines, and long ones, are not.
func TestProgressLines(t *testing.T) {
	out := "hello\n::workron-progress 12 one\r\n::workron-progress x nope\n" +
		"::workron-progress 70% copying   files \n" + "  ::workron-progress 90 indented\n" +
		"::workron-progress 80 " + strings.Repeat("z", 2*wire.MaxProgressMessage) + "\npartial ::workron-progress 5\n"
	for _, size := range []int{1, 3, 7, len(out)} {
		var p progressSlot
		var got []wire.ProgressUpdate
		var tail bytes.Buffer
		pw := &progressWriter{next: &tail, slot: &p}
		for s := out; s != ""; {
			n := min(size, len(s))
			if _, err := pw.Write([]byte(s[:n])); err != nil {
				t.Fatal(err)
			}
			if u, seq := p.pending(); u != nil {
				got = append(got, *u)
				p.delivered(seq)
			}
			s = s[n:]
		}
		want := []wire.ProgressUpdate{{Percent: 12, Message: "one"}, {Percent: 70, Message: "copying   files"}}
		if size == len(out) {
			want = want[1:] // one write: the latest update of it
		}
		if !slices.Equal(got, want) {
			t.Errorf("writes of %d bytes: updates %v, want %v", size, got, want)
		}
		if tail.String() != out {
			t.Errorf("writes of %d bytes: the output changed", size)
		}
	}
}
