package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/tools/jobcheck"
)

// durableCall is one call of a durable job's handler: a run step (kind
// "") or a sleep, a wait for an event, or an invoke of a child job.
type durableCall struct{ name, kind string }

// durableCalls are the calls a durable job's handler makes, in order. A
// name used twice gets a second key (notify, notify#2), as the SDK counts
// occurrences.
var durableCalls = []durableCall{{"reserve", ""}, {"notify", ""}, {"notify", ""},
	{"nap", wire.StepSleep}, {"hear", wire.StepWait}, {"spawn", wire.StepInvoke}, {"settle", ""}}

// durableKeys are the step keys of durableCalls: the journal of a job
// that ended done holds exactly these. runKeys are those of run steps.
func durableKeys() []string { return callKeys(func(durableCall) bool { return true }) }

func runKeys() []string { return callKeys(func(c durableCall) bool { return c.kind == "" }) }

// keyKind is the kind of step key's call ("" for a run step), and whether
// the handler makes it.
func keyKind(key string) (string, bool) {
	seen := map[string]int{}
	for _, c := range durableCalls {
		if stepKey(seen, c.name) == key {
			return c.kind, true
		}
	}
	return "", false
}

func callKeys(keep func(durableCall) bool) []string {
	seen := map[string]int{}
	var keys []string
	for _, c := range durableCalls {
		if k := stepKey(seen, c.name); keep(c) {
			keys = append(keys, k)
		}
	}
	return keys
}

// stepKey is name's next occurrence key, counting in seen: name, then
// name#2, name#3...
func stepKey(seen map[string]int, name string) string {
	seen[name]++
	if n := seen[name]; n > 1 {
		return name + "#" + strconv.Itoa(n)
	}
	return name
}

// Ledger line kinds.
const (
	ledgerRun    = "run"    // a step's function began: this run may record the step
	ledgerCommit = "commit" // the step's record came back: Run names the run the journal kept
	ledgerEnd    = "end"    // the handler returned success: Steps are what each step gave it
	// Parking calls (sleep, wait, invoke).
	ledgerPark    = "park"    // the call parked the job: the attempt ends
	ledgerWoke    = "woke"    // Sleep returned: the code after the sleep runs
	ledgerWait    = "wait"    // a wait for the job's event begins
	ledgerHeard   = "heard"   // the wait returned: Heard, N and EventKey say what
	ledgerSpawned = "spawned" // Invoke returned: Child and Run name the child's run that ended it
	ledgerChild   = "child"   // a child job's handler ran (Job is the child, Parent its parent)
)

// ledgerLine is one line of the ledger (ledger.jsonl), appended by a
// chaosworker process.
type ledgerLine struct {
	T       string `json:"t"`
	Job     string `json:"job"`
	Key     string `json:"key,omitempty"`
	Attempt int    `json:"attempt"`
	// Lease is the attempt's lease as its claim reply gave it (0: the
	// worker could not tell).
	Lease  uint64 `json:"lease"`
	Worker string `json:"worker"`
	// Run names one run of a step function: in a run line the run that
	// began, in a commit line the run whose record the step returned.
	Run   string            `json:"run,omitempty"`
	Steps map[string]string `json:"steps,omitempty"` // end: key -> run
	// At is when the line was written (Unix nanoseconds, this machine's
	// clock, as the harness's).
	At int64 `json:"at,omitempty"`
	// Heard is a heard line's outcome (false: the wait timed out), N and
	// EventKey the event's payload.
	Heard    bool   `json:"heard,omitempty"`
	N        int    `json:"n,omitempty"`
	EventKey string `json:"event_key,omitempty"`
	Child    string `json:"child,omitempty"`  // spawned: the child job
	Parent   string `json:"parent,omitempty"` // child: the parent job
}

// stepResult is what a durable step's function returns, recorded in the
// journal: which run it was.
type stepResult struct {
	Run     string `json:"run"`
	Lease   uint64 `json:"lease"`
	Attempt int    `json:"attempt"`
}

