package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/tools/jobcheck"
)

// checkInput is everything the checks look at: the recorded history, the
// jobs the submitters meant, and the final listing.
type checkInput struct {
	ops      []Op
	specs    map[string]jobSpec // by key
	accepted map[string]string  // key -> job id from a 2xx
	jobs     []wire.Job         // the final listing of the load's queues (consistent read)
	schedule *wire.Schedule     // the run's schedule at the end; nil if it could not be read
	cronJobs []wire.Job         // its queue's final listing
	virtual  func(string) bool
	dir      string // where to write visualizations
	// timeout bounds the linearizability check of one job.
	timeout time.Duration
	// durable is the durable jobs' part (durcheck.go).
	durable durableInput
}

// checkResult counts what was checked and lists the anomalies.
type checkResult struct {
	Jobs, Done, Failed, Pending int
	Ops, Checked, Unknown       int
	Synthesized                 int
	Cron                        cronResult
	Limits                      limitResult
	Durable                     durableResult
	Anomalies                   []string
	Visualizations              []string
}

func (r *checkResult) anomaly(format string, args ...any) {
	r.Anomalies = append(r.Anomalies, fmt.Sprintf(format, args...))
}

// checkJobs runs every check on the final state and the history.
func checkJobs(in checkInput) *checkResult {
	res := &checkResult{Ops: len(in.ops)}
	var jobs []wire.Job
	for _, j := range in.jobs {
		if j.Queue == chaosQueue || j.Queue == limitedQueue {
			jobs = append(jobs, j)
		}
	}
	byKey, problems := jobcheck.Accepted(in.accepted, jobs)
	res.Anomalies = append(res.Anomalies, problems...)
	res.Jobs = len(byKey)
	checkFinished(in, byKey, res)
	checkAttempts(in, byKey, res)
	checkClaims(in, res)
	checkLinearizable(in, byKey, res)
	checkLimits(jobs, res)
	res.Cron = checkSchedule(in.schedule, in.cronJobs, res)
	res.Durable = checkDurable(in.durable)
	res.Anomalies = append(res.Anomalies, res.Durable.Anomalies...)
	return res
}

// checkFinished: no job exists that no submit asked for, and every job is
// finished (or waits for a retry that is due later). jobcheck.Accepted has
// checked that every accepted job exists and is the job its reply named.
func checkFinished(in checkInput, byKey map[string]wire.Job, res *checkResult) {
	for key, j := range byKey {
		if _, ok := in.specs[key]; !ok {
			res.anomaly("job %s has key %q, which no submitter sent", j.ID, key)
		}
		switch j.Status {
		case wire.StatusDone:
			res.Done++
		case wire.StatusFailed:
			res.Failed++
		case wire.StatusScheduled:
			res.Pending++ // legitimately pending: its retry is due later
		default:
			res.anomaly("job %s (%s) is still %s after quiescence: %s", j.ID, key, j.Status, jobcheck.History(j))
		}
	}
}

