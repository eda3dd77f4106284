package clustertest_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/node"
)

// getGang reads a gang through node url.
func getGang(tb testing.TB, url, id string) wire.Gang {
	tb.Helper()
	return decode[wire.Gang](tb, call(tb, http.StatusOK, http.MethodGet, url+"/gangs/"+id, nil))
}

// waitGang polls a gang until it has the status and returns it.
func waitGang(tb testing.TB, url, id, status string, timeout time.Duration) wire.Gang {
	tb.Helper()
	var g wire.Gang
	clustertest.WaitFor(tb, timeout, func() error {
		r := send(tb, http.MethodGet, url+"/gangs/"+id, nil)
		if r.Status != http.StatusOK {
			return fmt.Errorf("GET gang %s: %s", id, r)
		}
		g = decode[wire.Gang](tb, r)
		if g.Status != status {
			return fmt.Errorf("gang %s is %s at epoch %d, want %s (%s)", id, g.Status, g.Epoch, status, g.LastError)
		}
		return nil
	})
	return g
}

// next is a v0 worker's claim: the job, or nil on 204.
func next(tb testing.TB, url, worker string) *seedJob {
	tb.Helper()
	r := send(tb, http.MethodGet, url+"/jobs/next?worker_id="+worker, nil)
	switch r.Status {
	case http.StatusNoContent:
		return nil
	case http.StatusOK:
		j := decode[seedJob](tb, r)
		return &j
	}
	tb.Fatalf("GET /jobs/next for %s: %s", worker, r)
	return nil
}

// claimGang has each worker of a reserved gang claim its task, as a v0 worker does,
// and returns the claimed jobs by index.
func claimGang(tb testing.TB, url string, g wire.Gang, only ...int) []*seedJob {
	tb.Helper()
	out := make([]*seedJob, g.Size)
	for i, w := range g.Workers {
		if len(only) > 0 && !containsInt(only, i) {
			continue
		}
		j := next(tb, url, w)
		if j == nil || j.ID != g.Tasks[i] {
			tb.Fatalf("worker %s reserved for task %s claimed %+v", w, g.Tasks[i], j)
		}
		out[i] = j
	}
	return out
}

func containsInt(ns []int, n int) bool {
	for _, m := range ns {
		if m == n {
			return true
		}
	}
	return false
}

