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
		c.resync(logTime.UnixNano())
		own = own.Add(2 * time.Second)
		if got, want := c.Now(), logTime.Add(2*time.Second); !got.Equal(want) {
			t.Errorf("Now = %v, want %v: the log's time plus the time elapsed since", got, want)
		}
	})

	t.Run("AClockAheadOfTheLogIsKept", func(t *testing.T) {
		c.resync(time.Unix(10, 0).UnixNano())
		own = own.Add(time.Second)
		if got := c.Now(); !got.Equal(own) {
			t.Errorf("Now = %v, want the own clock %v", got, own)
		}
	})
}
