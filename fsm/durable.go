package fsm

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/workron/workron/store"
)

// Sleeps, events and child jobs (issue #31, ProtocolDurable): steps whose
// outcome comes from the cluster rather than from the worker.
//
// A running attempt parks its job on a step with one fenced entry, like
// a step record: sleep_step (until a time), wait_step (for an event or a
// signal, with a deadline or none) and invoke_step (until a child job
// ends). The entry records the step and, unless the outcome is known at
// once (a sleep whose time has passed, an event already kept), ends the
// attempt uncharged, like a snooze: the job is pending again, its run_at
// the wake time (a sleep), the deadline (a wait) or far off (a wait
// without one, an invoke), and a park (store.Park) says what it waits
// for. What wakes it is an entry too: a send_event (an event, or a signal
// to one job) records each waiting step ok with the payload and makes its
// job due now; a child that ends records its parent's step; the claim that
// takes a wait whose deadline passed records it timeout. Which comes first
// is decided by the log, once: an event whose entry's time is at or past a
// wait's deadline times the wait out instead.
//
// Events are kept for EventLookBack after their entry, so that a wait
// registered after its event was sent still matches it: a wait takes the
// oldest kept event of its channel newer than the last one its job
// consumed there.

// ProtocolDurable is the protocol of ops sleep_step, wait_step,
// invoke_step and send_event.
const ProtocolDurable = 4

// The ops of durable sleeps, waits and invokes.
const (
	OpSleepStep  Op = "sleep_step"
	OpWaitStep   Op = "wait_step"
	OpInvokeStep Op = "invoke_step"
	OpSendEvent  Op = "send_event"
)

// Bounds of sleeps, waits, events and signals. The API refuses more with
// the same errors.
const (
	// MaxParkFor is the longest sleep or wait timeout: 365 days.
	MaxParkFor = int64(365 * 24 * time.Hour)
	// EventLookBack is how long an event (or signal) is kept after its
	// entry, to match waits registered after it was sent: 1 hour.
	EventLookBack = int64(time.Hour)
	// MaxEventPayloadBytes bounds an event's or signal's payload.
	MaxEventPayloadBytes = 64 << 10
	// MaxEventNameBytes bounds an event's or signal's name, and an
	// event's key.
	MaxEventNameBytes = 200
	// MaxKeptEvents bounds the events (and signals) kept at once.
	MaxKeptEvents = 100_000
	// MaxKeptEventBytes bounds their names, keys and payloads, in bytes.
	MaxKeptEventBytes = 64 << 20
	// MaxWaitersPerKey bounds the jobs waiting on one event (name, key)
	// (or one job's signal name), and so the jobs one event wakes.
	MaxWaitersPerKey = 1_000
)

// maxExpirePerApply is the most expired events one send_event deletes;
// each adds one, so the kept events never trail the window by more than
// a burst.
const maxExpirePerApply = 256

// noDeadline is how far off a parked job's run_at is when nothing but an
// event or a child wakes it.
const noDeadline = maxBackoff

// Errors of waits and events.
var (
	// ErrTooManyWaiters means MaxWaitersPerKey jobs wait on the channel.
	ErrTooManyWaiters = errors.New("too many waiters")
	// ErrEventsFull means the kept events are at a bound.
	ErrEventsFull = errors.New("events full")
)

// LimitError names the bound a wait or an event would pass; it matches
// ErrTooManyWaiters or ErrEventsFull.
type LimitError struct {
	Limit string // max_waiters_per_key, max_kept_events, max_kept_event_bytes
	Have  int64
	Max   int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%d of %s = %d in use: nothing was done", e.Have, e.Limit, e.Max)
}

func (e *LimitError) Unwrap() error {
	if e.Limit == "max_waiters_per_key" {
		return ErrTooManyWaiters
	}
	return ErrEventsFull
}

// SleepStep parks attempt Lease (required) of job JobID on step Key until
// Until (Unix nanoseconds), or For nanoseconds after the entry's time
// when Until is 0. Token is the caller's token name.
type SleepStep struct {
	JobID string `json:"job"`
	Lease uint64 `json:"lease"`
	Token string `json:"token,omitempty"`
	Key   string `json:"key"`
	Until int64  `json:"until,omitempty"`
	For   int64  `json:"for,omitempty"`
}

// WaitStep parks attempt Lease (required) of job JobID on step Key until
// the event Event with key EventKey, or the signal Signal to the job
// (one of the two), comes, or Timeout nanoseconds pass (0: no timeout).
type WaitStep struct {
	JobID    string `json:"job"`
	Lease    uint64 `json:"lease"`
	Token    string `json:"token,omitempty"`
	Key      string `json:"key"`
	Event    string `json:"event,omitempty"`
	EventKey string `json:"ekey,omitempty"`
	Signal   string `json:"signal,omitempty"`
	Timeout  int64  `json:"timeout,omitempty"`
}

