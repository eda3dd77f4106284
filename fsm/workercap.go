package fsm

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/workron/workron/store"
)

// The cap on a token's active worker ids (issue #28). A worker id is
// active from its registration (or its first claim) until it is declared
// offline (worker_offline) or forgotten (forget_worker); it counts for the
// token name that owns it (store.Worker.Owner), and the workers of a
// cluster without tokens all count for the empty name. A register or claim
// that carries MaxWorkers (ProtocolWorkerCap) is refused with a
// *TooManyWorkersError when it would make one more id active for its
// token while the token already has MaxWorkers; one without it is applied
// as protocol 3 applied it, so that every node of a cluster being upgraded
// agrees. The count is workerIndex, derived from the worker records like
// the other indexes: rebuilt from the store on open and restore, changed
// only inside Apply.

// ProtocolWorkerCap is the protocol of MaxWorkers: a register's (written
// as JSON under the op name registerCapped) and a claim's (op code
// opClaimCapped).
const ProtocolWorkerCap = 4

// opClaimCapped is the op code of a claim that carries MaxWorkers: as
// opClaimFence, then Fair, then MaxWorkers.
const opClaimCapped byte = 19

// registerCapped is the op name of a register that carries MaxWorkers.
const registerCapped Op = "register_capped"

// ErrTooManyWorkers matches a *TooManyWorkersError.
var ErrTooManyWorkers = errors.New("too many active worker ids")

// TooManyWorkersError refuses a new worker id to a token (Owner, "" when
// the cluster has no tokens) that already has Max active ones.
type TooManyWorkersError struct {
	Owner string
	Max   int
}

func (e *TooManyWorkersError) Error() string {
	who := "token " + e.Owner + " already holds"
	if e.Owner == "" {
		who = "the workers without a token already hold"
	}
	return fmt.Sprintf("%s %d active worker ids, the cap", who, e.Max)
}

// Is makes a TooManyWorkersError match ErrTooManyWorkers.
func (e *TooManyWorkersError) Is(target error) bool { return target == ErrTooManyWorkers }

// workerIndex keeps the active worker ids of each owner, and a copy of
// every worker's record as last stored, which reads that look at many
// workers (why a job waits) use rather than decode the records.
type workerIndex struct {
	ownerOf map[string]string              // active id -> owner
	byOwner map[string]map[string]struct{} // owner -> its active ids
	records map[string]*store.Worker       // id -> record; never changed once in
}

func newWorkerIndex() *workerIndex {
	return &workerIndex{ownerOf: make(map[string]string), byOwner: make(map[string]map[string]struct{}), records: make(map[string]*store.Worker)}
}

// set records w as stored now: active for its owner unless offline.
func (x *workerIndex) set(w *store.Worker) {
	c := *w
	c.Tags, c.Queues = slices.Clone(w.Tags), slices.Clone(w.Queues)
	x.records[w.ID] = &c
	if owner, ok := x.ownerOf[w.ID]; ok && owner == w.Owner && !w.Offline() {
		return // as it was: the common case, a heartbeat
	}
	x.deactivate(w.ID)
	if w.Offline() {
		return
	}
	x.ownerOf[w.ID] = w.Owner
	ids := x.byOwner[w.Owner]
	if ids == nil {
		ids = make(map[string]struct{})
		x.byOwner[w.Owner] = ids
	}
	ids[w.ID] = struct{}{}
}

// remove drops a forgotten worker.
func (x *workerIndex) remove(id string) {
	delete(x.records, id)
	x.deactivate(id)
}

// deactivate drops a worker id from its owner's active ones.
func (x *workerIndex) deactivate(id string) {
	owner, ok := x.ownerOf[id]
	if !ok {
		return
	}
	delete(x.ownerOf, id)
	ids := x.byOwner[owner]
	delete(ids, id)
	if len(ids) == 0 {
		delete(x.byOwner, owner)
	}
}

// admitWorker checks that worker id may be active for token under max
// (0: no cap): it is already active and stays its owner's, or the owner
// it will have holds fewer than max active ids. A register or claim with
// an empty token keeps an existing worker's owner.
func (a *applier) admitWorker(id, token string, max int) error {
	return a.f.idx.wx.admit(id, token, max)
}