// durableInput is what the durable checks look at: the durable jobs the
// submitters got a 2xx for, the final listing of their queue, each listed
// job's journal (with results) and the ledger the steps wrote, in the
// order its lines were written.
type durableInput struct {
	accepted map[string]string      // key -> job id
	jobs     []wire.Job             // the durable queue's final listing
	journals map[string][]wire.Step // job id -> its journal, results included
	ledger   []ledgerLine
	// events are the events the harness sent, by key; clockJumps the
	// spans (Unix nanoseconds) during which a node ran with a clock
	// offset.
	events     map[string]eventSend
	clockJumps [][2]int64
}

// eventSend is the harness's sending of a durable job's event.
type eventSend struct {
	Mode string `json:"mode"` // eventBefore, eventAfter or eventNone
	// Call is when the first request went out, Return when a 2xx came
	// back (0: none did); Rescued says a rescue was sent after healing.
	Call    int64 `json:"call,omitempty"`
	Return  int64 `json:"return,omitempty"`
	Rescued bool  `json:"rescued,omitempty"`
}

// durableResult counts what the durable checks saw.
type durableResult struct {
	Jobs, Done, Failed, Pending int
	// Runs are the step runs the ledger shows; Records the steps the
	// journals hold; Unrecorded the runs whose record never committed (a
	// crash, a planned failure, a stale lease), which a later attempt may
	// run again; Stale the runs by an attempt whose lease had already
	// been replaced when a later attempt's record of the same step came
	// back (a worker cut off from the cluster runs on: fencing refuses its
	// record, not its code).
	Runs, Records, Unrecorded, Stale int
	// Sleeps woke; Heard waits that got their event (Before of them sent
	// before the wait began), TimedOut those that timed out, Excused
	// events lost to a clock jump; Children the child jobs.
	Sleeps, Heard, Before, TimedOut, Excused, Children int
	Anomalies                                          []string
}

func (r *durableResult) anomaly(format string, args ...any) {
	r.Anomalies = append(r.Anomalies, fmt.Sprintf(format, args...))
}

func (r durableResult) String() string {
	return fmt.Sprintf("%d jobs (%d done, %d failed, %d waiting for a retry); %d step runs, %d recorded, %d never recorded, %d stale; %d sleeps woke; %d waits got their event (%d sent before the wait), %d timed out, %d excused by a clock jump; %d children",
		r.Jobs, r.Done, r.Failed, r.Pending, r.Runs, r.Records, r.Unrecorded, r.Stale, r.Sleeps, r.Heard, r.Before, r.TimedOut, r.Excused, r.Children)
}

// stepID names a step of a job.
type stepID struct{ job, key string }

// checkDurable runs the durable checks:
//
//   - no job lost: every accepted durable job exists, is the job its
//     reply named, and finished (or waits for a retry due later);
//   - a journal holds only the handler's step keys, each once, each a
//     run the ledger shows, by an attempt of that job's history;
//   - no recorded step ran again after its record committed: no run by a
//     later attempt than the one whose record the journal keeps (a higher
//     lease: its claim came after the record, so its claim listed the
//     step), no second run in that attempt, and no run begun after a
//     record of the step came back, unless by an older, stale attempt;
//   - every record that came back (a commit line) is the one the journal
//     keeps: none was lost or replaced;
//   - every job that ended done has every step recorded exactly once, and
//     the attempt that reported done saw, step by step, the runs the
//     journal keeps (its end line).
func checkDurable(in durableInput) durableResult {
	var res durableResult
	var parents, children []wire.Job
	jobs := make(map[string]wire.Job, len(in.jobs))
	for _, j := range in.jobs {
		jobs[j.ID] = j
		if j.Type == durableChildType {
			children = append(children, j)
		} else {
			parents = append(parents, j)
		}
	}
	byKey, problems := jobcheck.Accepted(in.accepted, parents)
	res.Anomalies = append(res.Anomalies, problems...)
	res.Jobs = len(byKey)
	records := make(map[stepID]stepResult)
	for _, id := range sortedKeys(in.journals) {
		checkJournal(jobs[id], in.journals[id], records, &res)
	}
	checkSleeps(in, jobs, &res)
	checkWaits(in, byKey, &res)
	checkChildren(in, jobs, children, &res)
	runsOf := checkLedger(in.ledger, jobs, records, &res)
	for _, key := range sortedKeys(byKey) {
		j := byKey[key]
		switch j.Status {
		case wire.StatusDone:
			res.Done++
			checkDone(j, in.journals[j.ID], in.ledger, records, &res)
		case wire.StatusFailed:
			res.Failed++
		case wire.StatusScheduled:
			res.Pending++
		default:
			res.anomaly("durable job %s (%s) is still %s after quiescence: %s", j.ID, key, j.Status, jobcheck.History(j))
		}
	}
	for id, rec := range records {
		if !slices.ContainsFunc(runsOf[id], func(l ledgerLine) bool { return l.Run == rec.Run && l.Lease == rec.Lease }) {
			res.anomaly("durable job %s step %s: the journal keeps run %s (lease %d), which no step of the ledger ran", id.job, id.key, rec.Run, rec.Lease)
		}
	}
	return res
}

