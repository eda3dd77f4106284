package api

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
)

// ProtocolProbeInterval is how often every node asks every member of the
// cluster (GET /health) which protocol version it runs; four times as often
// while a member runs an older protocol than this node, so that the end of
// an upgrade is seen soon, and every unknownProbeInterval while a member
// has not been heard from since this process started (requests that
// depend on its protocol wait for it).
const ProtocolProbeInterval = time.Second

// unknownProbeInterval is how soon the members are asked again while one
// of them has never answered, for the first unknownProbeFor of it (a
// member that stays silent longer is down, and asked at the usual pace).
const (
	unknownProbeInterval = 20 * time.Millisecond
	unknownProbeFor      = 10 * time.Second
)

// WatchProtocols runs until ctx ends, on every node: it asks each member of
// the Raft configuration for its protocol version and records what they
// say in the node (raftnode.Node.SetMemberProtocols), whose proposer then
// refuses commands that need more than the lowest. A member that does not
// say runs protocol 1 (a release before protocol versions); one that does
// not answer keeps what it last said. One never heard from since this
// process started (a member that just joined, or all of them in a new
// cluster's first moments) is not recorded: requests that depend on it
// wait for it, for a bound (raftnode.Node.AwaitProtocol), and it is asked
// again at once. Followers watch too, so a new leader knows the protocols
// of members that are down at its election.
func (s *Server) WatchProtocols(ctx context.Context) {
	p := &protocolWatch{s: s, seen: make(map[string]int), silent: make(map[string]time.Time)}
	for {
		wait := ProtocolProbeInterval
		v, unknown := p.runOnce(ctx)
		switch {
		case unknown:
			wait = unknownProbeInterval
		case v < fsm.ProtocolVersion:
			wait /= 4
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// protocolWatch is WatchProtocols' memory: what each member last said.
type protocolWatch struct {
	s      *Server
	seen   map[string]int       // member id → protocol version
	silent map[string]time.Time // member id → first probe it did not answer, while it never has
	last   int                  // the cluster protocol last logged, 0 before
}

// runOnce probes every member once, records what they said and returns the
// cluster protocol, and whether to look again soon: a member has never
// answered, or this node is not a member yet.
func (p *protocolWatch) runOnce(ctx context.Context) (int, bool) {
	servers, err := p.s.node.Servers()
	if err != nil {
		return p.s.node.ClusterProtocol(), false
	}
	nodes, err := p.s.state.Nodes()
	if err != nil {
		return p.s.node.ClusterProtocol(), false
	}
	httpOf := make(map[string]string, len(nodes))
	for _, n := range nodes {
		httpOf[n.ID] = n.HTTP
	}
	members := make([]wire.Node, len(servers))
	for i, sv := range servers {
		members[i] = wire.Node{ID: sv.ID, HTTP: httpOf[sv.ID]}
	}
	p.s.probeHealth(ctx, members)
	var behind []string
	// A node that is not a member yet (it is joining) is asked to look
	// again soon too: its first members are to be asked as soon as it joins.
	unknown := !slices.ContainsFunc(members, func(m wire.Node) bool { return m.ID == p.s.node.ID() })
	for _, m := range members {
		if m.Health != nil && m.Health.Reachable {
			p.seen[m.ID] = max(m.Health.Protocol, 1)
		}
		got, ok := p.seen[m.ID]
		switch {
		case !ok:
			since, was := p.silent[m.ID]
			if !was {
				since = time.Now()
				p.silent[m.ID] = since
			}
			unknown = unknown || time.Since(since) < unknownProbeFor
		case got < fsm.ProtocolVersion:
			behind = append(behind, m.ID)
		}
	}
	for id := range p.seen {
		if !slices.ContainsFunc(members, func(m wire.Node) bool { return m.ID == id }) {
			delete(p.seen, id) // removed from the cluster
		}
	}
	for id := range p.silent {
		if _, ok := p.seen[id]; ok || !slices.ContainsFunc(members, func(m wire.Node) bool { return m.ID == id }) {
			delete(p.silent, id)
		}
	}
	p.s.node.SetMemberProtocols(p.seen)
	v := p.s.node.ClusterProtocol()
	if v != p.last && ctx.Err() == nil {
		p.s.logger.Info("cluster protocol", "protocol", v, "this_node", fsm.ProtocolVersion, "older_nodes", behind)
		p.last = v
	}
	return v, unknown
}

// upgradeMessage is the sentence of a 503 upgrade_in_progress.
func upgradeMessage(ue *raftnode.NeedsUpgradeError) string {
	return fmt.Sprintf("upgrade in progress: this request needs every node to run protocol %d, and the cluster runs %d "+
		"(GET /cluster shows each node's); nothing was done, retry once every node is upgraded", ue.Need, ue.Cluster)
}
