package leader

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/workron/workron/fsm"
	"github.com/workron/workron/store"
)

// AdmissionConfig configures an Admission.
type AdmissionConfig struct {
	// Interval is how often admission places waiting gangs and checks the
	// gang and worker timeouts below. Defaults to 1s.
	Interval time.Duration
	// ReserveTimeout is how long a gang's reservation may wait for every
	// worker to claim its task before it rolls back. Defaults to 30s.
	ReserveTimeout time.Duration
	// DrainTimeout is how long a draining gang waits for its preempted
	// tasks to be acknowledged before it force-drains them. Defaults to 60s.
	DrainTimeout time.Duration
	// WorkerOfflineAfter is how long a new leader waits before it declares
	// any worker offline (Liveness decides which). Required; Leadership
	// defaults it to 3 Reaper.LeaseTTLs, and the node sets it to the API's.
	WorkerOfflineAfter time.Duration
	// ForgetWorkersAfter is how long a worker may stay silent before the
	// leader forgets it (removes its record, as DELETE /workers/{id} does),
	// if it holds no lease or reservation then; never before it counts as
	// offline (WorkerOfflineAfter). 0 never forgets. Defaults to 24h.
	ForgetWorkersAfter time.Duration

	// Proposer, State and Liveness are required.
	Proposer Proposer
	State    AdmissionState
	Liveness Liveness
	// Logger defaults to discarding; Now to time.Now.
	Logger *slog.Logger
	Now    func() time.Time
}

// DefaultAdmissionConfig returns the defaults of an AdmissionConfig's
// timings (WorkerOfflineAfter has none of its own).
func DefaultAdmissionConfig() AdmissionConfig {
	return AdmissionConfig{Interval: time.Second, ReserveTimeout: 30 * time.Second, DrainTimeout: time.Minute, ForgetWorkersAfter: 24 * time.Hour}
}

// Validate names the first missing or out-of-bounds field.
func (c *AdmissionConfig) Validate() error {
	switch {
	case c.Proposer == nil || c.State == nil || c.Liveness == nil:
		return errors.New("leader: AdmissionConfig needs Proposer, State and Liveness")
	case c.Interval <= 0:
		return fmt.Errorf("leader: AdmissionConfig.Interval must be positive, got %s", c.Interval)
	case c.ReserveTimeout <= 0:
		return fmt.Errorf("leader: AdmissionConfig.ReserveTimeout must be positive, got %s", c.ReserveTimeout)
	case c.DrainTimeout <= 0:
		return fmt.Errorf("leader: AdmissionConfig.DrainTimeout must be positive, got %s", c.DrainTimeout)
	case c.WorkerOfflineAfter <= 0:
		return fmt.Errorf("leader: AdmissionConfig.WorkerOfflineAfter must be positive, got %s", c.WorkerOfflineAfter)
	case c.ForgetWorkersAfter < 0:
		return fmt.Errorf("leader: AdmissionConfig.ForgetWorkersAfter must not be negative (0 never forgets), got %s", c.ForgetWorkersAfter)
	}
	return nil
}

// Admission is the leader's loop for gangs and workers. Each pass it rolls
// back reservations not claimed within ReserveTimeout, force-drains drains
// not acknowledged within DrainTimeout, declares offline the silent workers
// that hold leases or reservations, forgets the workers silent for
// ForgetWorkersAfter that hold nothing, and places waiting gangs on active
// workers. It decides (it reads the clock and knows which workers poll this
// node) and only proposes: the FSM re-checks each command against the state
// of the moment, and every command names the gang's epoch, so a decision
// that came late changes nothing. A new leader waits one full timeout before
// any of the first four, so workers and gangs whose news was lost to the
// election are not punished for it. A pass with nothing to do proposes
// nothing: an idle cluster stays idle.
type Admission struct {
	cfg   AdmissionConfig
	since time.Time // when leadership began; zero: long ago
	run   runner
}

// NewAdmission checks cfg and returns an Admission, not yet started.
func NewAdmission(cfg AdmissionConfig) (*Admission, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Logger, cfg.Now = orDiscard(cfg.Logger), orNow(cfg.Now)
	return &Admission{cfg: cfg}, nil
}

// Start runs admission until ctx ends or Stop; its timeouts count from
// when leadership began (see Leadership) or from Start.
func (a *Admission) Start(ctx context.Context) {
	if a.since.IsZero() {
		a.since = time.Now()
	}
	a.run.start(ctx, func(ctx context.Context) {
		every(ctx, a.cfg.Interval, func() { a.runOnce(ctx) })
	})
}

// Stop ends admission and waits for its pass in progress. Safe twice.
func (a *Admission) Stop() { a.run.stop() }