// InvokeStep submits Child for attempt Lease (required) of job JobID's
// step Key, once, and parks the job until the child ends.
type InvokeStep struct {
	JobID string `json:"job"`
	Lease uint64 `json:"lease"`
	Token string `json:"token,omitempty"`
	Key   string `json:"key"`
	Child NewJob `json:"child"`
}

// SendEvent sends the event Name with key Key, or the signal Name to job
// JobID (Signal set), with Payload (any bytes, at most
// MaxEventPayloadBytes).
type SendEvent struct {
	Name    string `json:"name"`
	Key     string `json:"key,omitempty"`
	Signal  bool   `json:"signal,omitempty"`
	JobID   string `json:"job,omitempty"`
	Payload []byte `json:"payload,omitempty"`
}

// CheckEventName refuses an event's or signal's name or an event's key
// (field names it): empty (a key may be), too long, not UTF-8 or with a
// control character.
func CheckEventName(field, s string, mayBeEmpty bool) error {
	switch {
	case s == "" && !mayBeEmpty:
		return &ValidationError{Field: field, Reason: "must not be empty"}
	case len(s) > MaxEventNameBytes:
		return &ValidationError{Field: field, Reason: fmt.Sprintf("is %d bytes, more than the limit of %d", len(s), MaxEventNameBytes)}
	case !utf8.ValidString(s):
		return &ValidationError{Field: field, Reason: "is not UTF-8"}
	case strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return &ValidationError{Field: field, Reason: "has a control character"}
	}
	return nil
}

func (s *SleepStep) check() error {
	switch {
	case s.Until != 0 && s.For != 0:
		return &ValidationError{Field: "until", Reason: "a sleep gives until or a duration, not both"}
	case s.For < 0 || s.For > MaxParkFor:
		return &ValidationError{Field: "duration_ms", Reason: "must be from 0 to 365 days"}
	}
	return checkParking(s.JobID, s.Lease, s.Key)
}

func (w *WaitStep) check() error {
	switch {
	case (w.Event == "") == (w.Signal == ""):
		return &ValidationError{Field: "event", Reason: "a wait names an event or a signal, one of the two"}
	case w.Signal != "" && w.EventKey != "":
		return &ValidationError{Field: "key", Reason: "a signal has no key: it goes to one job"}
	case w.Timeout < 0 || w.Timeout > MaxParkFor:
		return &ValidationError{Field: "timeout_ms", Reason: "must be from 0 (none) to 365 days"}
	}
	if err := CheckEventName("event", w.Event, true); err != nil {
		return err
	}
	if err := CheckEventName("key", w.EventKey, true); err != nil {
		return err
	}
	if err := CheckEventName("signal", w.Signal, true); err != nil {
		return err
	}
	return checkParking(w.JobID, w.Lease, w.Key)
}

func (e *SendEvent) check() error {
	if err := CheckEventName("name", e.Name, false); err != nil {
		return err
	}
	if err := CheckEventName("key", e.Key, true); err != nil {
		return err
	}
	switch {
	case e.Signal && e.JobID == "":
		return &ValidationError{Field: "job", Reason: "a signal goes to a job"}
	case e.Signal && e.Key != "":
		return &ValidationError{Field: "key", Reason: "a signal has no key"}
	case len(e.Payload) > MaxEventPayloadBytes:
		return &ValidationError{Field: "payload", Reason: fmt.Sprintf("is %d bytes, more than max_event_payload_bytes = %d", len(e.Payload), MaxEventPayloadBytes)}
	}
	return nil
}

func checkParking(jobID string, lease uint64, key string) error {
	if err := CheckStepKey(key); err != nil {
		return err
	}
	if lease == 0 {
		return fmt.Errorf("parking job %s needs the attempt's lease: %w", jobID, ErrLeaseRequired)
	}
	return nil
}

// channel is what a wait step waits on.
func channel(jobID string, st *store.Step) store.Channel {
	if st.Signal != "" {
		return store.Channel{Signal: true, Name: st.Signal, Key: jobID}
	}
	return store.Channel{Name: st.Event, Key: st.EventKey}
}

