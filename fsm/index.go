package fsm

import (
	"errors"
	"log/slog"
	"slices"
	"sort"

	"github.com/workron/workron/store"
)

// The in-memory indexes over the stored jobs. They are derived data: rebuilt
// from the store on open and restore, and changed only inside Apply, so
// every node's indexes agree. Claims read them to find the next job without a
// scan; the reaper reads them to find expired leases.

// kind is a ready tree's key: a queue and a job type ("" for shell jobs).
type kind struct {
	queue string
	typ   string
}

// readyItem orders claimable jobs: higher priority first, then earlier run
// time, then submission order. It holds no Go pointers (see intern.go and
// TestReadyItemHoldsNoPointers): a backlog's items cost the garbage
// collector nothing to scan. Its strings are handles into the index's
// intern tables, and its job's id is jobID(seq) unless named.
type readyItem struct {
	prio  int
	runAt int64
	seq   uint64
	// heldBase is its held clock when it became due (flow.go's heldFor).
	heldBase int64
	kind     handle // in x.kinds
	key      handle // in x.keys: its concurrency key, 0 for none; see flow.go
	need     handle // in x.needs: 0 if the job asks for no resources or tags
	named    bool   // its id is x.names[seq], given by its submitter
}

func readyLess(a, b readyItem) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if a.runAt != b.runAt {
		return a.runAt < b.runAt
	}
	return a.seq < b.seq
}

func delayedLess(a, b readyItem) bool {
	if a.runAt != b.runAt {
		return a.runAt < b.runAt
	}
	return a.seq < b.seq
}

// leaseItem is one running attempt, ordered by deadline.
type leaseItem struct {
	deadline int64
	id       string
	lease    uint64
	worker   string
	res      store.Resources // what the attempt holds of its worker
	queue    string
	key      string // the job's concurrency key
}

func leaseLess(a, b leaseItem) bool {
	if a.deadline != b.deadline {
		return a.deadline < b.deadline
	}
	return a.id < b.id
}

type index struct {
	ready    map[kind]*itemTree[readyItem]
	delayed  *itemTree[readyItem]
	leases   *itemTree[leaseItem]
	leaseOf  map[string]leaseItem
	byWorker map[string]map[string]struct{}
	paused   map[string]bool
	counts   map[string]map[store.Status]int
	gx       *gangIndex   // capacity, reservations and open gangs
	wx       *workerIndex // each token's active worker ids; workercap.go
	flow     *flowIndex   // limits, running counts, key groups; flow.go
	// The intern tables of the pending jobs' items (intern.go).
	kinds *interns[kind]
	keys  *interns[string]
	needs *needs
	names names
}

func newIndex() *index {
	return &index{
		ready:    make(map[kind]*itemTree[readyItem]),
		delayed:  newItemTree(delayedAfter),
		leases:   newItemTree(leaseAfter),
		leaseOf:  make(map[string]leaseItem),
		byWorker: make(map[string]map[string]struct{}),
		paused:   make(map[string]bool),
		counts:   make(map[string]map[store.Status]int),
		gx:       newGangIndex(),
		wx:       newWorkerIndex(),
		flow:     newFlowIndex(),
		kinds:    newInterns[kind](),
		keys:     newInterns[string](),
		needs:    newNeeds(),
		names:    make(names),
	}
}

// hold is a pending job's item, taking a reference to each value it names
// in the intern tables; the index drops them (drop) with the item.
func (x *index) hold(j *store.JobHead) readyItem {
	it := readyItem{prio: j.Priority, runAt: j.RunAt, seq: j.Seq}
	it.kind = x.kinds.acquire(kind{j.Queue, j.Type})
	it.key = x.keys.acquire(j.Key)
	it.need = x.needs.acquire(j.Resources, j.Tags)
	if !generatedID(j.ID, j.Seq) {
		it.named = true
		x.names.acquire(j.Seq, j.ID)
	}
	return it
}

// drop releases what an item taken out of the index held.
func (x *index) drop(it readyItem) {
	x.kinds.release(it.kind)
	x.keys.release(it.key)
	x.needs.release(it.need)
	if it.named {
		x.names.release(it.seq)
	}
}