// TestGangOverHTTP plays four v0 workers (raw HTTP, no bodies)
// against a 3-node cluster through a follower: placement of a gang, its
// env, a failure that drains it, preemption on the per-job and worker
// heartbeats, checkpoints and acknowledgements fenced by epoch, a sibling
// that never acknowledges (force drain), a reservation that lapses, and the
// checkpoint reaching the next attempt; bad inputs change nothing.
func TestGangOverHTTP(t *testing.T) {
	c := newCluster(t, 3, clustertest.WithLeaseTTL(30*time.Second), clustertest.WithConfig(func(_ int, nc *node.Config) {
		nc.Leader.Admission.Interval = 50 * time.Millisecond
		nc.Leader.Admission.ReserveTimeout = 2 * time.Second
		nc.Leader.Admission.DrainTimeout = 1500 * time.Millisecond
	}))
	url := c.URL(c.Followers(t)[0])
	for i := 1; i <= 4; i++ {
		body := fmt.Sprintf(`{"id":"gw%d","exec_addr":"10.0.0.%d:9000","resources":{"vram_mb":8000,"memory_mb":16384},"tags":["gpu"]}`, i, i)
		call(t, http.StatusCreated, http.MethodPost, url+"/workers/register", body)
	}

	t.Run("BadInputIsRefusedAndChangesNothing", func(t *testing.T) {
		l := c.Leader(t)
		before := c.Converged(t, 5*time.Second)
		cases := []struct {
			name, path, body string
			status           int
			mention          string
		}{
			{"GangSizeNegative", "/jobs", `{"command":"x","gang_size":-1}`, 400, "gang_size"},
			{"GangSizeOverCap", "/jobs", `{"command":"x","gang_size":65}`, 400, "gang_size"},
			{"NegativeVRAM", "/jobs", `{"command":"x","gang_size":2,"resources":{"vram_mb":-1}}`, 400, "resources.vram_mb"},
			{"NegativeMemoryOnAPlainJob", "/jobs", `{"command":"x","resources":{"memory_mb":-5}}`, 400, "resources.memory_mb"},
			{"SlotsPastTheCap", "/jobs", `{"command":"x","resources":{"slots":1099511627777}}`, 400, "resources.slots"},
			{"BatchMemberCPUPastTheCap", "/jobs/batch", `{"jobs":[{"command":"x","resources":{"cpu_millis":9223372036854775807}}]}`, 400, "jobs[0].resources.cpu_millis"},
			{"WorkerNegativeSlots", "/workers/register", `{"id":"bad-w","resources":{"slots":-1}}`, 400, "resources.slots"},
			{"WorkerVRAMPastTheCap", "/workers/register", `{"id":"bad-w","resources":{"vram_mb":1099511627777}}`, 400, "resources.vram_mb"},
			{"GangWithDependencies", "/jobs", `{"command":"x","gang_size":2,"depends_on":["job-1"]}`, 400, "depends_on"},
			{"GangInABatch", "/jobs/batch", `{"jobs":[{"command":"x","gang_size":2}]}`, 400, "gang_size"},
			{"EmptyTag", "/jobs", `{"command":"x","tags":[""]}`, 400, "tags[0]"},
			{"CheckpointWithoutEpoch", "/jobs/job-1/checkpoint", `data`, 400, "epoch"},
			{"AckWithBadEpoch", "/jobs/job-1/preempted?epoch=x", ``, 400, "epoch"},
		}
		for _, tc := range cases {
			wantError(t, send(t, http.MethodPost, url+tc.path, tc.body), tc.status, "invalid", tc.mention)
		}
		wantError(t, send(t, http.MethodGet, url+"/gangs/gang-999", nil), 404, "not_found", "gang-999")
		if after := c.Applied(l); after != before {
			t.Errorf("applied index moved from %d to %d: bad input reached the log", before, after)
		}
	})

	t.Run("UnschedulableJobSaysWhy", func(t *testing.T) {
		j := submit(t, url, `{"command":"big","resources":{"vram_mb":40960}}`)
		got := getJob(t, url, j.ID)
		if got.Unschedulable != "needs 40960 MB VRAM; largest worker has 8000" {
			t.Errorf("unschedulable = %q", got.Unschedulable)
		}
		call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+j.ID+"/cancel", nil)
		g := decode[wire.GangSubmitResponse](t, call(t, http.StatusCreated, http.MethodPost, url+"/jobs", `{"command":"x","gang_size":5,"tags":["gpu"]}`))
		if gg := getGang(t, url, g.GangID); gg.Unschedulable != "gang of 5 needs 5 workers with tags gpu; 4 active workers have it" {
			t.Errorf("gang unschedulable = %q", gg.Unschedulable)
		}
		call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+g.Tasks[0]+"/cancel", nil)
		if gg := getGang(t, url, g.GangID); gg.Status != "cancelled" {
			t.Errorf("cancelled gang is %s", gg.Status)
		}
	})

	var sub wire.GangSubmitResponse
	t.Run("SubmitReturnsTheSeedShape", func(t *testing.T) {
		r := call(t, http.StatusCreated, http.MethodPost, url+"/jobs",
			`{"command":"train","gang_size":3,"resources":{"vram_mb":8000},"tags":["gpu"],"max_retries":2,"backoff":{"base":"10ms"}}`)
		sub = decode[wire.GangSubmitResponse](t, r)
		if !strings.HasPrefix(sub.GangID, "gang-") || len(sub.Tasks) != 3 || !strings.Contains(string(r.Body), `"gang_id"`) {
			t.Fatalf("gang submit = %s", r)
		}
	})

	var run []*seedJob
	var g wire.Gang
	t.Run("PlacedOnThreeWorkersWithTheGangsEnv", func(t *testing.T) {
		g = waitGang(t, url, sub.GangID, "reserved", 5*time.Second)
		idle := ""
		for i := 1; i <= 4; i++ {
			if w := fmt.Sprintf("gw%d", i); !strings.Contains(strings.Join(g.Workers, ","), w) {
				idle = w
			}
		}
		if j := next(t, url, idle); j != nil {
			t.Fatalf("worker %s with no reservation claimed %+v", idle, j)
		}
		run = claimGang(t, url, g)
		for i, j := range run {
			var peers []string
			for k, w := range g.Workers {
				if k != i {
					peers = append(peers, "10.0.0."+strings.TrimPrefix(w, "gw")+":9000")
				}
			}
			want := map[string]string{"GANG_ID": g.GangID, "GANG_SIZE": "3", "GANG_INDEX": fmt.Sprint(i), "GANG_PEERS": strings.Join(peers, ",")}
			for k, v := range want {
				if j.Env[k] != v {
					t.Errorf("task %d env %s = %q, want %q", i, k, j.Env[k], v)
				}
			}
		}
		waitGang(t, url, g.GangID, "running", 5*time.Second)
	})

	t.Run("AFailureDrainsTheSiblings", func(t *testing.T) {
		call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+run[1].ID+"/fail", nil)
		d := getGang(t, url, g.GangID)
		if d.Status != "draining" || d.Epoch <= g.Epoch {
			t.Fatalf("after a task failed the gang is %s at epoch %d", d.Status, d.Epoch)
		}
		hb := decode[wire.HeartbeatResponse](t, call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+run[0].ID+"/heartbeat", nil))
		if hb.Action != wire.ActionPreempt || hb.PreemptionEpoch != d.Epoch {
			t.Fatalf("sibling's heartbeat = %+v, want preempt at epoch %d", hb, d.Epoch)
		}
		whb := decode[wire.WorkerHeartbeatResponse](t, call(t, http.StatusOK, http.MethodPost, url+"/workers/"+g.Workers[2]+"/heartbeat", nil))
		if len(whb.Actions) != 1 || whb.Actions[0].Action != wire.ActionPreempt || whb.Actions[0].PreemptionEpoch != d.Epoch || whb.Actions[0].JobID != run[2].ID {
			t.Fatalf("worker heartbeat actions = %+v", whb.Actions)
		}
		ck := url + "/jobs/" + run[0].ID
		wantError(t, send(t, http.MethodPost, fmt.Sprintf("%s/checkpoint?epoch=%d", ck, d.Epoch-1), "old"), 409, "stale_epoch", "epoch")
		wantError(t, send(t, http.MethodPost, fmt.Sprintf("%s/checkpoint?epoch=%d", ck, d.Epoch), strings.Repeat("x", 1<<20+1)), 413, "too_large")
		call(t, http.StatusOK, http.MethodPost, fmt.Sprintf("%s/checkpoint?epoch=%d", ck, d.Epoch), "step=41")
		wantError(t, send(t, http.MethodPost, fmt.Sprintf("%s/preempted?epoch=%d", ck, d.Epoch+1), nil), 409, "stale_epoch")
		call(t, http.StatusOK, http.MethodPost, fmt.Sprintf("%s/preempted?epoch=%d", ck, d.Epoch), nil)
		wantError(t, send(t, http.MethodPost, fmt.Sprintf("%s/preempted?epoch=%d", ck, d.Epoch), nil), 409, "stale_epoch")
		// run[2]'s worker never acknowledges: the drain is forced.
		g = waitGang(t, url, g.GangID, "reserved", 10*time.Second)
		for i, want := range []int{0, 1, 0} {
			if j := getJob(t, url, g.Tasks[i]); j.Attempts != want {
				t.Errorf("task %d has %d attempts, want %d (siblings' are given back)", i, j.Attempts, want)
			}
		}
		if j := getJob(t, url, run[2].ID); !strings.Contains(j.LastError, "force-drained") {
			t.Errorf("the unacknowledged task's last error is %q", j.LastError)
		}
		// Its worker's late report is fenced out.
		wantError(t, send(t, http.MethodPost, url+"/jobs/"+run[2].ID+"/done", wire.ReportRequest{Lease: 1}), 409, "stale_lease")
	})

	t.Run("AReservationNotClaimedInTimeRollsBack", func(t *testing.T) {
		claimed := claimGang(t, url, g, 0)
		d := waitGang(t, url, g.GangID, "draining", 5*time.Second)
		call(t, http.StatusOK, http.MethodPost, fmt.Sprintf("%s/jobs/%s/preempted?epoch=%d", url, claimed[0].ID, d.Epoch), nil)
		g = waitGang(t, url, g.GangID, "reserved", 5*time.Second)
	})

	t.Run("TheCheckpointReachesTheNextAttemptAndTheGangFinishes", func(t *testing.T) {
		again := claimGang(t, url, g)
		if got := again[0].Env["CHECKPOINT_DATA"]; got != base64.StdEncoding.EncodeToString([]byte("step=41")) {
			t.Errorf("task 0's CHECKPOINT_DATA = %q", got)
		}
		if _, ok := again[1].Env["CHECKPOINT_DATA"]; ok {
			t.Error("task 1 left no checkpoint but got one")
		}
		if again[0].Attempts != 1 || again[1].Attempts != 2 || again[2].Attempts != 1 {
			t.Errorf("attempts %d,%d,%d, want 1,2,1", again[0].Attempts, again[1].Attempts, again[2].Attempts)
		}
		for _, j := range again {
			call(t, http.StatusOK, http.MethodPost, url+"/jobs/"+j.ID+"/done", nil)
		}
		done := waitGang(t, url, g.GangID, "done", 5*time.Second)
		for _, j := range done.Jobs {
			if j.Status != wire.StatusDone || j.GangID != g.GangID {
				t.Errorf("task %s is %s", j.ID, j.Status)
			}
		}
	})
	c.Converged(t, 5*time.Second)
}