// runOnce makes one pass and returns how many commands the FSM accepted.
// It reads only the workers it may act on (silent ones, and active ones
// when a gang waits), from the FSM's in-memory records (WorkersWhere): a
// pass decodes no worker record, and an idle one lists none.
func (a *Admission) runOnce(ctx context.Context) int {
	s := a.cfg
	led := time.Since(a.since)
	now := s.Now()
	gangs := s.State.OpenGangs()
	n := a.timeouts(ctx, gangs, now, led)
	if led >= s.WorkerOfflineAfter {
		busy := holding(s.State.RunningByWorker(), gangs)
		silent := s.State.WorkersWhere(func(w *store.Worker) bool { return !s.Liveness.Active(w, now) })
		n += a.offline(ctx, busy, silent, now)
		n += a.forget(ctx, busy, silent, now)
	}
	if n > 0 {
		return n // the state moved: place on the next pass, from fresh reads
	}
	return a.place(ctx, gangs, now)
}

// timeouts rolls back stale reservations and force-drains stale drains.
func (a *Admission) timeouts(ctx context.Context, gangs []store.Gang, now time.Time, led time.Duration) int {
	s := a.cfg
	n := 0
	for _, g := range gangs {
		var cmd fsm.Cmd
		switch {
		case g.Status == store.GangReserved && led >= s.ReserveTimeout && now.Sub(time.Unix(0, g.ReservedAt)) >= s.ReserveTimeout:
			cmd = fsm.Cmd{Op: fsm.OpUnreserveGang, Gang: &fsm.GangRef{GangID: g.ID, Epoch: g.Epoch}}
		case g.Status == store.GangDraining && led >= s.DrainTimeout && now.Sub(time.Unix(0, g.DrainAt)) >= s.DrainTimeout:
			cmd = fsm.Cmd{Op: chunkedOp(ctx, a.cfg.Proposer, fsm.OpForceDrain, fsm.OpForceDrainChunked), Gang: &fsm.GangRef{GangID: g.ID, Epoch: g.Epoch}}
		default:
			continue
		}
		if _, err := propose(ctx, s.Proposer, cmd); err != nil {
			s.Logger.Debug("admission: timeout not applied", "gang", g.ID, "op", cmd.Op, "err", err)
			continue
		}
		s.Logger.Warn("gang timed out", "gang", g.ID, "status", g.Status, "epoch", g.Epoch, "op", cmd.Op)
		n++
	}
	return n
}

// holding is the set of workers that hold a lease (running counts them)
// or a gang's reservation.
func holding(running map[string]int, gangs []store.Gang) map[string]bool {
	out := make(map[string]bool, len(running))
	for w, n := range running {
		out[w] = n > 0
	}
	for _, g := range gangs {
		if g.Status == store.GangReserved || g.Status == store.GangRunning {
			for _, w := range g.Workers {
				out[w] = true
			}
		}
	}
	return out
}

// offline declares offline each silent worker (of silent) that holds a
// lease or a reservation (busy); a silent worker that holds nothing costs
// nothing.
func (a *Admission) offline(ctx context.Context, busy map[string]bool, silent []*store.Worker, now time.Time) int {
	s := a.cfg
	n := 0
	for _, w := range silent {
		if s.Liveness.Active(w, now) || w.Offline() || !busy[w.ID] {
			continue
		}
		cmd := fsm.Cmd{Op: chunkedOp(ctx, a.cfg.Proposer, fsm.OpWorkerOffline, fsm.OpWorkerOfflineChunked), WorkerOffline: &fsm.WorkerOffline{WorkerID: w.ID, SeenAt: w.LastHeartbeat, Draw: draw()}}
		res, err := propose(ctx, s.Proposer, cmd)
		if err != nil {
			s.Logger.Debug("admission: offline not applied", "worker", w.ID, "err", err)
			continue
		}
		s.Logger.Warn("worker offline", "worker", w.ID, "last_seen", s.Liveness.LastSeen(w), "leases_ended", len(res.Jobs))
		n++
	}
	return n
}

// forget forgets each worker (of silent) silent for ForgetWorkersAfter
// that holds nothing (busy): GET /workers stops listing it. The FSM
// re-checks both: a worker heard from since, or holding a lease by then,
// is kept.
func (a *Admission) forget(ctx context.Context, busy map[string]bool, silent []*store.Worker, now time.Time) int {
	s := a.cfg
	if s.ForgetWorkersAfter <= 0 {
		return 0
	}
	n := 0
	for _, w := range silent {
		if busy[w.ID] || s.Liveness.Active(w, now) || now.Sub(s.Liveness.LastSeen(w)) < s.ForgetWorkersAfter {
			continue
		}
		cmd := fsm.Cmd{Op: fsm.OpForgetWorker, ForgetWorker: &fsm.ForgetWorker{WorkerID: w.ID, SeenAt: w.LastHeartbeat}}
		if _, err := propose(ctx, s.Proposer, cmd); err != nil {
			s.Logger.Debug("admission: forget not applied", "worker", w.ID, "err", err)
			continue
		}
		s.Logger.Info("worker forgotten", "worker", w.ID, "last_seen", s.Liveness.LastSeen(w), "after", s.ForgetWorkersAfter)
		n++
	}
	return n
}