// checkAttempts: per job, the attempts of jobcheck.Attempts (leases grow,
// at most one attempt done and it is the last) and an outcome that fits
// its command; across jobs, no lease is used twice (it is the Raft index
// of the claim).
func checkAttempts(in checkInput, byKey map[string]wire.Job, res *checkResult) {
	owner := make(map[uint64]string)
	for key, j := range byKey {
		spec := in.specs[key]
		res.Anomalies = append(res.Anomalies, jobcheck.Attempts(j)...)
		for _, a := range j.AttemptHistory {
			if other, ok := owner[a.Lease]; ok {
				res.anomaly("lease %d is used by two attempts: %s and %s", a.Lease, other, j.ID)
			}
			owner[a.Lease] = j.ID
			// Virtual workers never fail a job that should succeed, nor
			// succeed one that should fail: such an end is a result
			// given to the wrong attempt.
			if in.virtual(a.WorkerID) && !a.Expired {
				if a.Status == wire.StatusFailed && (spec.outcome == outcomeOK || spec.outcome == outcomeSlow || spec.outcome == outcomeFlaky && a.Attempt >= 2) {
					res.anomaly("job %s (%s): attempt %d failed by virtual worker %s, which never fails it: %s", j.ID, spec.outcome, a.Attempt, a.WorkerID, jobcheck.History(j))
				}
				if a.Status == wire.StatusDone && (spec.outcome == outcomeFail || spec.outcome == outcomeTimeout || spec.outcome == outcomeFlaky && a.Attempt < 2) {
					res.anomaly("job %s (%s): attempt %d done by virtual worker %s, which never succeeds it: %s", j.ID, spec.outcome, a.Attempt, a.WorkerID, jobcheck.History(j))
				}
			}
		}
		if j.Status == wire.StatusDone && (spec.outcome == outcomeFail || spec.outcome == outcomeTimeout) {
			res.anomaly("job %s (%s) ended done: %s", j.ID, spec.outcome, jobcheck.History(j))
		}
	}
}

// checkClaims: no (job, lease) was handed out by two claim replies.
func checkClaims(in checkInput, res *checkResult) {
	seen := make(map[string]string)
	for _, op := range in.ops {
		if op.Kind != OpClaim || op.Outcome != OutOK {
			continue
		}
		k := fmt.Sprintf("%s/%d", op.Job, op.Lease)
		if w, ok := seen[k]; ok {
			res.anomaly("job %s lease %d was claimed twice: by %s and by %s", op.Job, op.Lease, w, op.Worker)
		}
		seen[k] = op.Worker
	}
}

// synthesizeClaims turns unknown claims into claims of the attempts they
// produced. An attempt of a virtual worker that no claim reply announced
// must come from one of that worker's claims whose outcome is unknown; each
// such claim can produce one attempt (it asks for one job). Attempts are
// matched to unknown claims in order (leases grow with time). An attempt
// left without one is an effect without a cause.
func synthesizeClaims(ops []Op, records map[string]jobRecord, res *checkResult) map[string][]Op {
	announced := make(map[uint64]bool)
	unknown := make(map[string][]Op)
	for _, op := range ops {
		if op.Kind != OpClaim {
			continue
		}
		switch op.Outcome {
		case OutOK:
			announced[op.Lease] = true
		case OutUnknown:
			unknown[op.Worker] = append(unknown[op.Worker], op)
		}
	}
	type pending struct {
		job string
		a   attemptInfo
	}
	byWorker := make(map[string][]pending)
	for key, r := range records {
		for _, a := range r.Attempts {
			if a.Virtual && !announced[a.Lease] {
				byWorker[a.Worker] = append(byWorker[a.Worker], pending{job: key, a: a})
			}
		}
	}
	out := make(map[string][]Op)
	for w, list := range byWorker {
		sort.Slice(list, func(i, k int) bool { return list[i].a.Lease < list[k].a.Lease })
		claims := unknown[w]
		for i, p := range list {
			if i >= len(claims) {
				res.anomaly("job %s: attempt with lease %d is held by %s, but no claim of %s was answered with it and only %d of its claims had an unknown outcome: %s",
					records[p.job].ID, p.a.Lease, w, w, len(claims), describeRecord(records[p.job]))
				continue
			}
			op := claims[i]
			op.Job, op.Lease, op.Synth = records[p.job].ID, p.a.Lease, true
			out[p.job] = append(out[p.job], op)
			res.Synthesized++
		}
	}
	return out
}

