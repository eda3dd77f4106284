//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/internal/testkit/poll"
	"github.com/workron/workron/internal/testkit/ports"
	"github.com/workron/workron/store"
)

// TestRestoreIntoARunningCluster restores a backup into a running 3-node
// cluster of server processes (`workron restore --server`, sent to a
// follower), then kills the node that did the restore (the leader): the
// other two still hold every restored job, fencing tokens stay above the
// backup's, and the killed node, restarted on a damaged state file, rebuilds
// it. Damaged backups are refused before and after, changing nothing.
func TestRestoreIntoARunningCluster(t *testing.T) {
	bin, hc, ctx, fx, info := restoreSetup(t)

	c := startCluster(t, bin, t.TempDir())
	lead := c.leader(t)
	// State of the cluster's own, which the restore replaces.
	for range 3 {
		post(t, hc, lead.URL+"/jobs", wire.SubmitRequest{Command: "echo mine"})
	}
	follower := c.Nodes[0]
	if follower == lead {
		follower = c.Nodes[1]
	}

	t.Run("DamagedBackupsAreRefusedAndChangeNothing", func(t *testing.T) {
		before := listing(t, hc, lead.URL)
		for _, b := range damagedBackups(t, fx.file) {
			// The CLI checks the file before sending it.
			var stdout, stderr bytes.Buffer
			err := run(ctx, []string{"restore", "--server", follower.URL, b.path}, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), "not restored") {
				t.Errorf("%s: workron restore: %v", b.name, err)
			}
			// The server checks what it receives, whoever sent it.
			status, e := postBackup(t, hc, follower.URL, b.path)
			if status != http.StatusBadRequest || e.Code != "bad_backup" {
				t.Errorf("%s: POST /restore: HTTP %d %+v, want 400 bad_backup", b.name, status, e)
			}
			t.Logf("%s: %s", b.name, e.Error)
		}
		if after := listing(t, hc, lead.URL); after != before {
			t.Errorf("refused restores changed the state:\nnow %s\nwas %s", after, before)
		}
		c.sameDigest(t)
		for _, n := range c.Nodes {
			left, _ := filepath.Glob(filepath.Join(n.Data, "restore-*"))
			if len(left) > 0 {
				t.Errorf("%s: refused restores left %v", n.Name, left)
			}
		}
	})

	var stdout, stderr bytes.Buffer
	if err := run(ctx, []string{"restore", "--server", follower.URL, fx.file}, &stdout, &stderr); err != nil {
		t.Fatalf("workron restore: %v\n%s", err, stderr.String())
	}
	t.Logf("workron restore: %s", strings.TrimSpace(stdout.String()))
	c.sameDigest(t) // every node holds the restored state
	if got := readState(t, hc, lead.URL); !equalState(t, fx.before, got) {
		t.Fatal("the restored state differs from the backup's")
	}

	// Kill the node that restored: the others lead on with the state.
	lead.Kill()
	next := c.leader(t)
	if got := readState(t, hc, next.URL); !equalState(t, fx.before, got) {
		t.Fatal("after the node that restored died, the state differs from the backup's")
	}
	checkGoesOn(t, hc, next.URL, info.LastLease)

	// The killed node comes back on a damaged state file: it rebuilds it
	// from the restored snapshot and its log, and agrees with the others.
	state := filepath.Join(lead.Data, "state.db")
	flipPages(t, state)
	off, err := lead.Start()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitServing(context.Background(), lead, off, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	c.sameDigest(t)
	if !strings.Contains(lead.LogSince(off), "state file is damaged") {
		t.Errorf("%s did not say it rebuilt its damaged state file", lead.Name)
	}
	c.checkAlive(t)
}

