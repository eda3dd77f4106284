package api

import (
	"testing"
	"time"

	"github.com/workron/workron/store"
)

// TestToWireOptionalTimes: each optional time of a job shows as optTime
// shows it, whichever of them are set (optTimes puts them in one
// allocation), and the lease's expiry only while the job is leased.
func TestToWireOptionalTimes(t *testing.T) {
	base := time.Date(2026, 11, 23, 20, 0, 0, 123456789, time.UTC).UnixNano()
	for mask := range 1 << 5 {
		for _, status := range []store.Status{store.StatusRunning, store.StatusDone} {
			ns := [5]int64{}
			for i := range ns {
				if mask&(1<<i) != 0 {
					ns[i] = base + int64(i+1)*int64(time.Second)
				}
			}
			j := &store.Job{ID: "j", Status: status, Lease: 3, StartedAt: ns[0], DoneAt: ns[1], ExpireAt: ns[2], ScheduledFor: ns[3], LeaseDeadline: ns[4]}
			w := toWire(j, base)
			wantLease := ns[4]
			if !status.Leased() {
				wantLease = 0
			}
			for i, c := range []struct {
				got  *time.Time
				want int64
			}{{w.StartedAt, ns[0]}, {w.DoneAt, ns[1]}, {w.ExpiresAt, ns[2]}, {w.ScheduledFor, ns[3]}, {w.LeaseExpiresAt, wantLease}} {
				want := optTime(c.want)
				if (c.got == nil) != (want == nil) || c.got != nil && (!c.got.Equal(*want) || c.got.Location() != time.UTC) {
					t.Fatalf("mask %05b %s: time %d is %v, want %v", mask, status, i, c.got, want)
				}
			}
		}
	}
}
