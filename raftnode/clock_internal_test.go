package raftnode

import (
	"testing"
	"time"
)

func TestClusterClock(t *testing.T) {
	own := time.Unix(1000, 0)
	c := &clusterClock{now: func() time.Time { return own }}

	t.Run("BeforeLeadingItIsTheOwnClock", func(t *testing.T) {
		if got := c.Now(); !got.Equal(own) {
			t.Errorf("Now = %v, want %v", got, own)
		}
	})

	t.Run("ALaggingClockContinuesTheLogsTime", func(t *testing.T) {
		logTime := time.Unix(1000+3600, 0) // a leader an hour ahead wrote the last entry
		if lead := c.resync(logTime.UnixNano()); lead != time.Hour {
			t.Errorf("resync says the log is %s ahead, want 1h", lead)
		}
		own = own.Add(2 * time.Second)
		if got, want := c.Now(), logTime.Add(2*time.Second); !got.Equal(want) {
			t.Errorf("Now = %v, want %v: the log's time plus the time elapsed since", got, want)
		}
		if got := c.ahead(0); got != time.Hour {
			t.Errorf("ahead = %s, want 1h", got)
		}
	})

	t.Run("AFollowerSeesTheLogsTimeAhead", func(t *testing.T) {
		f := &clusterClock{now: func() time.Time { return own }}
		if got := f.ahead(own.Add(-time.Minute).UnixNano()); got != 0 {
			t.Errorf("ahead = %s with an older log time, want 0", got)
		}
		if got := f.ahead(own.Add(10 * time.Minute).UnixNano()); got != 10*time.Minute {
			t.Errorf("ahead = %s, want the log's 10m", got)
		}
	})

	t.Run("AClockAheadOfTheLogIsKept", func(t *testing.T) {
		if lead := c.resync(time.Unix(10, 0).UnixNano()); lead != 0 {
			t.Errorf("resync says an older log is %s ahead", lead)
		}
		if got := c.ahead(0); got != 0 {
			t.Errorf("ahead = %s, want 0", got)
		}
		own = own.Add(time.Second)
		if got := c.Now(); !got.Equal(own) {
			t.Errorf("Now = %v, want the own clock %v", got, own)
		}
	})
}
