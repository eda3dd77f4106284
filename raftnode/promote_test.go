package raftnode_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/workron/workron/raftnode"
)

// TestAddNonvoterThenPromote: AddNonvoter adds a member that does not vote,
// AddNonvoter of a voter leaves it a voter, Promote makes a non-voter a
// voter and leaves a voter alone, and a node that is not a member is
// ErrNotMember.
func TestAddNonvoterThenPromote(t *testing.T) {
	n1 := openNode(t, "n1", nil, func(c *raftnode.Config) { c.Bootstrap = true })
	waitFor(t, 10*time.Second, leads(n1))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n2 := openNode(t, "n2", nil, nil)
	voter := func(id string) (bool, error) {
		servers, err := n1.Servers()
		if err != nil {
			return false, err
		}
		for _, s := range servers {
			if s.ID == id {
				return s.Voter, nil
			}
		}
		return false, fmt.Errorf("%s is not a member", id)
	}
	want := func(id string, wantVoter bool) {
		t.Helper()
		if v, err := voter(id); err != nil || v != wantVoter {
			t.Fatalf("%s voter=%v (%v), want %v", id, v, err, wantVoter)
		}
	}

	if err := n1.AddNonvoter(ctx, "n2", n2.RaftAddr()); err != nil {
		t.Fatal(err)
	}
	want("n2", false)
	if err := n1.Promote(ctx, "n2"); err != nil {
		t.Fatal(err)
	}
	want("n2", true)
	if err := n1.AddNonvoter(ctx, "n2", n2.RaftAddr()); err != nil {
		t.Fatal(err)
	}
	want("n2", true)
	if err := n1.Promote(ctx, "n1"); err != nil {
		t.Fatal(err)
	}
	want("n1", true)
	if err := n1.Promote(ctx, "n9"); !errors.Is(err, raftnode.ErrNotMember) {
		t.Fatalf("Promote of a non-member: %v, want ErrNotMember", err)
	}
}
