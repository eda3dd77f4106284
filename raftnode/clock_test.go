package raftnode_test

import (
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/internal/testkit/syncbuf"
	"github.com/workron/workron/raftnode"
)

// TestLogTimeAheadIsContinuedAndShown: a node whose clock was an hour ahead
// writes entries; restarted with a right clock, it leads on from the log's
// time, says so in a warning, and shows how far ahead the cluster time is.
func TestLogTimeAheadIsContinuedAndShown(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "n1")
	cfg := loneConfig(dir)
	cfg.Now = func() time.Time { return time.Now().Add(time.Hour) }
	n, err := raftnode.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, leads(n))
	register(t, n, "w1")
	if ahead := n.Stats().ClockAhead; ahead > time.Millisecond {
		t.Errorf("cluster time ahead by %s of the clock that set it", ahead)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}

	logs := &syncbuf.Buffer{}
	cfg = loneConfig(dir)
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	n, err = raftnode.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Shutdown()
	waitFor(t, 10*time.Second, func() error {
		if !strings.Contains(logs.String(), "the log's time is ahead of this node's clock") {
			return errors.New("no warning yet")
		}
		return nil
	})
	if ahead := n.Stats().ClockAhead; ahead < 59*time.Minute || ahead > 61*time.Minute {
		t.Errorf("cluster time ahead by %s, want about an hour", ahead)
	}
	if d := time.Until(n.Now()); d < 59*time.Minute {
		t.Errorf("Now is %s ahead of the wall clock, want the log's hour", d)
	}
}