// TestRestoreOfALargeBackup restores, with `workron restore --server` sent
// to a follower of a 3-node cluster of server processes, a backup larger
// than the body limit of every other request (--max-body-bytes, 1 MiB):
// the follower streams it to disk and on to the leader, and every node
// ends with its jobs. Before, POST /restore read its body whole within
// --max-body-bytes and refused it (413).
func TestRestoreOfALargeBackup(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test: starts three server processes")
	}
	bin := workronBinary(t)
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)

	// A one-node cluster of 300 jobs of 8 KiB commands, backed up.
	src := clustertest.New(t, 1)
	const jobs = 300
	for b := range jobs / 100 {
		var batch wire.BatchSubmitRequest
		for i := range 100 {
			batch.Jobs = append(batch.Jobs, wire.SubmitRequest{Command: fmt.Sprintf("echo %d %s", b*100+i, strings.Repeat("x", 8<<10))})
		}
		post(t, hc, src.URL(0)+"/jobs/batch", batch)
	}
	file := filepath.Join(t.TempDir(), "large.bak")
	var stdout, stderr bytes.Buffer
	if err := run(ctx, []string{"backup", file, "--server", src.URL(0)}, &stdout, &stderr); err != nil {
		t.Fatalf("workron backup: %v\n%s", err, stderr.String())
	}
	info, err := store.Verify(file)
	if err != nil {
		t.Fatal(err)
	}
	if info.Size <= 2<<20 || info.Jobs != jobs {
		t.Fatalf("the backup is %d bytes with %d jobs, want more than 2 MiB and %d", info.Size, info.Jobs, jobs)
	}

	c := startCluster(t, bin, t.TempDir())
	lead := c.leader(t)
	post(t, hc, lead.URL+"/jobs", wire.SubmitRequest{Command: "echo replaced"})
	follower := c.Nodes[0]
	if follower == lead {
		follower = c.Nodes[1]
	}
	stdout.Reset()
	if err := run(ctx, []string{"restore", "-o", "json", "--server", follower.URL, file}, &stdout, &stderr); err != nil {
		t.Fatalf("workron restore of %d bytes: %v\n%s", info.Size, err, stderr.String())
	}
	var res wire.Restore
	decodeInto(t, stdout.Bytes(), &res)
	if res.Jobs != jobs || res.Bytes != info.Size {
		t.Fatalf("restored %+v, want %d jobs and %d bytes", res, jobs, info.Size)
	}
	c.sameDigest(t)
	var list wire.JobList
	if err := getJSON(hc, follower.URL+"/jobs?limit=1000", &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Jobs) != jobs {
		t.Errorf("the cluster lists %d jobs, want the backup's %d", len(list.Jobs), jobs)
	}
	for _, n := range c.Nodes {
		left, _ := filepath.Glob(filepath.Join(n.Data, "restore-*"))
		if len(left) > 0 {
			t.Errorf("%s: the restore left %v", n.Name, left)
		}
	}
	c.checkAlive(t)
}

// TestOfflineRestoreOnThreeNodes follows the procedure of docs/operations.md for a
// cluster that cannot start: `workron restore --data` stages the backup in a
// new node's data directory, that node starts with --bootstrap, two more
// join it with empty data directories. Then the node that restored is
// killed: the two that joined hold every restored job.
func TestOfflineRestoreOnThreeNodes(t *testing.T) {
	bin, hc, ctx, fx, info := restoreSetup(t)
	dir := t.TempDir()

	t.Run("DamagedBackupsAreRefusedAndTheDirectoryStaysUnmade", func(t *testing.T) {
		for _, b := range damagedBackups(t, fx.file) {
			data := filepath.Join(dir, "refused")
			var stdout, stderr bytes.Buffer
			err := run(ctx, []string{"restore", "--data", data, b.path}, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), "not restored") {
				t.Errorf("%s: workron restore --data: %v", b.name, err)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("%s: a refused restore made %s: %v", b.name, data, err)
			}
		}
	})

	var stdout, stderr bytes.Buffer
	if err := run(ctx, []string{"restore", "--data", filepath.Join(dir, "n1"), fx.file}, &stdout, &stderr); err != nil {
		t.Fatalf("workron restore --data: %v\n%s", err, stderr.String())
	}
	pp, err := ports.Free(6)
	if err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, dir)
	for i, id := range []string{"n1", "n2", "n3"} {
		httpAddr := fmt.Sprintf("127.0.0.1:%d", pp[i])
		n := &node{URL: "http://" + httpAddr, Data: filepath.Join(dir, id), Proc: proc{Name: id, Bin: bin, Log: filepath.Join(dir, id+".log"),
			Args: []string{"server", "--id", id, "--http", httpAddr, "--raft", fmt.Sprintf("127.0.0.1:%d", pp[3+i]),
				"--data", filepath.Join(dir, id), "--raft-heartbeat-timeout", "150ms", "--raft-election-timeout", "150ms",
				"--lease-ttl", "2s", "--reap-interval", "100ms", "--log-level", "info"}}}
		if i == 0 {
			n.Args = append(n.Args, "--bootstrap")
		} else {
			n.Args = append(n.Args, "--join", c.Nodes[0].URL)
		}
		c.Nodes = append(c.Nodes, n)
		off, err := n.Start()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WaitServing(context.Background(), n, off, 15*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	clusterOfThree := func() error {
		var cl wire.Cluster
		if err := getJSON(hc, c.Nodes[0].URL+"/cluster", &cl); err != nil {
			return err
		}
		if len(cl.Nodes) != 3 {
			return fmt.Errorf("%d members", len(cl.Nodes))
		}
		for _, n := range cl.Nodes {
			if n.Role == "nonvoter" { // a joined node votes once it has caught up
				return fmt.Errorf("%s is still a non-voter", n.ID)
			}
		}
		return nil
	}
	if poll.True(ctx, 0, 50*time.Millisecond, func() bool { return clusterOfThree() == nil }) != nil {
		t.Fatalf("the nodes did not join: %v", clusterOfThree())
	}
	c.sameDigest(t)

	c.Nodes[0].Kill()
	next := c.leader(t)
	if got := readState(t, hc, next.URL); !equalState(t, fx.before, got) {
		t.Fatal("after the node that restored died, the state differs from the backup's")
	}
	checkGoesOn(t, hc, next.URL, info.LastLease)
	for _, n := range c.Nodes[1:] {
		if !n.Running() {
			t.Errorf("node %s exited; see its log", n.Name)
		}
	}
}

// restoreSetup skips in -short mode, builds the binary and makes a backup
// (and what Verify says of it) for an end-to-end restore test.
func restoreSetup(t *testing.T) (string, *http.Client, context.Context, backupFixture, store.Info) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: starts three server processes")
	}
	bin := workronBinary(t)
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 30 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	fx := makeBackup(t, ctx, hc)
	info, err := store.Verify(fx.file)
	if err != nil {
		t.Fatal(err)
	}
	return bin, hc, ctx, fx, info
}