// checkJournal checks one job's journal and notes its run steps' records.
func checkJournal(j wire.Job, steps []wire.Step, records map[stepID]stepResult, res *durableResult) {
	keys := durableKeys()
	seen := make(map[string]bool)
	for _, st := range steps {
		id := stepID{j.ID, st.Key}
		if seen[st.Key] {
			res.anomaly("durable job %s: the journal lists step %s twice", j.ID, st.Key)
			continue
		}
		seen[st.Key] = true
		kind, ok := keyKind(st.Key)
		if !ok {
			res.anomaly("durable job %s: the journal holds step %s, which the handler never names (its keys are %s)", j.ID, st.Key, strings.Join(keys, ", "))
		}
		if st.Kind != kind {
			res.anomaly("durable job %s step %s: recorded as a step of kind %q, but the handler makes it a %q", j.ID, st.Key, st.Kind, kind)
			continue
		}
		if kind != "" {
			continue // checkSleeps, checkWaits, checkChildren
		}
		var rec stepResult
		if err := json.Unmarshal(st.Result, &rec); err != nil || rec.Run == "" || st.Status != wire.StepOK {
			res.anomaly("durable job %s step %s: recorded %s with result %s, not a run's", j.ID, st.Key, st.Status, st.Result)
			continue
		}
		res.Records++
		records[id] = rec
		if rec.Lease != 0 && j.ID != "" && !hasLease(j, rec.Lease) {
			res.anomaly("durable job %s step %s: recorded by lease %d, which is no attempt of the job: %s", j.ID, st.Key, rec.Lease, jobcheck.History(j))
		}
	}
}

func hasLease(j wire.Job, lease uint64) bool {
	if j.Lease == lease {
		return true
	}
	return slices.ContainsFunc(j.AttemptHistory, func(a wire.Attempt) bool { return a.Lease == lease })
}

