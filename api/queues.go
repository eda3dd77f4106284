package api

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// Queue list limits: GET /queues answers a page of at most
// MaxPageLimit queues (DefaultPageLimit without ?limit=), in name order,
// with a next_cursor while more follow; each queue lists at most
// MaxQueuePausesListed pauses, and says how many more are in force.
const MaxQueuePausesListed = 20

// handleQueues lists the queues with their jobs by status and their
// limits (GET /queues?limit=&cursor=): those that hold jobs, are paused or
// have limits, a page at a time by name. Only the page's queues are
// looked at in detail.
func (s *Server) handleQueues(w http.ResponseWriter, r *http.Request) {
	limit, after, err := pageQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.now()
	limited := s.flowQueues(now)
	names := mergeSorted(s.state.QueueNames(), limited)
	i, _ := slices.BinarySearch(names, after)
	if i < len(names) && after != "" && names[i] == after {
		i++
	}
	page := names[i:min(i+limit, len(names))]
	oldest := s.state.OldestReady(now)
	out := wire.QueueList{Queues: make([]wire.Queue, 0, len(page))}
	for _, name := range page {
		q, _ := s.state.QueueOf(name)
		out.Queues = append(out.Queues, s.queueShown(q, oldest, now, limited))
	}
	if i+len(page) < len(names) {
		out.NextCursor = nextCursor(page[len(page)-1])
	}
	writeJSON(w, http.StatusOK, out)
}

// queueShown is a queue as GET /queues shows it; limited lists the queues
// whose flow it shows (flowQueues).
func (s *Server) queueShown(q fsm.QueueStats, oldest map[string]int64, now int64, limited []string) wire.Queue {
	qi := queueWire(q, oldest, now)
	if _, ok := slices.BinarySearch(limited, q.Name); ok {
		qi.Limits = flowWire(s.state.QueueLimits(q.Name))
	}
	return qi
}

// mergeSorted is the sorted union of two sorted lists of names.
func mergeSorted(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || len(a) > 0 && a[0] < b[0]:
			out, a = append(out, a[0]), a[1:]
		case len(a) == 0 || b[0] < a[0]:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return out
}

// flowQueues lists the queues whose flow GET /queues and the metrics show:
// those with limits or with a pause in force at now, by name.
func (s *Server) flowQueues(now int64) []string {
	out := s.state.LimitedQueues()
	for _, q := range s.state.RateLimitedQueues(now) {
		if !slices.Contains(out, q) {
			out = append(out, q)
		}
	}
	slices.Sort(out)
	return out
}

// handleGetQueue shows one queue (GET /queues/{name}); 404 for a queue no
// job has used, none has paused and that has no limits.
func (s *Server) handleGetQueue(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := validName("name", name); err != nil {
		s.fail(w, r, err)
		return
	}
	q, ok := s.queue(name)
	if !ok {
		s.fail(w, r, refuse(wire.CodeNotFound, "queue %s: no job has used it and it has no limits", name))
		return
	}
	writeJSON(w, http.StatusOK, q)
}

// queue is one queue as the API shows it (GET /queues lists it), and
// whether it exists; it looks at that queue alone.
func (s *Server) queue(name string) (wire.Queue, bool) {
	now := s.now()
	limited := s.flowQueues(now)
	q, ok := s.state.QueueOf(name)
	if _, lim := slices.BinarySearch(limited, name); !ok && !lim {
		return wire.Queue{Name: name, Counts: map[string]int{}}, false
	}
	return s.queueShown(q, s.state.OldestReady(now), now, limited), true
}

// queueWire shows a queue's stats; counts is {} (never null) for a queue
// with no jobs.
func queueWire(q fsm.QueueStats, oldest map[string]int64, now int64) wire.Queue {
	c := make(map[string]int, len(q.Counts))
	for st, n := range q.Counts {
		c[string(st)] = n
	}
	qi := wire.Queue{Name: q.Name, Paused: q.Paused, Counts: c}
	if at, ok := oldest[q.Name]; ok {
		qi.OldestPendingSeconds = max(time.Duration(now-at).Seconds(), 0)
	}
	return qi
}

// handlePause and handleResume stop and restart claims from a queue
// (POST /queues/{name}/pause, /resume). A queue may be paused before any
// job uses it; GET /queues then lists it, paused, with no counts. Resume
// also lifts the queue's rate-limit pauses (its own and its keys', as
// DELETE /queues/{name}/pauses does) once every node runs
// fsm.ProtocolPauses, in the same log entry: a resumed queue runs.
func (s *Server) handlePause(w http.ResponseWriter, r *http.Request) { s.pause(w, r, true) }

func (s *Server) handleResume(w http.ResponseWriter, r *http.Request) { s.pause(w, r, false) }

