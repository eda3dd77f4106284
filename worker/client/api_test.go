package client_test

import (
	"bytes"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
	"github.com/workron/workron/worker/client"
)

// TestWholeAPI drives every route of the API through the client against a
// real cluster, through a follower: the shapes of package wire must be the
// ones the server sends.
func TestWholeAPI(t *testing.T) {
	c := clustertest.New(t, 3)
	cl := newClient(t, nil, c.URL(c.Followers(t)[0]))
	ctx := t.Context()

	t.Run("WorkersAndQueues", func(t *testing.T) {
		if err := cl.Register(ctx, wire.Worker{ID: "w1", Queues: []string{"q1"}, Resources: wire.Resources{Slots: 2}}); err != nil {
			t.Fatal(err)
		}
		ws, err := cl.Workers(ctx)
		if err != nil || len(ws) != 1 || ws[0].ID != "w1" || ws[0].Resources.Slots != 2 {
			t.Fatalf("Workers = %+v, %v", ws, err)
		}
		if _, err := cl.Submit(ctx, wire.SubmitRequest{Command: "true", Queue: "q1"}); err != nil {
			t.Fatal(err)
		}
		q, err := cl.PauseQueue(ctx, "q1")
		if err != nil || q.Name != "q1" || !q.Paused {
			t.Fatalf("PauseQueue = %+v, %v", q, err)
		}
		qs, err := cl.Queues(ctx)
		if err != nil || len(qs) != 1 || !qs[0].Paused || qs[0].Counts[wire.StatusPending] != 1 {
			t.Fatalf("Queues = %+v, %v", qs, err)
		}
		if q, err := cl.ResumeQueue(ctx, "q1"); err != nil || q.Paused {
			t.Fatalf("ResumeQueue = %+v, %v", q, err)
		}
		if q, err := cl.PauseQueue(ctx, "unused"); err != nil || !q.Paused {
			t.Fatalf("PauseQueue(unused) = %+v, %v; a queue may be paused before it is used", q, err)
		}
		if _, err := cl.PauseQueue(ctx, "bad name"); !errors.Is(err, client.ErrInvalid) {
			t.Fatalf("PauseQueue(bad name) = %v, want ErrInvalid", err)
		}
		if err := cl.DeleteWorker(ctx, "w1"); !client.IsConflict(err) {
			t.Fatalf("DeleteWorker(active w1) = %v, want a conflict", err)
		}
		if err := cl.DeleteWorker(ctx, "nope"); !client.IsNotFound(err) {
			t.Fatalf("DeleteWorker(nope) = %v, want not found", err)
		}
	})

	t.Run("QueueLimits", func(t *testing.T) {
		q, err := cl.SetQueueLimits(ctx, "emails", wire.QueueLimits{Concurrency: wire.Limit(1), KeyConcurrency: wire.Limit(1), Rate: "100/s"})
		if err != nil || q.Limits == nil || *q.Limits.Concurrency != 1 || q.Limits.Rate != "100/s" {
			t.Fatalf("SetQueueLimits = %+v, %v", q, err)
		}
		for range 2 {
			if _, err := cl.Submit(ctx, wire.SubmitRequest{Command: "true", Queue: "emails", ConcurrencyKey: "acme"}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := cl.Claim(ctx, wire.ClaimRequest{WorkerID: "w1", Queues: []string{"emails"}, Max: 5}); err != nil {
			t.Fatal(err)
		}
		q, err = cl.QueueLimits(ctx, "emails")
		if err != nil || q.Limits == nil || q.Limits.Running != 1 || q.Limits.Waiting["concurrency"] != 1 {
			t.Fatalf("QueueLimits = %+v, %v", q.Limits, err)
		}
		if _, err := cl.SetQueueLimits(ctx, "emails", wire.QueueLimits{Rate: "often"}); !errors.Is(err, client.ErrInvalid) {
			t.Fatalf("SetQueueLimits(bad rate) = %v, want ErrInvalid", err)
		}
		if _, err := cl.QueueLimits(ctx, "nope"); !client.IsNotFound(err) {
			t.Fatalf("QueueLimits(nope) = %v, want not found", err)
		}
	})

	t.Run("Schedules", func(t *testing.T) {
		req := wire.ScheduleRequest{Name: "nightly", Cron: "@daily", Job: wire.SubmitRequest{Command: "echo nightly"}}
		s, err := cl.CreateSchedule(ctx, req)
		if err != nil || s.Name != "nightly" || s.NextRun == nil {
			t.Fatalf("CreateSchedule = %+v, %v", s, err)
		}
		if _, err := cl.CreateSchedule(ctx, req); !client.IsConflict(err) {
			t.Fatalf("a second CreateSchedule = %v, want a conflict", err)
		}
		req.Cron = "@hourly"
		if s, err := cl.UpdateSchedule(ctx, req); err != nil || s.Cron != "@hourly" {
			t.Fatalf("UpdateSchedule = %+v, %v", s, err)
		}
		if s, err := cl.PauseSchedule(ctx, "nightly"); err != nil || !s.Paused {
			t.Fatalf("PauseSchedule = %+v, %v", s, err)
		}
		if s, err := cl.ResumeSchedule(ctx, "nightly"); err != nil || s.Paused {
			t.Fatalf("ResumeSchedule = %+v, %v", s, err)
		}
		j, err := cl.TriggerSchedule(ctx, "nightly")
		if err != nil || j.Schedule != "nightly" || j.Command != "echo nightly" {
			t.Fatalf("TriggerSchedule = %+v, %v", j, err)
		}
		list, err := cl.Schedules(ctx)
		if err != nil || len(list) != 1 || list[0].Runs != 1 {
			t.Fatalf("Schedules = %+v, %v", list, err)
		}
		if err := cl.DeleteSchedule(ctx, "nightly"); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Schedule(ctx, "nightly"); !client.IsNotFound(err) {
			t.Fatalf("Schedule after delete = %v, want not found", err)
		}
		_, err = cl.CreateSchedule(ctx, wire.ScheduleRequest{Name: "bad", Cron: "every day", Job: wire.SubmitRequest{Command: "true"}})
		var ae *client.Error
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != "invalid" || ae.Message == "" || !errors.Is(err, client.ErrInvalid) {
			t.Fatalf("bad cron: %#v, want a 400 invalid with the server's message", err)
		}
	})

	t.Run("JobsCascadeAndGangs", func(t *testing.T) {
		parent, err := cl.Submit(ctx, wire.SubmitRequest{Command: "true", Queue: "idle"})
		if err != nil {
			t.Fatal(err)
		}
		child, err := cl.Submit(ctx, wire.SubmitRequest{Command: "true", Queue: "idle", DependsOn: []string{parent.ID}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.CancelWith(ctx, parent.ID, client.ActionOptions{NoCascade: true}); err != nil {
			t.Fatal(err)
		}
		if j, err := cl.Get(ctx, child.ID); err != nil || j.Status == wire.StatusCancelled {
			t.Fatalf("child after a cancel without cascade: %+v, %v", j, err)
		}
		list, err := cl.List(ctx, client.ListOptions{Queue: "idle", Status: wire.StatusCancelled})
		if err != nil || len(list.Jobs) != 1 || list.Jobs[0].ID != parent.ID {
			t.Fatalf("List cancelled = %+v, %v", list, err)
		}
		g, err := cl.SubmitGang(ctx, wire.SubmitRequest{Command: "true", Queue: "gangs", GangSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		gang, err := cl.Gang(ctx, g.GangID)
		if err != nil || gang.GangID != g.GangID || gang.Size != 2 {
			t.Fatalf("Gang = %+v, %v", gang, err)
		}
		if _, err := cl.Gang(ctx, "gang-nope"); !client.IsNotFound(err) {
			t.Fatalf("Gang(nope) = %v, want not found", err)
		}
	})

	t.Run("BatchIDs", func(t *testing.T) {
		jobs, err := cl.SubmitBatch(ctx, []wire.SubmitRequest{{Command: "a", Queue: "ids", IdempotencyKey: "ids-a"}, {Command: "b", Queue: "ids"}})
		if err != nil || len(jobs) != 2 {
			t.Fatalf("SubmitBatch = %+v, %v", jobs, err)
		}
		ids, err := cl.SubmitBatchIDs(ctx, []wire.SubmitRequest{
			{Command: "a", Queue: "ids", IdempotencyKey: "ids-a"},
			{Command: "c", Queue: "ids"},
			{Command: "d", Queue: "ids", DependsOn: []string{"$1"}},
		})
		if err != nil || len(ids) != 3 || ids[0] != jobs[0].ID || ids[1] == jobs[1].ID || ids[1] == ids[2] {
			t.Fatalf("SubmitBatchIDs = %q, %v; want %s (its idempotency key's job) and two new ids", ids, err, jobs[0].ID)
		}
		d, err := cl.Get(ctx, ids[2])
		if err != nil || d.Command != "d" || len(d.DependsOn) != 1 || d.DependsOn[0] != ids[1] {
			t.Fatalf("Get(%s) = %+v, %v; want d, depending on %s", ids[2], d, err, ids[1])
		}
		if list, err := cl.List(ctx, client.ListOptions{Queue: "ids"}); err != nil || len(list.Jobs) != 4 {
			t.Fatalf("List(ids) = %d jobs, %v; want 4", len(list.Jobs), err)
		}
		if _, err := cl.SubmitBatchIDs(ctx, []wire.SubmitRequest{{Command: "e", Queue: "ids"}, {Queue: "ids"}}); !errors.Is(err, client.ErrInvalid) {
			t.Fatalf("SubmitBatchIDs(a job without a command) = %v, want ErrInvalid", err)
		}
	})

	t.Run("ClusterHealthDigest", func(t *testing.T) {
		st, err := cl.Cluster(ctx)
		if err != nil || len(st.Nodes) != 3 || st.Leader == "" {
			t.Fatalf("Cluster = %+v, %v", st, err)
		}
		h, err := cl.Health(ctx, true)
		if err != nil || h.Status != "ok" || h.Role != "follower" {
			t.Fatalf("Health = %+v, %v", h, err)
		}
		d, err := cl.Digest(ctx)
		if err != nil || d.Digest == "" || d.Check != "ok" {
			t.Fatalf("Digest = %+v, %v", d, err)
		}
		if _, err := cl.RemoveNode(ctx, "n9"); !client.IsNotFound(err) {
			t.Fatalf("RemoveNode(n9) = %v, want not found", err)
		}
	})

	t.Run("BackupAndRestore", func(t *testing.T) {
		var buf bytes.Buffer
		n, err := cl.Backup(ctx, &buf)
		if err != nil || n == 0 || n != int64(buf.Len()) {
			t.Fatalf("Backup = %d bytes (%d written), %v", n, buf.Len(), err)
		}
		res, err := cl.Restore(ctx, bytes.NewReader(buf.Bytes()), n)
		if err != nil || res.Bytes != n || res.Jobs == 0 {
			t.Fatalf("Restore = %+v, %v", res, err)
		}
		_, err = cl.Restore(ctx, bytes.NewReader([]byte("not a backup")), 12)
		if !errors.Is(err, client.ErrInvalid) || client.CodeOf(err) != "bad_backup" {
			t.Fatalf("Restore(garbage) = %v, want 400 bad_backup", err)
		}
	})

	t.Run("Do", func(t *testing.T) {
		resp, err := cl.Do(ctx, client.Request{Method: http.MethodGet, Path: "/jobs/nope"})
		if resp.Status != 404 || !client.IsNotFound(err) || !bytes.Contains(resp.Body, []byte(`"not_found"`)) {
			t.Fatalf("Do GET /jobs/nope = %d %s, %v", resp.Status, resp.Body, err)
		}
		resp, err = cl.Do(ctx, client.Request{Method: http.MethodPost, Path: "/jobs", Body: wire.SubmitRequest{Command: "true", Queue: "idle"}})
		if err != nil || resp.Status != http.StatusCreated || !bytes.Contains(resp.Body, []byte(`"id"`)) {
			t.Fatalf("Do POST /jobs = %d %s, %v", resp.Status, resp.Body, err)
		}
	})

	t.Run("NextGivesNothingFromAnEmptyQueue", func(t *testing.T) {
		j, err := cl.Next(ctx, "w1", "empty", 10*time.Millisecond)
		if err != nil || j != nil {
			t.Fatalf("Next = %+v, %v, want no job", j, err)
		}
	})
}
