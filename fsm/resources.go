package fsm

import (
	"slices"
	"sort"

	"github.com/workron/workron/store"
)

// Placement by resources. A job may ask for resources (VRAM, memory, CPU,
// slots) and tags; a worker offers resources and tags when it registers.
// What a worker has free is its offer minus what its running and reserved
// jobs ask for. These indexes are derived data like the others: rebuilt from
// the store on open and restore, changed only inside Apply.

// need is what a job asks of its worker; nil when it asks for nothing, so
// that claiming such a job costs no more than it did before resources.
type need struct {
	res  store.Resources
	tags []string
}

func needOf(res store.Resources, tags []string) *need {
	if res.IsZero() && len(tags) == 0 {
		return nil
	}
	return &need{res: res, tags: tags}
}

// offer is what a worker registered with.
type offer struct {
	res  store.Resources
	tags []string
}

// reservedItem is a gang task held for one worker.
type reservedItem struct {
	id     string
	seq    uint64
	kind   kind
	worker string
	res    store.Resources
}

// gangIndex keeps what placement reads: each worker's offer and use, the
// reservations per worker, and the gangs that are not finished.
type gangIndex struct {
	offers     map[string]offer
	used       map[string]store.Resources
	reserved   map[string]map[string]reservedItem // worker -> job id -> item
	reservedOf map[string]reservedItem            // job id -> item
	open       map[string]store.Gang              // gang id -> gang, unfinished only
}

func newGangIndex() *gangIndex {
	return &gangIndex{
		offers:     make(map[string]offer),
		used:       make(map[string]store.Resources),
		reserved:   make(map[string]map[string]reservedItem),
		reservedOf: make(map[string]reservedItem),
		open:       make(map[string]store.Gang),
	}
}

// rebuild reads the unfinished gangs (jobs are indexed by rebuildIndex,
// workers by rebuildWorkers).
func (g *gangIndex) rebuild(tx *store.Tx) error {
	return tx.ForEachGang(func(gg *store.Gang) error {
		g.setGang(gg)
		return nil
	})
}

func (g *gangIndex) setWorker(w *store.Worker) {
	g.offers[w.ID] = offer{res: w.Capacity(), tags: slices.Clone(w.Tags)}
}

// forgetWorker drops the offer of a worker that holds nothing (see
// applier.forgetWorker), as a rebuild from the store would.
func (g *gangIndex) forgetWorker(id string) { delete(g.offers, id) }

func (g *gangIndex) setGang(gg *store.Gang) {
	if gg.Status.Finished() {
		delete(g.open, gg.ID)
		return
	}
	c := *gg
	c.Tasks, c.Workers, c.Tags = slices.Clone(gg.Tasks), slices.Clone(gg.Workers), slices.Clone(gg.Tags)
	g.open[gg.ID] = c
}

// use adds (sign +1) or removes (-1) what a job holds of a worker.
func (g *gangIndex) use(worker string, res store.Resources, sign int) {
	if res.IsZero() {
		return
	}
	u := g.used[worker].Add(res, sign)
	if u.IsZero() {
		delete(g.used, worker)
		return
	}
	g.used[worker] = u
}

// fits reports whether a job that asks for n fits what worker has free.
func (x *index) fits(worker string, n *need) bool {
	if n == nil {
		return true
	}
	o := x.gx.offers[worker]
	if !store.HasTags(o.tags, n.tags) {
		return false
	}
	return n.res.IsZero() || x.gx.used[worker].Add(n.res, 1).Within(o.res)
}

// bestFit is best for one worker: it passes over jobs that do not fit what
// the worker has free.
func (x *index) bestFit(kinds [][]kind, worker string) (readyItem, bool) {
	return x.pick(kinds, x.fitOf(worker), false)
}

// fitOf is the fit of one worker: whether a job's needs fit what it has
// free.
func (x *index) fitOf(worker string) func(*need) bool {
	return func(n *need) bool { return x.fits(worker, n) }
}

