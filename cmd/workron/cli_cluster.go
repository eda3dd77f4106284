package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/workron/workron/api/wire"
)

func (c *cli) cluster(ctx context.Context, fs *flag.FlagSet, args []string) error {
	var join wire.JoinRequest
	fs.StringVar(&join.ID, "id", "", "join: the new node's id")
	fs.StringVar(&join.Raft, "raft", "", "join: the new node's Raft host:port")
	fs.StringVar(&join.HTTP, "http", "", "join: the new node's HTTP base URL")
	ready := fs.Bool("ready", false, "health: ask for readiness (GET /health?ready=1): ok only once the node has caught up with the leader")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return errors.New("cluster: give status, health, join or remove ID")
	}
	if err := c.connect(); err != nil {
		return err
	}
	switch pos[0] {
	case "status":
		cl, err := c.client.Cluster(ctx)
		if err != nil {
			return err
		}
		return c.print(cl, func() { printCluster(c.out, cl) })
	case "health":
		// The own view (GET /health) of the first server that takes the
		// connection, found as every verb finds one: 503 answers
		// (no_leader, removed, catching_up) are shown, and exit 1.
		h, err := c.client.Health(ctx, *ready)
		if h == nil {
			return err
		}
		if perr := c.print(h, func() {
			fmt.Fprintf(c.out, "%s: %s, %s, leader %s, applied index %d, commit index %d, term %d\n",
				h.NodeID, h.Status, h.Role, cmp.Or(h.Leader, "-"), h.AppliedIndex, h.CommitIndex, h.Term)
		}); perr != nil {
			return perr
		}
		return err
	case "join":
		n, err := c.client.Join(ctx, join)
		if err != nil {
			return err
		}
		if n.Role == "nonvoter" {
			fmt.Fprintf(c.out, "joined %s as a non-voter: the leader makes it a voter once it has caught up\n", join.ID)
			return nil
		}
		fmt.Fprintf(c.out, "joined %s\n", join.ID)
		return nil
	case "remove":
		if len(pos) != 2 {
			return errors.New("cluster remove: give the node id")
		}
		rm, err := c.client.RemoveNode(ctx, pos[1])
		if err != nil {
			return err
		}
		if rm == nil || rm.Message == "" {
			rm = &wire.Removal{Removed: pos[1], Message: "removed " + pos[1]} // an older server's 204
		}
		return c.print(rm, func() { fmt.Fprintln(c.out, rm.Message) })
	}
	return fmt.Errorf("cluster: unknown subcommand %q", pos[0])
}

// printCluster shows each member with its health as the answering node
// probed it: HEALTH is the member's /health status or "unreachable",
// PROTOCOL the protocol version of its binary.
func printCluster(out io.Writer, cl *wire.Cluster) {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tROLE\tHEALTH\tAPPLIED\tPROTOCOL\tHTTP\tRAFT")
	for _, n := range cl.Nodes {
		health, applied, protocol := "unknown", "-", "-"
		if h := n.Health; h != nil {
			health = h.Status
			if h.Reachable {
				applied, protocol = fmt.Sprint(h.AppliedIndex), fmt.Sprint(max(h.Protocol, 1))
			} else {
				health = "unreachable"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, n.Role, health, applied, protocol, cmp.Or(n.HTTP, "-"), cmp.Or(n.Raft, "-"))
	}
	tw.Flush()
	fmt.Fprintf(out, "leader: %s, applied index: %d", cl.Leader, cl.AppliedIndex)
	if cl.Protocol > 0 { // absent from releases before protocol versions
		fmt.Fprintf(out, ", protocol: %d", cl.Protocol)
	}
	fmt.Fprintln(out)
	for _, n := range cl.Nodes {
		if h := n.Health; h != nil && !h.Reachable && h.Error != "" {
			fmt.Fprintf(out, "%s: %s\n", n.ID, h.Error)
		}
	}
}

// gangs shows a gang and its tasks (`workron gangs get ID`).
func (c *cli) gangs(ctx context.Context, fs *flag.FlagSet, args []string) error {
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 2 && pos[0] == "get" {
		pos = pos[1:]
	}
	if len(pos) != 1 {
		return errors.New("gangs: give get ID")
	}
	if err := c.connect(); err != nil {
		return err
	}
	g, err := c.client.Gang(ctx, pos[0])
	if err != nil {
		return err
	}
	return c.print(g, func() {
		tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "gang:\t%s\nstatus:\t%s\nsize:\t%d\nqueue:\t%s\nepoch:\t%d\n", g.GangID, g.Status, g.Size, g.Queue, g.Epoch)
		if len(g.Workers) > 0 {
			fmt.Fprintf(tw, "workers:\t%s\n", strings.Join(g.Workers, ","))
		}
		if g.LastError != "" {
			fmt.Fprintf(tw, "last_error:\t%s\n", g.LastError)
		}
		if g.Unschedulable != "" {
			fmt.Fprintf(tw, "unschedulable:\t%s\n", g.Unschedulable)
		}
		tw.Flush()
		fmt.Fprintln(c.out)
		c.printJobs(&wire.JobList{Jobs: g.Jobs})
	})
}

// digest prints the answering node's state digest (`workron digest`, GET
// /debug/digest): nodes at the same applied index hold the same state when
// their digests are equal.
func (c *cli) digest(ctx context.Context, fs *flag.FlagSet, args []string) error {
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("digest: unexpected %q", pos[0])
	}
	if err := c.connect(); err != nil {
		return err
	}
	d, err := c.client.Digest(ctx)
	if err != nil {
		return err
	}
	return c.print(d, func() {
		fmt.Fprintf(c.out, "node %s, applied index %d: %s (check: %s)\n", d.NodeID, d.AppliedIndex, d.Digest, d.Check)
	})
}
