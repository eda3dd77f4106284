package raftnode

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/workron/workron/fsm"
)

// NeedsUpgradeError is the error of a command that needs a newer protocol
// than the cluster runs (see Node.SetMemberProtocols): it was not proposed,
// nothing was done. It matches ErrNeedsUpgrade.
type NeedsUpgradeError struct {
	Op      fsm.Op
	Need    int // the command's protocol (fsm.Cmd.Protocol)
	Cluster int // the cluster's protocol when it was refused
}

func (e *NeedsUpgradeError) Error() string {
	return fmt.Sprintf("raftnode: %s needs protocol %d, and the cluster runs %d until every node runs protocol %d: not proposed",
		e.Op, e.Need, e.Cluster, e.Need)
}

// Is makes errors.Is(err, ErrNeedsUpgrade) hold.
func (e *NeedsUpgradeError) Is(target error) bool { return target == ErrNeedsUpgrade }

// memberProtocols is what each member of the cluster reported (see
// SetMemberProtocols), and since when each member not heard from yet has
// been looked for.
type memberProtocols struct {
	m       atomic.Pointer[map[string]int]
	changed signal // fired by SetMemberProtocols

	mu           sync.Mutex
	unknownSince map[string]time.Time // members without a record, by id
	// last is what each member said last, in this run or an earlier one
	// (the file protocolsFile): a member not heard from yet in this run
	// counts at it, so a node restarted while a member is down knows that
	// member's protocol at once.
	last map[string]int
}

// protocolsFile in the data directory records what each member said last
// (see memberProtocols.last); it holds no state of the cluster's.
const protocolsFile = "member-protocols.json"

// loadProtocols reads what an earlier run recorded; call before Raft
// starts. A missing or unreadable file records nothing.
func (n *Node) loadProtocols() {
	b, err := os.ReadFile(filepath.Join(n.cfg.DataDir, protocolsFile))
	if err != nil {
		return
	}
	var last map[string]int
	if err := json.Unmarshal(b, &last); err != nil {
		n.logger.Warn("ignoring the members' protocols recorded by an earlier run", "file", protocolsFile, "err", err)
		return
	}
	n.protos.last = last
}

// recordProtocols adds m to what each member said last, keeps only the
// members of the configuration, and writes the file if that changed.
// Callers hold n.protos.mu.
func (n *Node) recordProtocols(m map[string]int, members map[string]bool) {
	last := maps.Clone(n.protos.last)
	if last == nil {
		last = make(map[string]int)
	}
	maps.Copy(last, m)
	maps.DeleteFunc(last, func(id string, _ int) bool { return !members[id] })
	if maps.Equal(last, n.protos.last) {
		return
	}
	n.protos.last = last
	b, err := json.Marshal(last)
	if err == nil {
		path := filepath.Join(n.cfg.DataDir, protocolsFile)
		if err = os.WriteFile(path+".tmp", b, 0o600); err == nil {
			err = os.Rename(path+".tmp", path)
		}
	}
	if err != nil {
		n.logger.Warn("record the members' protocols", "err", err)
	}
}

// protocolView is the cluster's protocol as this node knows it now.
type protocolView struct {
	// known is the lowest protocol of the members of the configuration
	// that said which they run, this node's own binary included, and of
	// those not heard from for longer than Config.ProtocolWait (as 1).
	known int
	// settle is when the last member not heard from yet counts as 1;
	// zero once every member's protocol is known or counted.
	settle time.Time
}

// protocolView reads the cluster's protocol from the records and the current
// configuration. A member with no record starts its ProtocolWait the first
// time it is looked for.
func (n *Node) protocolView() protocolView { return n.lookProtocols(false) }