// find is the item of a pending job to look it up by, false if the index
// has none of its kind or key (and so not the job). It takes no reference.
func (x *index) find(j *store.JobHead) (readyItem, bool) {
	it := readyItem{prio: j.Priority, runAt: j.RunAt, seq: j.Seq}
	var ok bool
	if it.kind, ok = x.kinds.lookup(kind{j.Queue, j.Type}); !ok {
		return it, false
	}
	it.key, ok = x.keys.lookup(j.Key)
	return it, ok
}

// kindOf, keyOf, needOf and idOf read an item's values.
func (x *index) kindOf(it readyItem) kind    { return x.kinds.get(it.kind) }
func (x *index) keyOf(it readyItem) string   { return x.keys.get(it.key) }
func (x *index) needOf(it readyItem) *need   { return x.needs.get(it.need) }
func (x *index) queueOf(it readyItem) string { return x.kinds.get(it.kind).queue }

func (x *index) idOf(it readyItem) string {
	if it.named {
		return x.names[it.seq].id
	}
	return jobID(it.seq)
}

// count moves a job between status counters: from "" on create, to "" on delete.
func (x *index) count(queue string, from, to store.Status) {
	q := x.counts[queue]
	if q == nil {
		q = make(map[store.Status]int)
		x.counts[queue] = q
	}
	if from != "" {
		q[from]--
	}
	if to != "" {
		q[to]++
	}
}

// addPending indexes a pending job: ready if due at now, delayed otherwise.
func (x *index) addPending(j *store.JobHead, now int64) {
	it := x.hold(j)
	if j.RunAt > now {
		if old, ok := x.delayed.ReplaceOrInsert(it); ok {
			x.drop(old)
		}
		return
	}
	x.addReady(it)
}

func (x *index) readyTree(k kind) *itemTree[readyItem] {
	t := x.ready[k]
	if t == nil {
		t = newItemTree(readyAfter)
		x.ready[k] = t
	}
	return t
}

// removePending drops a pending job from whichever tree holds it.
func (x *index) removePending(j *store.JobHead) {
	it, ok := x.find(j)
	if !ok {
		return
	}
	if old, ok := x.delayed.Delete(it); ok {
		x.drop(old)
		return
	}
	x.removeReady(it)
}

// promote moves delayed jobs due at now into their ready trees.
func (x *index) promote(now int64) {
	for {
		it, ok := x.delayed.Min()
		if !ok || it.runAt > now {
			return
		}
		x.delayed.DeleteMin()
		x.addReady(it)
	}
}

// scheduledAfter lists, ascending, the seqs of the delayed jobs whose run
// time is after now: the pending jobs the API shows as scheduled.
func (x *index) scheduledAfter(now int64) []uint64 {
	var out []uint64
	x.delayed.AscendGreaterOrEqual(readyItem{runAt: now + 1}, func(it readyItem) bool {
		out = append(out, it.seq)
		return true
	})
	slices.Sort(out)
	return out
}

// nextDue is the earliest run time of a delayed job, 0 if there is none.
func (x *index) nextDue() int64 {
	if it, ok := x.delayed.Min(); ok {
		return it.runAt
	}
	return 0
}

// kinds lists the ready-tree keys a claim may draw from, queue by queue in
// the claim's order of preference.
func claimKinds(queues, types []string, shell bool) [][]kind {
	if len(queues) == 0 {
		queues = []string{DefaultQueue}
	}
	typs := append([]string(nil), types...)
	if shell || len(types) == 0 {
		typs = append(typs, "")
	}
	out := make([][]kind, 0, len(queues))
	for _, q := range queues {
		ks := make([]kind, 0, len(typs))
		for _, t := range typs {
			ks = append(ks, kind{q, t})
		}
		out = append(out, ks)
	}
	return out
}

// best returns the next job a claim over the given kinds would get: from
// the first unpaused queue that has one and is not at a limit (flow.go),
// the best item (readyLess) across its kinds, passing over jobs that fit
// rejects. Only open keys have jobs in the ready trees: their heads, and a
// head that does not fit has its group searched. A nil fit takes any job
// (Claimable's hint); bestFit gives the fit of one worker. Jobs that ask
// for nothing fit at once, so a queue of them is read at its head only.
// This is the one picker of the claim order: a claim and the long-polls'
// hints read it alike.
func (x *index) best(kinds [][]kind, fit func(*need) bool) (readyItem, bool) {
	return x.pick(kinds, fit, false)
}