// parkingAttempt checks that attempt lease of job jobID may park on step
// key of kind kind, and returns the job and the step already recorded
// under key (nil if none). A step of another kind is ErrStepRecorded.
func (a *applier) parkingAttempt(jobID string, lease uint64, token, key, kind string) (*store.Job, *store.Step, Result) {
	j, err := a.ownAttempt(jobID, lease, token)
	if err != nil {
		return nil, nil, a.parkedBefore(jobID, lease, token, key, err)
	}
	switch {
	case j.GangID != "":
		return nil, nil, Result{Err: &StateError{JobID: j.ID, Status: "a gang task", Op: "park"}}
	case j.Status == store.StatusCancelling:
		return nil, nil, Result{Err: &StateError{JobID: j.ID, Status: string(j.Status), Op: "park"}}
	}
	old, err := a.tx.Step(j.ID, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return j, nil, Result{}
	case err != nil:
		a.must(err)
	case old.Kind != kind:
		return nil, nil, a.recorded(j, old)
	}
	return j, old, Result{}
}

// parkedBefore answers a parking call refused with err: the same reply
// again when the call's attempt already parked on step key (a resend
// after an unknown outcome), else err.
func (a *applier) parkedBefore(jobID string, lease uint64, token, key string, err error) Result {
	if !errors.Is(err, ErrStaleLease) {
		return Result{Err: err}
	}
	j, jerr := a.job(jobID)
	p, perr := a.tx.Park(jobID)
	if jerr != nil || perr != nil || p.Step != key || len(j.History) == 0 {
		return Result{Err: err}
	}
	last := j.History[len(j.History)-1]
	if j.Status != store.StatusPending || last.Lease != lease || last.Status != store.StatusParked || claimedBy(j, token) != nil {
		return Result{Err: err}
	}
	st, serr := a.tx.Step(jobID, key)
	if serr != nil {
		return Result{Err: err}
	}
	return Result{Jobs: []*store.Job{j}, Step: st, Parked: true}
}

// recorded is the reply to a step recorded before.
func (a *applier) recorded(j *store.Job, st *store.Step) Result {
	return Result{Err: fmt.Errorf("job %s step %s: %w", j.ID, st.Key, ErrStepRecorded), Jobs: []*store.Job{j}, Step: st}
}

// journalRoom checks that j's journal takes one more step key whose
// outcome may grow to reserve bytes.
func (a *applier) journalRoom(j *store.Job, key string, reserve int) error {
	tot := a.tx.Journal(j.ID)
	if tot.Steps >= MaxStepsPerJob {
		return &JournalFullError{JobID: j.ID, Limit: "max_steps_per_job", Have: int64(tot.Steps), Max: MaxStepsPerJob}
	}
	if tot.Bytes+store.StepBytes(key, nil)+int64(reserve) > MaxJournalBytes {
		return &JournalFullError{JobID: j.ID, Limit: "max_journal_bytes", Have: tot.Bytes, Max: MaxJournalBytes}
	}
	return nil
}

// newStep is a step of kind kind that j's current attempt records now.
func (a *applier) newStep(j *store.Job, key, kind, status string) *store.Step {
	return &store.Step{Key: key, Kind: kind, Status: status, Attempts: 1, Attempt: j.Attempts, RecordedAt: a.now}
}

// park ends j's attempt uncharged (its history says parked), makes it
// pending at runAt, and records p as what it waits for, replacing (and
// unregistering) any park it had.
func (a *applier) park(j *store.Job, runAt int64, p *store.Park) {
	if old, err := a.tx.Park(j.ID); err == nil && old.Chan != nil && (p.Chan == nil || *old.Chan != *p.Chan) {
		a.must(a.tx.DeleteWaiter(*old.Chan, j.ID))
	}
	prev := j.Status
	a.unindex(j)
	a.endAttempt(j, store.StatusParked, "parked on "+p.Kind+" step "+p.Step, false)
	j.Status = store.StatusPending
	j.Attempts--
	j.RunAt = runAt
	a.put(j, prev)
	a.must(a.tx.PutPark(j.ID, p))
}

// wakeAt is the run_at of a job parked until deadline (0: none).
func (a *applier) wakeAt(deadline int64) int64 {
	if deadline == 0 {
		return after(a.now, noDeadline)
	}
	return deadline
}

