package leader

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/raftnode"
)

// fakeMembers is a configuration the promoter reads and promotes in.
type fakeMembers struct {
	servers  []raftnode.Server
	commit   uint64
	promoted []string
}

func (m *fakeMembers) Servers() ([]raftnode.Server, error) { return m.servers, nil }
func (m *fakeMembers) CommitIndex() uint64                 { return m.commit }
func (m *fakeMembers) Promote(_ context.Context, id string) error {
	for i := range m.servers {
		if m.servers[i].ID == id {
			m.servers[i].Voter = true
			m.promoted = append(m.promoted, id)
			return nil
		}
	}
	return raftnode.ErrNotMember
}

// fakeProgress reports applied indexes; a node absent is not known.
type fakeProgress map[string]uint64

func (p fakeProgress) AppliedIndexOf(_ context.Context, id string) (uint64, error) {
	if a, ok := p[id]; ok {
		return a, nil
	}
	return 0, errors.New("not known")
}

// TestPromoter checks who the promoter makes a voter: a non-voter whose
// applied index reached the commit index as of when the leader first saw
// it; not one whose progress is unknown or behind; one past Within only
// every LateInterval.
func TestPromoter(t *testing.T) {
	now := t0
	m := &fakeMembers{commit: 10, servers: []raftnode.Server{
		{ID: "n1", Voter: true}, {ID: "unknown"}, {ID: "behind"}, {ID: "late"},
	}}
	progress := fakeProgress{"n1": 0, "behind": 9, "late": 0}
	cfg := DefaultPromoterConfig()
	cfg.Members, cfg.Progress, cfg.Now = m, progress, func() time.Time { return now }
	p, err := NewPromoter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	p.runOnce(ctx)
	if len(m.promoted) != 0 {
		t.Fatalf("promoted %v before any caught up", m.promoted)
	}
	// The target stays the commit index first seen, not today's.
	m.commit, progress["behind"] = 50, 10
	p.runOnce(ctx)
	if len(m.promoted) != 1 || m.promoted[0] != "behind" {
		t.Fatalf("promoted %v, want [behind]", m.promoted)
	}
	// Past Within, a node is looked at only every LateInterval: one that
	// catches up waits for the next look, then is promoted.
	now = now.Add(cfg.Within + time.Second)
	p.runOnce(ctx) // late from here: looked at now, still behind
	progress["late"] = 100
	now = now.Add(cfg.LateInterval / 2)
	p.runOnce(ctx)
	if len(m.promoted) != 1 {
		t.Fatalf("promoted %v before LateInterval passed, want only [behind]", m.promoted)
	}
	now = now.Add(cfg.LateInterval)
	p.runOnce(ctx)
	if len(m.promoted) != 2 || m.promoted[1] != "late" {
		t.Fatalf("promoted %v once LateInterval passed, want late too", m.promoted)
	}
	// A new term (a new promoter) starts over, and leaves voters alone.
	p2, _ := NewPromoter(cfg)
	p2.runOnce(ctx)
	if len(m.promoted) != 2 {
		t.Fatalf("promoted %v in the next term, want still [behind late]", m.promoted)
	}
	if m.servers[1].Voter {
		t.Fatal("a node whose progress is unknown was promoted")
	}
}

// TestPromoterConfigValidate names the field out of bounds.
func TestPromoterConfigValidate(t *testing.T) {
	cfg := DefaultPromoterConfig()
	if err := cfg.Validate(); err == nil {
		t.Fatal("no error without Members and Progress")
	}
	cfg.Members, cfg.Progress = &fakeMembers{}, fakeProgress{}
	cfg.Within = time.Millisecond
	if _, err := NewPromoter(cfg); err == nil {
		t.Fatal("Within below Interval accepted")
	}
	cfg.Within, cfg.LateInterval = time.Minute, time.Millisecond
	if _, err := NewPromoter(cfg); err == nil || !strings.Contains(err.Error(), "LateInterval") {
		t.Fatalf("LateInterval below Interval: err %v, want one naming LateInterval", err)
	}
}