func (s *Server) pause(w http.ResponseWriter, r *http.Request, paused bool) {
	name := r.PathValue("name")
	if err := validName("name", name); err != nil {
		s.fail(w, r, err)
		return
	}
	cmd := fsm.Cmd{Op: fsm.OpPauseQueue, Queue: &fsm.PauseQueue{Name: name, Paused: paused}}
	var err error
	if !paused && s.node.AwaitProtocol(r.Context()) >= fsm.ProtocolPauses {
		lift := fsm.Cmd{Op: fsm.OpLiftPauses, LiftPauses: &fsm.LiftPauses{Queue: name, All: true}}
		var res []fsm.Result
		if res, err = s.proposeTogether(r.Context(), []fsm.Cmd{cmd, lift}); err == nil {
			err = firstErr(res)
		}
	} else {
		_, err = s.propose(r.Context(), cmd)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q, _ := s.queue(name)
	q.Paused = paused
	writeJSON(w, http.StatusOK, q)
}

// handleSetQueueLimits sets (replaces) a queue's flow-control limits
// (PUT /queues/{name}); the queue needs no jobs yet. It answers with the
// queue as GET /queues/{name} shows it.
func (s *Server) handleSetQueueLimits(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := validName("name", name); err != nil {
		s.fail(w, r, err)
		return
	}
	var req wire.QueueLimits
	if err := decodeBody(w, r, s.cfg.MaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	l, err := queueLimits(&req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cmd := fsm.Cmd{Op: fsm.OpSetQueueLimits, QueueLimits: &fsm.SetQueueLimits{Name: name, Limits: l}}
	if _, err := s.propose(r.Context(), cmd); err != nil {
		s.fail(w, r, err)
		return
	}
	q, _ := s.queue(name)
	writeJSON(w, http.StatusOK, q)
}

// flowWire shows a queue's limits and what they hold back.
func flowWire(fl fsm.QueueFlow) *wire.QueueFlow {
	l := fl.Limits
	out := &wire.QueueFlow{
		QueueLimits: wire.QueueLimits{Concurrency: wire.Limit(l.Concurrency), KeyConcurrency: wire.Limit(l.KeyConcurrency),
			Burst: wire.Limit(l.Burst), KeyBurst: wire.Limit(l.KeyBurst), KeyWeights: l.KeyWeights},
		Running: fl.Running, KeysAtLimit: fl.KeysFull, KeysRateLimited: fl.KeysRateLimited, Waiting: fl.Held,
	}
	if !l.Rate.IsZero() {
		out.Rate = wire.FormatRate(l.Rate.Count, time.Duration(l.Rate.Per))
	}
	if !l.KeyRate.IsZero() {
		out.KeyRate = wire.FormatRate(l.KeyRate.Count, time.Duration(l.KeyRate.Per))
	}
	out.RateLimitPausesQueue = l.PauseQueue
	if l.MaxPause != 0 {
		out.MaxPause = time.Duration(l.MaxPause).String()
	}
	out.RateLimitedUntil = optTime(fl.RateLimitedUntil)
	for _, p := range fl.Paused[:min(len(fl.Paused), MaxQueuePausesListed)] {
		out.Paused = append(out.Paused, keyPauseWire(p))
	}
	out.PausedMore = max(len(fl.Paused)-MaxQueuePausesListed, 0)
	return out
}

// limitWaiting says which flow-control limit holds a due pending job back
// (GET /jobs/{id}'s "waiting"), "" if none does.
func (s *Server) limitWaiting(j *store.Job) string {
	return s.state.HeldBy(j, s.now())
}

// handlePauses lists the rate-limit pauses in force (GET /pauses?limit=N,
// default and at most MaxListLimit), by queue then key, from ?cursor= (a
// reply's next_cursor) on.
func (s *Server) handlePauses(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := MaxListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListLimit {
			s.fail(w, r, invalid("limit", "must be a number from 1 to %d, got %q", MaxListLimit, v))
			return
		}
		limit = n
	}
	after, err := pauseCursor(q.Get("cursor"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ps, total := s.state.Pauses(s.now(), after, limit+1)
	out := wire.PauseList{Pauses: make([]wire.Pause, 0, min(len(ps), limit)), Total: total}
	for i, p := range ps {
		if i == limit {
			last := ps[i-1]
			out.NextCursor = nextCursor(last.Queue + "\x00" + last.Key)
			break
		}
		out.Pauses = append(out.Pauses, wire.Pause{Queue: p.Queue, KeyPause: keyPauseWire(p.KeyPause)})
	}
	writeJSON(w, http.StatusOK, out)
}

// pauseCursor reads GET /pauses' cursor: the queue and key of the last
// pause of the page before; nil for none.
func pauseCursor(v string) (*fsm.QueuePause, error) {
	if v == "" {
		return nil, nil
	}
	_, after, err := pageQuery(url.Values{"cursor": {v}})
	if err != nil {
		return nil, err
	}
	queue, key, ok := strings.Cut(after, "\x00")
	if !ok {
		return nil, invalid("cursor", "%q is not a cursor of GET /pauses", v)
	}
	return &fsm.QueuePause{Queue: queue, KeyPause: fsm.KeyPause{Key: key}}, nil
}

// handleLiftPauses ends a queue's rate-limit pauses before their time
// (DELETE /queues/{name}/pauses): its own and every key's, or with
// ?key=K that key's only. An admin's pause (POST /queues/{name}/pause)
// stays. Lifting what is not paused lifts nothing and is no error.
func (s *Server) handleLiftPauses(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := validName("name", name); err != nil {
		s.fail(w, r, err)
		return
	}
	lift := &fsm.LiftPauses{Queue: name, All: true}
	if q := r.URL.Query(); q.Has("key") {
		key := q.Get("key")
		if key == "" || len(key) > wire.MaxConcurrencyKeyBytes {
			s.fail(w, r, invalid("key", "must be 1 to %d bytes", wire.MaxConcurrencyKeyBytes))
			return
		}
		lift.Key, lift.All = key, false
	}
	res, err := s.propose(r.Context(), fsm.Cmd{Op: fsm.OpLiftPauses, LiftPauses: lift})
	if err == nil {
		err = res.Err
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q, _ := s.queue(name)
	writeJSON(w, http.StatusOK, wire.PausesLifted{Lifted: res.Deleted, Queue: q})
}

// firstErr is the first rejection among results, nil if none.
func firstErr(res []fsm.Result) error {
	for _, r := range res {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// keyPauseWire shows a pause.
func keyPauseWire(p fsm.KeyPause) wire.KeyPause {
	return wire.KeyPause{Key: p.Key, Until: time.Unix(0, p.Until).UTC(), Reason: p.Reason}
}