// checkLinearizable checks each job's recorded operations against the job
// model (see model.go), one porcupine check per job, on all cores.
func checkLinearizable(in checkInput, byKey map[string]wire.Job, res *checkResult) {
	records := make(map[string]jobRecord, len(byKey))
	for key, j := range byKey {
		records[key] = recordOf(j, in.virtual)
	}
	idToKey := make(map[string]string, len(byKey))
	for key, j := range byKey {
		idToKey[j.ID] = key
	}
	parts := make(map[string][]Op)
	var end int64
	for _, op := range in.ops {
		end = max(end, op.Return, op.Call)
		key := op.Key
		if key == "" {
			key = idToKey[op.Job]
		}
		if key == "" {
			if op.Kind == OpClaim && op.Outcome == OutUnknown {
				continue // matched below, or it claimed nothing
			}
			if op.Outcome != OutInvalid {
				res.anomaly("operation on unknown job %q: %s", op.Job, describeOp(op))
			}
			continue
		}
		if op.Kind == OpClaim && op.Outcome == OutUnknown || op.Outcome == OutNoEffect || op.Outcome == OutInvalid {
			continue // no effect (or reported already): nothing to linearize
		}
		parts[key] = append(parts[key], op)
	}
	for key, ops := range synthesizeClaims(in.ops, records, res) {
		parts[key] = append(parts[key], ops...)
	}
	type job struct {
		key string
		ops []porcupine.Operation
	}
	var jobs []job
	for key, r := range records {
		for _, op := range parts[key] {
			if op.Outcome == OutUnknown {
				res.Unknown++
			}
		}
		jobs = append(jobs, job{key: key, ops: jobOperations(parts[key], r, end)})
		res.Checked++
	}
	sort.Slice(jobs, func(i, k int) bool { return jobs[i].key < jobs[k].key })
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		next = make(chan job)
	)
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for jb := range next {
				model, result, info := checkJob(records[jb.key], jb.ops, in.timeout)
				if result == porcupine.Ok {
					continue
				}
				mu.Lock()
				msg := "not linearizable"
				if result == porcupine.Unknown {
					msg = fmt.Sprintf("linearizability check timed out after %s", in.timeout)
				}
				detail := describeRecord(records[jb.key])
				if len(res.Visualizations) < 10 && in.dir != "" {
					path := filepath.Join(in.dir, "linearizability-"+sanitize(jb.key)+".html")
					if err := porcupine.VisualizePath(model, info, path); err == nil {
						res.Visualizations = append(res.Visualizations, path)
						detail += "; see " + path
					} else {
						fmt.Fprintln(os.Stderr, "chaos: visualization:", err)
					}
				}
				res.anomaly("job %s: history %s: %s; ops: %s", records[jb.key].ID, msg, detail, describeOps(jb.ops))
				mu.Unlock()
			}
		})
	}
	for _, jb := range jobs {
		next <- jb
	}
	close(next)
	wg.Wait()
}

// jobOperations turns one job's recorded operations into porcupine's, an
// unknown outcome returning after everything else (end), and adds the final
// reading of the job, which every linearization must reach.
func jobOperations(ops []Op, r jobRecord, end int64) []porcupine.Operation {
	var out []porcupine.Operation
	for _, op := range ops {
		ret := op.Return
		if op.Outcome == OutUnknown {
			ret = end + 1
		}
		out = append(out, porcupine.Operation{ClientId: op.Client, Input: op, Call: op.Call, Return: ret})
	}
	final := Op{Kind: OpFinal, Job: r.ID, Status: r.Final, Call: end + 2, Return: end + 3}
	return append(out, porcupine.Operation{ClientId: -1, Input: final, Call: end + 2, Return: end + 3})
}

// checkJob checks one job's operations against its model.
func checkJob(r jobRecord, ops []porcupine.Operation, timeout time.Duration) (porcupine.Model, porcupine.CheckResult, porcupine.LinearizationInfo) {
	nm := jobModel{rec: r}.nondeterministic()
	model := nm.ToModel()
	result, info := porcupine.CheckOperationsVerbose(model, compactClients(ops), timeout)
	return model, result, info
}