// admit is admitWorker's rule, read from the index alone: a worker that is
// not active keeps its owner through its last record (an offline one comes
// back as its owner's).
func (x *workerIndex) admit(id, token string, max int) error {
	if max <= 0 {
		return nil
	}
	if owner, ok := x.ownerOf[id]; ok && (token == "" || owner == token) {
		return nil
	}
	owner := token
	if w := x.records[id]; owner == "" && w != nil {
		owner = w.Owner
	}
	if len(x.byOwner[owner]) >= max {
		return &TooManyWorkersError{Owner: owner, Max: max}
	}
	return nil
}

// AdmitWorker is what a register or claim as worker id by token, carrying
// the cap max, would meet if applied now: nil, or the *TooManyWorkersError
// it would be refused with. The API answers a refusal without proposing
// it, so a flood of registrations past the cap costs a map lookup each;
// the FSM still decides when it applies one.
func (f *FSM) AdmitWorker(id, token string, max int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.idx.wx.admit(id, token, max)
}

// putWorker stores w and updates the indexes that read workers.
func (a *applier) putWorker(w *store.Worker) {
	a.must(a.tx.PutWorker(w, a.index))
	a.f.idx.gx.setWorker(w)
	a.f.idx.wx.set(w)
}

// rebuildWorkers fills the indexes that read workers from the store.
func (x *index) rebuildWorkers(tx *store.Tx) error {
	return tx.ForEachWorker(func(w *store.Worker) error {
		x.gx.setWorker(w)
		x.wx.set(w)
		return nil
	})
}

// ActiveWorkerIDs lists, in order, the worker ids active for owner (a
// token name; "" for workers without one): those the cap counts.
func (f *FSM) ActiveWorkerIDs(owner string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	ids := make([]string, 0, len(f.idx.wx.byOwner[owner]))
	for id := range f.idx.wx.byOwner[owner] {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// capped reports whether c carries MaxWorkers (ProtocolWorkerCap).
func (c *Cmd) capped() bool {
	switch {
	case c.Op == OpRegister && c.Register != nil:
		return c.Register.MaxWorkers != 0
	case c.Op == OpClaim && c.Claim != nil:
		return c.Claim.MaxWorkers != 0
	}
	return false
}

// cappedJSONCmd reads the op name registerCapped back as OpRegister, which
// must then carry MaxWorkers, and refuses MaxWorkers under another name
// (Encode never writes it; a node of protocol 3 would drop it). It
// reports whether c was a register.
func (r *entryReader) cappedJSONCmd(c *Cmd) bool {
	switch {
	case c.Op == registerCapped:
		c.Op = OpRegister
		if !c.capped() {
			r.Fail(fmt.Sprintf("op %q without its cap", registerCapped))
		}
		return true
	case c.Register != nil && c.Register.MaxWorkers != 0:
		r.Fail(fmt.Sprintf("op %q with a cap, not written under %q", c.Op, registerCapped))
		return true
	}
	return false
}

// claimCapped reads the rest of a claim of op code opClaimCapped.
func (r *entryReader) claimCapped(c *Cmd) {
	if ProtocolVersion < ProtocolWorkerCap { // as a binary before the code
		r.Fail(fmt.Sprintf("unknown op code %d (written by a newer Workron?)", opClaimCapped))
		return
	}
	c.Op, c.Claim = OpClaim, r.claim()
	c.Claim.Token, c.Claim.Fenced, c.Claim.Seq = r.Str(), r.Bool(), r.Uvarint()
	c.Claim.Fair, c.Claim.MaxWorkers = r.Bool(), r.Int()
	if r.Err() == nil && c.Claim.MaxWorkers == 0 {
		r.Fail(fmt.Sprintf("claim of op code %d without its cap", opClaimCapped))
	}
}

// WorkersWhere lists, in id order, the workers whose records (as last
// applied) keep reports true of: without reading the store, so that a
// read that looks at every worker (why a job waits) decodes none. keep
// runs under the FSM's lock: it must be quick and call nothing of f. The
// records are shared: callers must not change them.
func (f *FSM) WorkersWhere(keep func(*store.Worker) bool) []*store.Worker {
	f.mu.Lock()
	var out []*store.Worker
	for _, w := range f.idx.wx.records {
		if keep(w) {
			out = append(out, w)
		}
	}
	f.mu.Unlock()
	slices.SortFunc(out, func(a, b *store.Worker) int { return strings.Compare(a.ID, b.ID) })
	return out
}
