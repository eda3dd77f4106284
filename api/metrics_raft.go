package api

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
)

// raftCollector turns the node's raftnode.Stats into series at scrape time.
type raftCollector struct{ s *Server }

// raftRoles are the values of workron_raft_role's role label.
var raftRoles = []string{"leader", "follower", "candidate", "shutdown"}

var (
	descLeader   = prometheus.NewDesc("workron_raft_leader", "1 if this node is the leader.", nil, nil)
	descRole     = prometheus.NewDesc("workron_raft_role", "1 for this node's current Raft role, 0 for the others.", []string{"role"}, nil)
	descTerm     = prometheus.NewDesc("workron_raft_term", "Current Raft term.", nil, nil)
	descCommit   = prometheus.NewDesc("workron_raft_commit_index", "Raft commit index.", nil, nil)
	descApplied  = prometheus.NewDesc("workron_raft_applied_index", "Index applied to the state machine.", nil, nil)
	descLastLog  = prometheus.NewDesc("workron_raft_last_log_index", "Last index in this node's Raft log.", nil, nil)
	descContact  = prometheus.NewDesc("workron_raft_last_contact_seconds", "Seconds since this node last heard from the leader (0 on the leader).", nil, nil)
	descEntries  = prometheus.NewDesc("workron_raft_entries_proposed_total", "Log entries proposed by this node.", nil, nil)
	descCommands = prometheus.NewDesc("workron_raft_commands_proposed_total", "Commands packed into those entries.", nil, nil)
	descPerEntry = prometheus.NewDesc("workron_raft_commands_per_entry", "Commands packed into each log entry this node proposed.", nil, nil)
	descApply    = prometheus.NewDesc("workron_raft_apply_duration_seconds", "From handing a proposed entry to Raft to having its results (committed and applied on this node).", nil, nil)
	descStage    = prometheus.NewDesc("workron_raft_stage_seconds", "Where the time of each log entry this node proposed as leader went, by stage in order: queue (in the proposer's queue), dispatch (to Raft's leader loop), leader_write (the leader's log write), replicate (to the first follower's answer), commit_notice (to the start of its apply), apply, reply (to the proposer).", []string{"stage"}, nil)
	descLogWrite = prometheus.NewDesc("workron_raft_log_write_seconds", "Each write to this node's Raft log (fsync'd): on a follower, the follower's write.", nil, nil)
	descAppend   = prometheus.NewDesc("workron_raft_append_rpc_seconds", "Each AppendEntries round trip this node sent as leader, to one follower: the network and the follower's log write.", nil, nil)
	descSnapIdx  = prometheus.NewDesc("workron_raft_snapshot_index", "Last log index covered by the newest snapshot (0 if none).", nil, nil)
	descSnapSize = prometheus.NewDesc("workron_raft_snapshot_bytes", "Size of the newest snapshot.", nil, nil)
	descSnapTime = prometheus.NewDesc("workron_raft_snapshot_duration_seconds", "How long the newest snapshot took to capture and write (0 if taken before this process started).", nil, nil)
	descSnapAt   = prometheus.NewDesc("workron_raft_snapshot_timestamp_seconds", "When this process finished its newest snapshot, Unix time (0 if none).", nil, nil)
	descSnaps    = prometheus.NewDesc("workron_raft_snapshots_total", "Snapshots this process has taken.", nil, nil)
	descSnapWrit = prometheus.NewDesc("workron_raft_snapshot_written_bytes_total", "Bytes the snapshots this process has taken wrote.", nil, nil)
	descSnapThr  = prometheus.NewDesc("workron_raft_snapshot_threshold", "Log entries between snapshots in force: --snapshot-threshold, raised with the state file by --snapshot-log-ratio.", nil, nil)
	descProto    = prometheus.NewDesc("workron_protocol_version", "The protocol version this node's binary understands.", nil, nil)
	descClProto  = prometheus.NewDesc("workron_cluster_protocol", "The lowest protocol version a cluster member runs, as this node last saw; the leader proposes nothing that needs a higher one.", nil, nil)
	descAhead    = prometheus.NewDesc("workron_cluster_clock_ahead_seconds", "How far the cluster time (the log's) is ahead of this node's clock; above 0 after a node whose clock was ahead led.", nil, nil)
)

func (c *raftCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descRole, descTerm, descCommit, descApplied, descLastLog, descContact,
		descEntries, descCommands, descPerEntry, descApply, descStage, descLogWrite, descAppend, descSnapIdx, descSnapSize, descSnapTime, descSnapAt, descSnaps, descSnapWrit, descSnapThr, descAhead, descProto, descClProto} {
		ch <- d
	}
}

func (c *raftCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	st := c.s.node.Stats()
	role := c.s.node.Role()
	gauge(descLeader, boolValue(role == "leader"))
	for _, r := range raftRoles {
		gauge(descRole, boolValue(role == r), r)
	}
	gauge(descTerm, float64(st.Term))
	gauge(descCommit, float64(st.CommitIndex))
	gauge(descApplied, float64(st.AppliedIndex))
	gauge(descLastLog, float64(st.LastLogIndex))
	contact := 0.0
	if role != "leader" && !st.LastContact.IsZero() {
		contact = time.Since(st.LastContact).Seconds()
	}
	gauge(descContact, contact)
	ch <- prometheus.MustNewConstMetric(descEntries, prometheus.CounterValue, float64(st.Entries))
	ch <- prometheus.MustNewConstMetric(descCommands, prometheus.CounterValue, float64(st.Commands))
	ch <- constHistogram(descPerEntry, st.CommandsPerEntry)
	ch <- constHistogram(descApply, st.ApplyLatency)
	for _, name := range raftnode.StageNames() {
		ch <- constHistogram(descStage, st.Stages.Stages[name], name)
	}
	ch <- constHistogram(descLogWrite, st.Stages.LogWrite)
	ch <- constHistogram(descAppend, st.Stages.AppendRPC)
	sn := st.Snapshot
	gauge(descSnapIdx, float64(sn.Index))
	gauge(descSnapSize, float64(sn.Bytes))
	gauge(descSnapTime, sn.Duration.Seconds())
	at := 0.0
	if !sn.Taken.IsZero() {
		at = float64(sn.Taken.UnixNano()) / 1e9
	}
	gauge(descSnapAt, at)
	ch <- prometheus.MustNewConstMetric(descSnaps, prometheus.CounterValue, float64(sn.Count))
	ch <- prometheus.MustNewConstMetric(descSnapWrit, prometheus.CounterValue, float64(sn.Written))
	gauge(descSnapThr, float64(st.SnapshotThreshold))
	gauge(descAhead, st.ClockAhead.Seconds())
	gauge(descProto, fsm.ProtocolVersion)
	gauge(descClProto, float64(c.s.node.ClusterProtocol()))
}

func constHistogram(d *prometheus.Desc, h raftnode.HistogramSnapshot, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.Buckets))
	for _, b := range h.Buckets {
		buckets[b.UpperBound] = b.Count
	}
	return prometheus.MustNewConstHistogram(d, h.Count, h.Sum, buckets, labels...)
}