// lookProtocols is protocolView; with record it also records the members'
// reports (see recordProtocols).
func (n *Node) lookProtocols(record bool) protocolView {
	var known map[string]int
	if p := n.protos.m.Load(); p != nil {
		known = *p
	}
	v := protocolView{known: fsm.ProtocolVersion}
	now := time.Now()
	mp := &n.protos
	mp.mu.Lock()
	defer mp.mu.Unlock()
	servers := n.raft.GetConfiguration().Configuration().Servers
	var members map[string]bool // built only when something is pruned or recorded
	if record || len(mp.unknownSince) > 0 {
		members = make(map[string]bool, len(servers))
		for _, s := range servers {
			members[string(s.ID)] = true
		}
	}
	for _, s := range servers {
		id := string(s.ID)
		if id == n.cfg.ID {
			continue
		}
		p, ok := known[id]
		if !ok {
			p, ok = mp.last[id]
		}
		if ok {
			v.known = min(v.known, max(p, 1))
			delete(mp.unknownSince, id)
			continue
		}
		if mp.unknownSince == nil {
			mp.unknownSince = make(map[string]time.Time)
		}
		since, ok := mp.unknownSince[id]
		if !ok {
			since = now
			mp.unknownSince[id] = now
		}
		if until := since.Add(n.cfg.ProtocolWait); now.Before(until) {
			v.settle = later(v.settle, until)
		} else {
			v.known = 1
		}
	}
	for id := range mp.unknownSince {
		if members != nil && !members[id] {
			delete(mp.unknownSince, id) // left the configuration
		}
	}
	if record {
		n.recordProtocols(known, members)
	}
	return v
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// SetMemberProtocols records the protocol version (fsm.ProtocolVersion of
// its binary) that each member reported, by member id; it replaces what
// was recorded before. A member that reports nothing runs protocol 1 (a
// release before protocol versions): the caller records it as 1.
//
// The cluster's protocol is the lowest of the members of the current Raft
// configuration, this node's own binary included. A member without a
// record (one that just joined, or that this process has not reached yet)
// counts at what it said last, in an earlier run of this node too (a file
// in the data directory keeps it). One never heard from is not taken for
// an old one: AwaitProtocol, and every proposal of a command above
// protocol 1, wait for its record, for up to Config.ProtocolWait from the
// moment this node first looks for it; after that it counts as protocol 1
// until it is recorded. The proposer refuses,
// with *NeedsUpgradeError, every command whose fsm.Cmd.Protocol is higher
// than the cluster's, so no member known to run an older protocol is sent
// an entry it cannot apply.
func (n *Node) SetMemberProtocols(m map[string]int) {
	c := maps.Clone(m)
	n.protos.m.Store(&c)
	n.lookProtocols(true) // starts the wait of members without a record
	n.protos.changed.fire()
}

// ClusterProtocol is the cluster's protocol as known now, without waiting:
// the lowest that a member of the current configuration is recorded at
// (see SetMemberProtocols), at most this binary's fsm.ProtocolVersion;
// members not heard from yet are left out until their ProtocolWait ends.
// It is what the proposer lets commands use. A caller with a choice of
// commands uses AwaitProtocol instead, so as not to choose an older form
// only because a member has not answered yet.
func (n *Node) ClusterProtocol() int { return n.protocolView().known }

// AwaitProtocol is the cluster's protocol once every member's is known: a
// caller proposes the newest form of a command whose protocol is at most
// this. While a member of the configuration has not said which protocol
// it runs it waits, for at most Config.ProtocolWait from the moment this
// node first looked for that member, or until ctx ends; a member still
// unknown then counts as protocol 1.
func (n *Node) AwaitProtocol(ctx context.Context) int {
	for {
		v := n.protocolView()
		if v.settle.IsZero() {
			return v.known
		}
		changed := n.protos.changed.wait()
		// A configuration change (a member removed) fires nothing here:
		// look again now and then.
		t := time.NewTimer(min(time.Until(v.settle), 20*time.Millisecond))
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return min(v.known, 1)
		}
		t.Stop()
	}
}

// awaitProtocolFor waits, before p is queued, while a member's protocol
// is not known and p needs more than protocol 1 (see AwaitProtocol); the
// proposer then refuses p if it needs more than the cluster runs.
func (n *Node) awaitProtocolFor(ctx context.Context, p *proposal) {
	if p.protocol() > 1 {
		n.AwaitProtocol(ctx)
	}
}

// refuseNewer answers the proposals of batch that need a newer protocol
// than the cluster runs with *NeedsUpgradeError (a group as a whole, if
// one of its commands does), and returns the others.
func (n *Node) refuseNewer(batch []*proposal) []*proposal {
	if !slices.ContainsFunc(batch, func(p *proposal) bool { return p.protocol() > 1 }) {
		return batch // what every member runs: no need to look
	}
	have := n.ClusterProtocol()
	kept := batch[:0]
	for _, p := range batch {
		for _, c := range p.cmds {
			if need := c.Protocol(); need > have {
				p.done <- outcome{err: &NeedsUpgradeError{Op: c.Op, Need: need, Cluster: have}}
				p = nil
				break
			}
		}
		if p != nil {
			kept = append(kept, p)
		}
	}
	return kept
}

// protocol is the highest protocol a command of p needs.
func (p *proposal) protocol() int {
	v := 1
	for _, c := range p.cmds {
		v = max(v, c.Protocol())
	}
	return v
}
