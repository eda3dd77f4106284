package worker_test

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/workron/workron/api/wire"
)

// The fake server's durable steps (park-contract.md): a journal per job,
// the parking routes, events and child jobs. A parked job leaves the
// pending list until it wakes: a sleep wakes at once (as if its time had
// passed), a wait when its event comes (or at once, timed out, when its
// timeout is at most fakeInstantTimeout), an invoke when its child ends.

// fakeInstantTimeout is the longest wait timeout the fake times out at
// once.
const fakeInstantTimeout = 10 // ms

// fakeChild is an invoked child: its parent and the parent's step.
type fakeChild struct{ parent, key string }

func (f *fakeServer) routeSteps(mux *http.ServeMux) {
	mux.HandleFunc("GET /jobs/{id}/steps/{key}", f.handleGetStep)
	mux.HandleFunc("PUT /jobs/{id}/steps/{key}", f.handleRecordStep)
	mux.HandleFunc("POST /jobs/{id}/steps/{key}/{verb}", f.handlePark)
	mux.HandleFunc("POST /events", f.handleEvent)
}

// stepsOf returns job id's journal, key -> step, with f.mu held.
func (f *fakeServer) stepsOf(id string) map[string]*wire.Step {
	if f.steps == nil {
		f.steps = map[string]map[string]*wire.Step{}
	}
	if f.steps[id] == nil {
		f.steps[id] = map[string]*wire.Step{}
	}
	return f.steps[id]
}

// journalOf is job id's journal as a claim lists it, with f.mu held.
func (f *fakeServer) journalOf(id string) *wire.Journal {
	steps := f.steps[id]
	if len(steps) == 0 {
		return nil
	}
	jr := &wire.Journal{Count: len(steps)}
	for _, st := range steps {
		s := *st
		s.Result = nil
		jr.Steps = append(jr.Steps, s)
	}
	sort.Slice(jr.Steps, func(a, b int) bool { return jr.Steps[a].Key < jr.Steps[b].Key })
	return jr
}

// step returns a copy of job id's step key, or nil.
func (f *fakeServer) step(id, key string) *wire.Step {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.steps[id][key]
	if st == nil {
		return nil
	}
	c := *st
	return &c
}

// parkedOn is the key of the step job id waits on, "" when it does not.
func (f *fakeServer) parkedOn(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, st := range f.steps[id] {
		if st.Status == wire.StepWaiting {
			return k
		}
	}
	return ""
}

// wake queues parked job id again, with f.mu held.
// fakeWakeDelay is how long after a park the fake wakes a job that it
// wakes "at once": long enough for the parked attempt's worker to have
// read the park's reply before the job can be claimed again, which a real
// server's sleep of a second also gives. Woken in the handler, a claim
// could take the job first, and the worker stopped the old attempt as
// superseded, so its Sleep returned that rather than ErrParked.
const fakeWakeDelay = 200 * time.Millisecond

// wakeSoon wakes job id after fakeWakeDelay.
func (f *fakeServer) wakeSoon(id string) {
	time.AfterFunc(fakeWakeDelay, func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.wake(id)
	})
}

func (f *fakeServer) wake(id string) {
	f.pending = append(f.pending, id)
	close(f.changed)
	f.changed = make(chan struct{})
}

// current reports whether lease is job id's running attempt, with f.mu
// held.
func (f *fakeServer) current(id string, lease uint64) bool {
	job, ok := f.jobs[id]
	return ok && job.Lease == lease && job.Status == wire.StatusRunning
}

func (f *fakeServer) handleGetStep(w http.ResponseWriter, r *http.Request) {
	st := f.step(r.PathValue("id"), r.PathValue("key"))
	if st == nil {
		writeError(w, http.StatusNotFound, wire.CodeNotFound, "step not recorded")
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (f *fakeServer) handleRecordStep(w http.ResponseWriter, r *http.Request) {
	var req wire.StepRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, wire.CodeInvalid, err.Error())
		return
	}
	id, key := r.PathValue("id"), r.PathValue("key")
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.current(id, req.Lease) {
		writeError(w, http.StatusConflict, wire.CodeStaleLease, "stale lease")
		return
	}
	steps := f.stepsOf(id)
	if st := steps[key]; st != nil {
		writeJSON(w, http.StatusConflict, wire.StepRecorded{Code: wire.CodeStepRecorded, Error: "recorded", Step: st})
		return
	}
	st := &wire.Step{Key: key, Status: req.Status, Attempts: req.Attempts, JobAttempt: f.jobs[id].Attempts,
		RecordedAt: time.Now(), DurationMillis: req.DurationMillis, Size: len(req.Result), Result: req.Result}
	if st.Status == "" {
		st.Status = wire.StepOK
	}
	steps[key] = st
	writeJSON(w, http.StatusCreated, st)
}