// checkLedger walks the ledger in the order it was written and returns
// each step's run lines.
func checkLedger(ledger []ledgerLine, jobs map[string]wire.Job, records map[stepID]stepResult, res *durableResult) map[stepID][]ledgerLine {
	runsOf := make(map[stepID][]ledgerLine)
	cameBack := make(map[stepID]int) // line number of the first commit line of the step
	unknown := make(map[string]bool)
	for n, l := range ledger {
		if _, ok := jobs[l.Job]; !ok {
			if !unknown[l.Job] {
				unknown[l.Job] = true
				res.anomaly("the ledger names durable job %s, which the cluster does not list", l.Job)
			}
			continue
		}
		id := stepID{l.Job, l.Key}
		rec, recorded := records[id]
		switch l.T {
		case ledgerRun:
			res.Runs++
			runsOf[id] = append(runsOf[id], l)
			if !recorded {
				res.Unrecorded++
				continue
			}
			if l.Run == rec.Run {
				continue
			}
			_, after := cameBack[id]
			switch {
			case later(l, rec):
				res.anomaly("durable job %s step %s ran again (run %s, attempt %d, lease %d, worker %s) after its record by attempt %d (lease %d, run %s) committed: its attempt was claimed after the record",
					l.Job, l.Key, l.Run, l.Attempt, l.Lease, l.Worker, rec.Attempt, rec.Lease, rec.Run)
			case l.Lease != 0 && l.Lease == rec.Lease:
				res.anomaly("durable job %s step %s ran twice in attempt %d (lease %d): runs %s and %s",
					l.Job, l.Key, l.Attempt, l.Lease, rec.Run, l.Run)
			case after && !earlier(l, rec):
				res.anomaly("durable job %s step %s ran again (run %s, attempt %d, worker %s) after its record came back (line %d of the ledger)",
					l.Job, l.Key, l.Run, l.Attempt, l.Worker, cameBack[id]+1)
			case after:
				res.Stale++
				res.Unrecorded++
			default:
				res.Unrecorded++
			}
		case ledgerCommit:
			if _, ok := cameBack[id]; !ok {
				cameBack[id] = n
			}
			switch {
			case !recorded:
				res.anomaly("durable job %s step %s: its record (run %s) came back to attempt %d (lease %d), but the journal holds no such step",
					l.Job, l.Key, l.Run, l.Attempt, l.Lease)
			case l.Run != rec.Run:
				res.anomaly("durable job %s step %s: the record that came back to attempt %d (lease %d) is run %s, but the journal keeps run %s",
					l.Job, l.Key, l.Attempt, l.Lease, l.Run, rec.Run)
			}
		case ledgerEnd, ledgerPark, ledgerWoke, ledgerWait, ledgerHeard, ledgerSpawned, ledgerChild:
		default:
			res.anomaly("ledger line %d has kind %q", n+1, l.T)
		}
	}
	return runsOf
}

// later reports whether run line l is of an attempt claimed after the one
// that recorded rec. Leases are the Raft index of the claim, and a record
// applies only while its lease is the job's current one: an attempt with a
// higher lease was claimed after the record, and its claim listed the
// step. Without a lease, a higher attempt number tells the same.
func later(l ledgerLine, rec stepResult) bool {
	if l.Lease != 0 && rec.Lease != 0 {
		return l.Lease > rec.Lease
	}
	return l.Attempt > rec.Attempt
}

// earlier reports whether run line l is of an attempt claimed before the
// one that recorded rec.
func earlier(l ledgerLine, rec stepResult) bool {
	if l.Lease != 0 && rec.Lease != 0 {
		return l.Lease < rec.Lease
	}
	return l.Attempt < rec.Attempt
}

// checkDone checks a job that ended done: its journal holds every step
// once, and the attempt that reported done ended (its end line) having
// got the runs the journal keeps.
func checkDone(j wire.Job, steps []wire.Step, ledger []ledgerLine, records map[stepID]stepResult, res *durableResult) {
	var keys []string
	for _, st := range steps {
		keys = append(keys, st.Key)
	}
	sort.Strings(keys)
	want := durableKeys()
	sort.Strings(want)
	if !slices.Equal(keys, want) {
		res.anomaly("durable job %s ended done with steps [%s] in its journal; every step once is [%s]", j.ID, strings.Join(keys, " "), strings.Join(want, " "))
	}
	var lease uint64
	for _, a := range j.AttemptHistory {
		if a.Status == wire.StatusDone {
			lease = a.Lease
		}
	}
	if lease == 0 {
		lease = j.Lease
	}
	var end *ledgerLine
	for i := range ledger {
		l := &ledger[i]
		if l.T == ledgerEnd && l.Job == j.ID && (l.Lease == lease || l.Lease == 0 && end == nil) {
			end = l
		}
	}
	if end == nil {
		res.anomaly("durable job %s ended done by lease %d, whose handler never ended in the ledger: %s", j.ID, lease, jobcheck.History(j))
		return
	}
	for _, k := range runKeys() {
		rec, ok := records[stepID{j.ID, k}]
		if got := end.Steps[k]; ok && got != rec.Run {
			res.anomaly("durable job %s ended done by lease %d, whose step %s returned run %s, but the journal keeps run %s", j.ID, lease, k, got, rec.Run)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// readLedger reads the ledger file; a run without durable workers has
// none.
func readLedger(path string) ([]ledgerLine, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []ledgerLine
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		var l ledgerLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, n, err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}