// pick is best, or with fair the next job of the first queue's rotation
// over its keys (fair.go) when that queue has open keys' jobs.
func (x *index) pick(kinds [][]kind, fit func(*need) bool, fair bool) (readyItem, bool) {
	for _, ks := range kinds {
		if len(ks) == 0 || x.paused[ks[0].queue] || x.flow.queueHeld(ks[0].queue) {
			continue
		}
		if fair && x.hasKeys(ks) {
			if it, ok := x.fairPick(ks, fit); ok {
				return it, true
			}
			continue
		}
		var (
			top   readyItem
			found bool
		)
		for _, k := range ks {
			t := x.ready[k]
			if t == nil {
				continue
			}
			if it, ok := t.Min(); !ok {
				continue
			} else if it.need == 0 || fit == nil || fit(x.needOf(it)) {
				if !found || readyLess(it, top) {
					top, found = it, true
				}
				continue // the common case: the head fits
			}
			t.Ascend(func(it readyItem) bool {
				if found && !readyLess(it, top) {
					return false // nothing further in this tree beats top
				}
				if fit(x.needOf(it)) {
					top, found = it, true
					return false
				}
				if it.key != 0 {
					// The rest of its key's group, after the head.
					x.flow.groups[gkey{k, x.keyOf(it)}].AscendGreaterOrEqual(it, func(g readyItem) bool {
						if found && !readyLess(g, top) {
							return false
						}
						if g.seq != it.seq && fit(x.needOf(g)) {
							top, found = g, true
							return false
						}
						return true
					})
				}
				return true
			})
		}
		if found {
			return top, true
		}
	}
	return readyItem{}, false
}

// dueDelayed reports whether a delayed job of one of the kinds is due at now.
func (x *index) dueDelayed(kinds [][]kind, now int64) bool {
	want := make(map[kind]bool)
	for _, ks := range kinds {
		for _, k := range ks {
			if !x.paused[k.queue] {
				want[k] = true
			}
		}
	}
	found := false
	x.delayed.Ascend(func(it readyItem) bool {
		if it.runAt > now {
			return false
		}
		found = want[x.kindOf(it)]
		return !found
	})
	return found
}

func (x *index) addLease(j *store.JobHead) {
	it := leaseItem{deadline: j.LeaseDeadline, id: j.ID, lease: j.Lease, worker: j.WorkerID, res: j.Resources, queue: j.Queue, key: j.Key}
	if old, ok := x.leaseOf[j.ID]; ok {
		x.leases.Delete(old)
		x.gx.use(old.worker, old.res, -1)
		if old.queue != it.queue || old.key != it.key {
			x.run(old.queue, old.key, -1)
			x.run(it.queue, it.key, 1)
		}
	} else {
		x.run(it.queue, it.key, 1) // a renewal is not a new attempt
	}
	x.gx.use(j.WorkerID, j.Resources, 1)
	x.leases.ReplaceOrInsert(it)
	x.leaseOf[j.ID] = it
	w := x.byWorker[j.WorkerID]
	if w == nil {
		w = make(map[string]struct{})
		x.byWorker[j.WorkerID] = w
	}
	w[j.ID] = struct{}{}
}

func (x *index) removeLease(id string) {
	old, ok := x.leaseOf[id]
	if !ok {
		return
	}
	x.leases.Delete(old)
	delete(x.leaseOf, id)
	x.gx.use(old.worker, old.res, -1)
	x.run(old.queue, old.key, -1)
	if w := x.byWorker[old.worker]; w != nil {
		delete(w, id)
		if len(w) == 0 {
			delete(x.byWorker, old.worker)
		}
	}
}