func (x *index) addReserved(j *store.JobHead) {
	it := reservedItem{id: j.ID, seq: j.Seq, kind: kind{j.Queue, j.Type}, worker: j.WorkerID, res: j.Resources}
	x.removeReserved(j.ID)
	m := x.gx.reserved[it.worker]
	if m == nil {
		m = make(map[string]reservedItem)
		x.gx.reserved[it.worker] = m
	}
	m[it.id] = it
	x.gx.reservedOf[it.id] = it
	x.gx.use(it.worker, it.res, 1)
}

func (x *index) removeReserved(id string) {
	it, ok := x.gx.reservedOf[id]
	if !ok {
		return
	}
	delete(x.gx.reservedOf, id)
	if m := x.gx.reserved[it.worker]; m != nil {
		delete(m, id)
		if len(m) == 0 {
			delete(x.gx.reserved, it.worker)
		}
	}
	x.gx.use(it.worker, it.res, -1)
}

// reservedFor lists the tasks reserved for worker, oldest first.
func (x *index) reservedFor(worker string) []reservedItem {
	m := x.gx.reserved[worker]
	if len(m) == 0 {
		return nil // the common case: claims of workers that hold no reservation
	}
	out := make([]reservedItem, 0, len(m))
	for _, it := range m {
		out = append(out, it)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].seq < out[k].seq })
	return out
}

// takes reports whether a claim serves jobs of type typ ("" for shell).
func takes(types []string, shell bool, typ string) bool {
	if typ == "" {
		return shell || len(types) == 0
	}
	return slices.Contains(types, typ)
}

// capacityFreed wakes the long-polls when a job gives back what it held of
// its worker: a job that did not fit may fit now.
func (a *applier) capacityFreed(j *store.Job, prev store.Status) {
	held := prev.Leased() || prev == store.StatusReserved
	if held && !j.Status.Leased() && !j.Resources.IsZero() {
		a.readyChanged = true
	}
}

// ClaimableBy is Claimable for one worker: it also counts the gang tasks
// reserved for it and passes over jobs that do not fit what it has free.
func (f *FSM) ClaimableBy(worker string, queues, types []string, shell bool, now int64) bool {
	return f.ClaimableCount(worker, queues, types, shell, now) > 0
}

// ClaimableCount is 0 when ClaimableBy is false, and otherwise a rough count
// of the jobs such claims could take (at least 1): the worker's reservations
// plus the ready jobs of the claim's queues and types. Long-polls use it to
// send only about as many claims as there are jobs.
func (f *FSM) ClaimableCount(worker string, queues, types []string, shell bool, now int64) int {
	kinds := claimKinds(queues, types, shell)
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, it := range f.idx.gx.reserved[worker] {
		if takes(types, shell, it.kind.typ) && !f.idx.paused[it.kind.queue] {
			n++
		}
	}
	_, fits := f.idx.bestFit(kinds, worker)
	due := f.idx.dueDelayed(kinds, now) || f.idx.flow.dueReopen(kinds, now)
	if n == 0 && !fits && !due {
		return 0
	}
	for _, ks := range kinds {
		for _, k := range ks {
			if t := f.idx.ready[k]; t != nil && !f.idx.paused[k.queue] {
				n += t.Len()
			}
		}
	}
	if due {
		n++
	}
	return max(n, 1)
}

// WorkerUsage is what each worker's running and reserved jobs ask for, by
// worker id; workers that hold nothing are absent.
func (f *FSM) WorkerUsage() map[string]store.Resources {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]store.Resources, len(f.idx.gx.used))
	for w, u := range f.idx.gx.used {
		out[w] = u
	}
	return out
}

// OpenGangs lists the gangs that are not finished, by id.
func (f *FSM) OpenGangs() []store.Gang {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]store.Gang, 0, len(f.idx.gx.open))
	for _, g := range f.idx.gx.open {
		out = append(out, g)
	}
	sort.Slice(out, func(i, k int) bool { return out[i].ID < out[k].ID })
	return out
}