// parkBody is any of the parking bodies.
type parkBody struct {
	wire.SleepRequest
	Event         string             `json:"event"`
	Key           string             `json:"key"`
	Signal        string             `json:"signal"`
	TimeoutMillis int64              `json:"timeout_ms"`
	Job           wire.SubmitRequest `json:"job"`
}

func (f *fakeServer) handlePark(w http.ResponseWriter, r *http.Request) {
	var req parkBody
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, wire.CodeInvalid, err.Error())
		return
	}
	id, key, verb := r.PathValue("id"), r.PathValue("key"), r.PathValue("verb")
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.current(id, req.Lease) {
		writeError(w, http.StatusConflict, wire.CodeStaleLease, "stale lease")
		return
	}
	steps := f.stepsOf(id)
	if st := steps[key]; st != nil && st.Status != wire.StepWaiting {
		writeJSON(w, http.StatusConflict, wire.StepRecorded{Code: wire.CodeStepRecorded, Error: "recorded", Step: st})
		return
	}
	st := &wire.Step{Key: key, Kind: verb, Status: wire.StepWaiting, Attempts: 1, JobAttempt: f.jobs[id].Attempts, RecordedAt: time.Now()}
	steps[key] = st
	f.jobs[id].Status = wire.StatusPending // parked: out of the pending list
	f.parks++
	switch verb {
	case wire.StepSleep:
		st.Status = wire.StepOK // recorded ok when it parks
		f.wakeSoon(id)
	case wire.StepWait:
		st.Event, st.EventKey, st.Signal = req.Event, req.Key, req.Signal
		if req.TimeoutMillis > 0 && req.TimeoutMillis <= fakeInstantTimeout {
			st.Status = wire.StepTimeout
			f.wakeSoon(id)
		}
	case wire.StepInvoke:
		f.nextID++
		child := wire.Job{ID: "child-" + strconv.Itoa(f.nextID), Type: req.Job.Type, Payload: req.Job.Payload, Status: wire.StatusPending, Queue: "default"}
		f.jobs[child.ID] = &child
		if f.children == nil {
			f.children = map[string]fakeChild{}
		}
		f.children[child.ID] = fakeChild{parent: id, key: key}
		st.ChildID = child.ID
		f.wake(child.ID)
	}
	writeJSON(w, http.StatusCreated, wire.ParkReply{Step: *st, Parked: true})
}

func (f *fakeServer) handleEvent(w http.ResponseWriter, r *http.Request) {
	var req wire.EventRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, wire.CodeInvalid, err.Error())
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	woke := 0
	for id, steps := range f.steps {
		for _, st := range steps {
			if st.Status == wire.StepWaiting && st.Kind == wire.StepWait && st.Event == req.Name && st.EventKey == req.Key {
				st.Status, st.Result, st.Size = wire.StepOK, req.Payload, len(req.Payload)
				f.wake(id)
				woke++
			}
		}
	}
	writeJSON(w, http.StatusAccepted, wire.EventReply{Seq: 1, Woke: woke})
}

// childEnded records a child's end in its parent's step and wakes the
// parent, with f.mu held.
func (f *fakeServer) childEnded(id string, done bool, req wire.ReportRequest) {
	c, ok := f.children[id]
	if !ok {
		return
	}
	st := f.steps[c.parent][c.key]
	st.Status, st.Result, st.Size = wire.StepOK, req.Result, len(req.Result)
	if !done {
		msg, _ := json.Marshal(map[string]string{"status": "failed", "error": req.Error})
		st.Status, st.Result, st.Size = wire.StepFailed, msg, len(msg)
	}
	f.wake(c.parent)
}