// workerJobs lists the ids of the jobs a worker holds leases on, sorted so
// that callers iterate deterministically.
func (x *index) workerJobs(worker string) []string {
	w := x.byWorker[worker]
	out := make([]string, 0, len(w))
	for id := range w {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// expired lists up to limit leases whose deadline is at or before now.
func (x *index) expired(now int64, limit int) []leaseItem {
	var out []leaseItem
	x.leases.Ascend(func(it leaseItem) bool {
		if it.deadline > now || len(out) >= limit {
			return false
		}
		out = append(out, it)
		return true
	})
	return out
}

// rebuildIndex fills a fresh index from the store: what a node's start and
// a snapshot restore wait for. It reads the counts of jobs by queue and
// status from the store's search index and the heads of the jobs the index
// holds (pending, reserved, leased: store.LiveStatuses) from the store's
// bucket of them, one pass over dense pages, so no job's record is read:
// at 10,000,000 jobs, 7.5 % of them live, about 80 MB. Without the search
// index (a build that keeps none) it reads every job's head, in key order
// (rebuildFromHeads). Before reading them it has the store read their
// pages ahead (readAhead); logger says what that did, or why it failed.
func rebuildIndex(tx *store.Tx, now int64, logger *slog.Logger) (*index, error) {
	return rebuild(tx, now, false, logger)
}

// rebuild is rebuildIndex; scan reads every job's head as before the
// search index counted them (tests compare the two).
func rebuild(tx *store.Tx, now int64, scan bool, logger *slog.Logger) (*index, error) {
	x := newIndex()
	for _, q := range tx.PausedQueues() {
		x.paused[q] = true
	}
	if err := x.rebuildFlow(tx, now); err != nil {
		return nil, err
	}
	var counts map[string]map[store.Status]int
	err := store.ErrNotIndexed
	if !scan {
		readAhead(logger, "the counts and the live jobs' heads", tx.ReadAheadStart)
		counts, err = tx.JobCounts()
	}
	switch {
	case err == nil:
		x.counts = counts
		x.leaseOf = make(map[string]leaseItem, leased(counts, int(min(tx.LastSeq(), maxLeaseHint))))
		err = tx.ForEachLiveHead(func(j *store.JobHead) error {
			x.addJob(j, now)
			return nil
		})
	case errors.Is(err, store.ErrNotIndexed):
		err = tx.ForEachJobHead(func(j *store.JobHead) error {
			x.count(j.Queue, "", j.Status)
			x.addJob(j, now)
			return nil
		})
	}
	if err != nil {
		return nil, err
	}
	if err := x.rebuildWorkers(tx); err != nil {
		return nil, err
	}
	if err := x.gx.rebuild(tx); err != nil {
		return nil, err
	}
	clear(x.flow.reopened)
	return x, nil
}

// maxLeaseHint bounds the size leaseOf is made at a rebuild (leased), so
// that a count of leased jobs read from a damaged index cannot ask for a
// map of any size: past it the map grows as it is filled.
const maxLeaseHint = 1 << 24

// leased is how many jobs counts says are leased, at most bound (the jobs
// there have been, at most maxLeaseHint): the size leaseOf will have after
// a rebuild, made so at once rather than grown a doubling at a time (a
// twentieth of a warm start's rebuild at 750,000 leased jobs went to the
// growing).
func leased(counts map[string]map[store.Status]int, bound int) int {
	n := 0
	for _, byStatus := range counts {
		for st, c := range byStatus {
			if !st.Leased() || c <= 0 {
				continue
			}
			if c >= bound-n {
				return bound
			}
			n += c
		}
	}
	return n
}

// readAhead has the store read pages the rebuild reads next (what says
// which; attrs go to the log line) into the page cache, in file order,
// before the rebuild reads them one by one in key order: on a cold cache
// that is a read a page at random offsets (docs/DESIGN.md, "A start"),
// and maps them into bbolt's mapping, so that the rebuild's first touch
// of each is not a fault of its own, warm cache or cold. It only warms
// the cache and the mapping, so a failure is logged and the rebuild goes
// on without it (a kernel that refuses the mapping, at debug level).
func readAhead(logger *slog.Logger, what string, fn func() (store.ReadAhead, error), attrs ...any) {
	ra, err := fn()
	if err != nil {
		logger.Warn("reading pages ahead failed; reading them without", append(append([]any{"of", what}, attrs...), "err", err)...)
		return
	}
	logger.Debug("read pages ahead", append(append([]any{"of", what}, attrs...), "cached", ra.Cached, "leaves", ra.Leaves,
		"branches", ra.Branches, "runs", ra.Runs, "bytes", ra.Bytes, "mapped", ra.Mapped)...)
	if ra.MapErr != nil {
		logger.Debug("mapping pages ahead stopped; bbolt faults in the rest", append(append([]any{"of", what}, attrs...), "err", ra.MapErr)...)
	}
}

// addJob indexes a stored job at a rebuild (counts apart): the pending,
// leased and reserved ones.
func (x *index) addJob(j *store.JobHead, now int64) {
	switch {
	case j.Status == store.StatusPending:
		x.addPending(j, now)
	case j.Status.Leased():
		x.addLease(j)
	case j.Status == store.StatusReserved:
		x.addReserved(j)
	}
}