// candidate is a worker as placement sees it.
type candidate struct {
	id     string
	free   store.Resources
	tags   []string
	queues []string
	busy   int // running and reserved jobs
	slots  int // 0: no slot limit
}

// placement is one reservation to propose.
type placement struct {
	gang    string
	epoch   uint64
	workers []string
}

// place proposes a reservation for every waiting gang that fits now, on
// the active workers; it lists them only when a gang waits.
func (a *Admission) place(ctx context.Context, gangs []store.Gang, now time.Time) int {
	s := a.cfg
	var waiting []store.Gang
	paused := make(map[string]bool)
	for _, q := range s.State.Queues() {
		paused[q.Name] = q.Paused
	}
	for _, g := range gangs {
		if g.Status == store.GangBlocked && g.RunAt <= now.UnixNano() && !paused[g.Queue] {
			waiting = append(waiting, g)
		}
	}
	if len(waiting) == 0 {
		return 0
	}
	usage := s.State.WorkerUsage()
	busy := s.State.RunningByWorker()
	for _, g := range gangs {
		if g.Status == store.GangReserved {
			for _, w := range g.Workers {
				busy[w]++
			}
		}
	}
	var cands []candidate
	for _, w := range s.State.WorkersWhere(func(w *store.Worker) bool { return s.Liveness.Active(w, now) }) {
		cands = append(cands, candidate{id: w.ID, free: w.Capacity().Add(usage[w.ID], -1), tags: w.Tags,
			queues: w.Queues, busy: busy[w.ID], slots: w.Slots})
	}
	n := 0
	for _, p := range placeGangs(waiting, cands) {
		cmd := fsm.Cmd{Op: fsm.OpReserveGang, ReserveGang: &fsm.ReserveGang{GangID: p.gang, Epoch: p.epoch, Workers: p.workers}}
		if _, err := propose(ctx, s.Proposer, cmd); err != nil {
			s.Logger.Debug("admission: reservation not applied", "gang", p.gang, "err", err)
			continue
		}
		s.Logger.Info("gang reserved", "gang", p.gang, "epoch", p.epoch+1, "workers", p.workers)
		n++
	}
	return n
}

// placeGangs picks workers for waiting gangs: largest gangs first, then
// higher priority, then older; each gang on distinct workers that fit one
// task each, preferring the tightest fit (least free VRAM, then memory) so
// large workers stay free for large tasks. A gang that does not fit now is
// passed over; smaller ones behind it may still be placed. What is picked is
// taken off the candidates' free capacity, so one pass never double-books.
func placeGangs(waiting []store.Gang, cands []candidate) []placement {
	gangs := slices.Clone(waiting)
	slices.SortFunc(gangs, func(x, y store.Gang) int {
		return cmp.Or(cmp.Compare(y.Size, x.Size), cmp.Compare(y.Priority, x.Priority), cmp.Compare(x.Seq, y.Seq))
	})
	cands = slices.Clone(cands)
	slices.SortFunc(cands, func(x, y candidate) int {
		return cmp.Or(cmp.Compare(x.free.VRAMMB, y.free.VRAMMB), cmp.Compare(x.free.MemoryMB, y.free.MemoryMB), cmp.Compare(x.id, y.id))
	})
	var out []placement
	for _, g := range gangs {
		var picked []int
		for i := range cands {
			if len(picked) == g.Size {
				break
			}
			if takesGang(&cands[i], &g) {
				picked = append(picked, i)
			}
		}
		if len(picked) < g.Size {
			continue
		}
		p := placement{gang: g.ID, epoch: g.Epoch}
		for _, i := range picked {
			c := &cands[i]
			c.free = c.free.Add(g.Resources, -1)
			c.busy++
			p.workers = append(p.workers, c.id)
		}
		out = append(out, p)
	}
	return out
}

// takesGang reports whether a worker could run one task of g now.
func takesGang(c *candidate, g *store.Gang) bool {
	switch {
	case c.slots > 0 && c.busy >= c.slots:
		return false
	case len(c.queues) > 0 && !slices.Contains(c.queues, g.Queue):
		return false
	case !store.HasTags(c.tags, g.Tags):
		return false
	}
	return g.Resources.IsZero() || g.Resources.Within(c.free)
}