// compactClients renumbers client ids from 0 within one partition, which
// the visualization wants.
func compactClients(ops []porcupine.Operation) []porcupine.Operation {
	ids := make(map[int]int)
	out := make([]porcupine.Operation, len(ops))
	for i, op := range ops {
		id, ok := ids[op.ClientId]
		if !ok {
			id = len(ids)
			ids[op.ClientId] = id
		}
		op.ClientId = id
		out[i] = op
	}
	return out
}

func describeOps(ops []porcupine.Operation) string {
	sorted := append([]porcupine.Operation(nil), ops...)
	sort.Slice(sorted, func(i, k int) bool { return sorted[i].Call < sorted[k].Call })
	var parts []string
	for _, op := range sorted {
		o := op.Input.(Op)
		parts = append(parts, fmt.Sprintf("[%.3f-%.3f] %s", float64(op.Call)/1e9, float64(op.Return)/1e9, describeOp(o)))
	}
	if len(parts) > 40 {
		parts = append(parts[:40], fmt.Sprintf("... %d more", len(parts)-40))
	}
	return strings.Join(parts, " | ")
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// savedRun is what a run keeps beside history.jsonl so that its checks can
// run again without the cluster (Recheck).
type savedRun struct {
	Outcomes map[string]string `json:"outcomes"` // key -> outcome
	Accepted map[string]string `json:"accepted"` // key -> job id
	Virtual  []string          `json:"virtual_workers"`
	Jobs     []wire.Job        `json:"jobs"`
	Schedule *wire.Schedule    `json:"schedule,omitempty"`
	CronJobs []wire.Job        `json:"cron_jobs,omitempty"`
	// The durable jobs: key -> job id, the final listing and the journals
	// (the ledger is ledger.jsonl).
	DurableAccepted map[string]string      `json:"durable_accepted,omitempty"`
	DurableJobs     []wire.Job             `json:"durable_jobs,omitempty"`
	Journals        map[string][]wire.Step `json:"journals,omitempty"`
	Events          map[string]eventSend   `json:"events,omitempty"`
	ClockJumps      [][2]int64             `json:"clock_jumps,omitempty"`
}

func saveRun(dir string, in checkInput, virtual []string) error {
	s := savedRun{Outcomes: make(map[string]string, len(in.specs)), Accepted: in.accepted, Virtual: virtual, Jobs: in.jobs,
		Schedule: in.schedule, CronJobs: in.cronJobs,
		DurableAccepted: in.durable.accepted, DurableJobs: in.durable.jobs, Journals: in.durable.journals,
		Events: in.durable.events, ClockJumps: in.durable.clockJumps}
	for k, sp := range in.specs {
		s.Outcomes[k] = sp.outcome
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "final.json"), b, 0o644)
}

// Recheck runs the checks of a finished run again from what it kept in dir
// (history.jsonl and final.json) and returns the anomalies.
func Recheck(dir string) ([]string, error) {
	ops, err := readHistory(filepath.Join(dir, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "final.json"))
	if err != nil {
		return nil, err
	}
	var s savedRun
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("final.json: %w", err)
	}
	in := checkInput{ops: ops, specs: make(map[string]jobSpec, len(s.Outcomes)), accepted: s.Accepted, jobs: s.Jobs,
		schedule: s.Schedule, cronJobs: s.CronJobs,
		virtual: func(id string) bool { return slices.Contains(s.Virtual, id) }, dir: dir, timeout: 20 * time.Second}
	for k, o := range s.Outcomes {
		in.specs[k] = jobSpec{key: k, outcome: o}
	}
	in.durable = durableInput{accepted: s.DurableAccepted, jobs: s.DurableJobs, journals: s.Journals,
		events: s.Events, clockJumps: s.ClockJumps}
	if in.durable.ledger, err = readLedger(filepath.Join(dir, "ledger.jsonl")); err != nil {
		return nil, err
	}
	return checkJobs(in).Anomalies, nil
}