// checkGoesOn checks that a restored cluster numbers its next job after the
// restored ones and hands out fencing tokens above the backup's highest.
func checkGoesOn(t *testing.T, hc *http.Client, base string, lastLease uint64) {
	t.Helper()
	var j wire.Job
	decodeInto(t, post(t, hc, base+"/jobs", wire.SubmitRequest{Command: "echo again", Queue: "after"}), &j)
	if j.ID != "job-9" {
		t.Errorf("the next job is %s, want job-9 after the eight restored", j.ID)
	}
	var res wire.ClaimResponse
	decodeInto(t, post(t, hc, base+"/jobs/claim", wire.ClaimRequest{WorkerID: "w-after", Queues: []string{"after"}, Shell: true}), &res)
	if len(res.Jobs) != 1 {
		t.Fatalf("claim after the restore: %d jobs", len(res.Jobs))
	}
	if res.Jobs[0].Lease <= lastLease {
		t.Errorf("a lease after the restore is %d, not above the backup's highest (%d)", res.Jobs[0].Lease, lastLease)
	}
}

// equalState reports whether two readState results match, logging what differs.
func equalState(t *testing.T, want, got map[string]string) bool {
	t.Helper()
	ok := true
	for _, what := range []string{"jobs", "schedules", "workers", "queues"} {
		if want[what] != got[what] {
			t.Errorf("%s differ:\nbackup's %s\nnow      %s", what, want[what], got[what])
			ok = false
		}
	}
	return ok
}

// sameDigest waits until every running node reports the same state digest
// at the same applied index, twice in a row, and returns it.
func (c *cluster) sameDigest(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var last, prev string
	stable := 0
	ok := poll.True(ctx, 0, 100*time.Millisecond, func() bool {
		var seen []string
		for _, n := range c.Nodes {
			if !n.Running() {
				continue
			}
			var d wire.Digest
			if status, body, err := c.Get(ctx, n.URL+"/debug/digest", &d); err != nil || status != http.StatusOK {
				last = fmt.Sprintf("%s: HTTP %d %s %v", n.Name, status, body, err)
				return false
			}
			if d.Check != "ok" {
				t.Errorf("%s: store check: %s", n.Name, d.Check)
			}
			seen = append(seen, fmt.Sprintf("%d:%s", d.AppliedIndex, d.Digest))
		}
		last = strings.Join(seen, " ")
		for _, s := range seen {
			if s != seen[0] {
				stable = 0
				return false
			}
		}
		if seen[0] == prev {
			stable++
		} else {
			stable = 0
		}
		prev = seen[0]
		return stable >= 2
	}) == nil
	if !ok {
		t.Fatalf("the nodes do not agree on the state: %s", last)
	}
	return prev
}

// listing is what a node answers for the jobs, workers and schedules.
func listing(t *testing.T, hc *http.Client, base string) string {
	t.Helper()
	var out strings.Builder
	for _, path := range []string{"/jobs?limit=1000", "/workers", "/schedules"} {
		var v json.RawMessage
		if err := getJSON(hc, base+path, &v); err != nil {
			t.Fatal(err)
		}
		out.Write(v)
	}
	return out.String()
}

type damagedBackup struct{ name, path string }

// damagedBackups writes broken copies of a backup: empty, truncated, and
// with 200 bytes flipped at the start of every page but the meta pages.
func damagedBackups(t *testing.T, file string) []damagedBackup {
	t.Helper()
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	flipped := filepath.Join(dir, "flipped.bak")
	if err := os.WriteFile(flipped, good, 0o600); err != nil {
		t.Fatal(err)
	}
	flipPages(t, flipped)
	out := []damagedBackup{{"Empty", filepath.Join(dir, "empty.bak")}, {"Truncated", filepath.Join(dir, "truncated.bak")},
		{"200BytesFlippedPerPage", flipped}}
	for _, w := range []struct {
		path string
		data []byte
	}{{out[0].path, nil}, {out[1].path, good[:len(good)/2]}} {
		if err := os.WriteFile(w.path, w.data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// flipPages flips 200 bytes at the start of every 4 KiB page of a file
// after the two meta pages.
func flipPages(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for off := 2 * 4096; off < len(b); off += 4096 {
		for i := off; i < min(off+200, len(b)); i++ {
			b[i] ^= 0xA5
		}
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// postBackup sends a file to POST /restore as it is and returns the status
// and the error reply.
func postBackup(t *testing.T, hc *http.Client, base, path string) (int, wire.Error) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Post(base+"/restore", "application/octet-stream", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e wire.Error
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e
}