// sleepStep applies a SleepStep.
func (a *applier) sleepStep(s *SleepStep) Result {
	if err := s.check(); err != nil {
		return Result{Err: err}
	}
	j, old, res := a.parkingAttempt(s.JobID, s.Lease, s.Token, s.Key, store.StepSleep)
	if j == nil {
		return res
	}
	if old != nil {
		if old.WakeAt <= a.now {
			return a.recorded(j, old)
		}
		a.park(j, old.WakeAt, &store.Park{Kind: store.StepSleep, Step: s.Key, WakeAt: old.WakeAt})
		return Result{Jobs: []*store.Job{j}, Step: old, Parked: true}
	}
	wake := s.Until
	if wake == 0 {
		wake = after(a.now, s.For)
	}
	if wake > after(a.now, MaxParkFor) {
		return Result{Err: &ValidationError{Field: "until", Reason: "is more than 365 days ahead"}}
	}
	if err := a.journalRoom(j, s.Key, 0); err != nil {
		return Result{Err: err}
	}
	st := a.newStep(j, s.Key, store.StepSleep, store.StepOK)
	st.WakeAt = wake
	a.must(a.tx.PutStep(j.ID, st))
	if wake <= a.now {
		return Result{Jobs: []*store.Job{j}, Step: st}
	}
	a.park(j, wake, &store.Park{Kind: store.StepSleep, Step: s.Key, WakeAt: wake})
	return Result{Jobs: []*store.Job{j}, Step: st, Parked: true}
}

// waitStep applies a WaitStep.
func (a *applier) waitStep(w *WaitStep) Result {
	if err := w.check(); err != nil {
		return Result{Err: err}
	}
	j, old, res := a.parkingAttempt(w.JobID, w.Lease, w.Token, w.Key, store.StepWait)
	if j == nil {
		return res
	}
	st := old
	if st == nil {
		if err := a.journalRoom(j, w.Key, MaxEventPayloadBytes); err != nil {
			return Result{Err: err}
		}
		st = a.newStep(j, w.Key, store.StepWait, store.StepWaiting)
		st.Event, st.EventKey, st.Signal = w.Event, w.EventKey, w.Signal
		if w.Timeout > 0 {
			st.WakeAt = after(a.now, w.Timeout)
		}
	} else if st.Status != store.StepWaiting {
		return a.recorded(j, st)
	}
	ch := channel(j.ID, st)
	ev := a.keptEvent(j.ID, ch)
	if ev != nil || (st.WakeAt != 0 && a.now >= st.WakeAt) { // a kept event, or a replay past its deadline
		out := a.outcome(j.ID, st, ev)
		a.putOutcome(j.ID, old, out)
		a.must(a.tx.DeleteWaiter(ch, j.ID))
		if p, err := a.tx.Park(j.ID); err == nil && p.Step == st.Key {
			a.must(a.tx.DeletePark(j.ID))
		}
		return Result{Jobs: []*store.Job{j}, Step: out}
	}
	if n := a.tx.Waiters(ch); n >= MaxWaitersPerKey && !a.waiting(ch, j.ID) {
		return Result{Err: &LimitError{Limit: "max_waiters_per_key", Have: int64(n), Max: MaxWaitersPerKey}}
	}
	if old == nil {
		a.must(a.tx.PutStep(j.ID, st))
	}
	a.must(a.tx.PutWaiter(ch, j.ID, st.Key))
	a.park(j, a.wakeAt(st.WakeAt), &store.Park{Kind: store.StepWait, Step: st.Key, WakeAt: st.WakeAt, Chan: &ch})
	return Result{Jobs: []*store.Job{j}, Step: st, Parked: true}
}

// waiting reports whether job jobID is registered on channel ch.
func (a *applier) waiting(ch store.Channel, jobID string) bool {
	p, err := a.tx.Park(jobID)
	return err == nil && p.Chan != nil && *p.Chan == ch
}

// keptEvent is the oldest event of ch kept within the look-back window
// that job jobID has not consumed, or nil.
func (a *applier) keptEvent(jobID string, ch store.Channel) *store.Event {
	ev, err := a.tx.FirstEvent(ch, a.tx.Consumed(jobID, ch), after(a.now, -EventLookBack))
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	a.must(err)
	return ev
}

// outcome is wait step st of job jobID with event ev's payload (ok), or
// timed out (ev nil); an event is consumed.
func (a *applier) outcome(jobID string, st *store.Step, ev *store.Event) *store.Step {
	out := *st
	out.RecordedAt = a.now
	out.Status = store.StepTimeout
	out.Result, out.Size = nil, 0
	if ev != nil {
		out.Status = store.StepOK
		if len(ev.Payload) > 0 && string(ev.Payload) != "null" {
			out.Result, out.Size = ev.Payload, len(ev.Payload)
		}
		a.must(a.tx.SetConsumed(jobID, ev.Chan, ev.Seq))
	}
	return &out
}

// putOutcome stores a step's outcome: new (old nil) or in place of old.
func (a *applier) putOutcome(jobID string, old, out *store.Step) {
	if old == nil {
		a.must(a.tx.PutStep(jobID, out))
		return
	}
	a.must(a.tx.ReplaceStep(jobID, old, out))
}
