package api

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/fsm"
	"github.com/workron/workron/raftnode"
)

// The status table of docs/api.md lists exactly the codes of package wire,
// each beside the status the server answers it with.
func TestDocsStatusTableListsEveryCode(t *testing.T) {
	readme, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	const intro = "These are all the statuses a client can get:"
	_, table, ok := strings.Cut(string(readme), intro)
	if !ok {
		t.Fatalf("docs/api.md has no %q", intro)
	}
	table, _, _ = strings.Cut(strings.TrimLeft(table, "\n"), "\n\n")
	word := regexp.MustCompile("`([a-z_]+)`")
	number := regexp.MustCompile("`([0-9]{3})`")
	documented := map[string][]int{}
	for _, row := range strings.Split(table, "\n") {
		cells := strings.Split(row, "|")
		if len(cells) < 4 {
			continue
		}
		var codes []int
		for _, m := range number.FindAllStringSubmatch(cells[1], -1) {
			n, _ := strconv.Atoi(m[1])
			codes = append(codes, n)
		}
		if len(codes) == 0 {
			continue // the header
		}
		for _, m := range word.FindAllStringSubmatch(cells[2], -1) {
			documented[m[1]] = codes
		}
	}
	for _, code := range wire.Codes {
		st, ok := documented[code]
		if !ok {
			t.Errorf("code %q is not in the status table of docs/api.md", code)
			continue
		}
		if !slices.Contains(st, statusOf(code)) {
			t.Errorf("code %q: docs/api.md says status %v, the server answers %d", code, st, statusOf(code))
		}
	}
	for code := range documented {
		if !slices.Contains(wire.Codes, code) {
			t.Errorf("docs/api.md's status table names %q, which is no wire.Code constant", code)
		}
	}
	if len(statuses) != len(wire.Codes) {
		t.Errorf("statuses maps %d codes, wire.Codes lists %d", len(statuses), len(wire.Codes))
	}
}

// reply maps every rejection the same way whether fail writes it or a
// batch result carries it, with the error's own text as the sentence.
func TestReplyMapsEveryError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code string
		msg  string
	}{
		{fmt.Errorf("job j1: %w", fsm.ErrNotFound), wire.CodeNotFound, "job j1: job not found"},
		{fmt.Errorf("worker w1: %w", fsm.ErrWorkerNotFound), wire.CodeNotFound, "worker w1: worker not found"},
		{fmt.Errorf("schedule s: %w", fsm.ErrScheduleNotFound), wire.CodeNotFound, "schedule s: schedule not found"},
		{fmt.Errorf("gang g: %w", fsm.ErrGangNotFound), wire.CodeNotFound, "gang g: gang not found"},
		{fmt.Errorf("gang g epoch 2: %w", fsm.ErrStaleEpoch), wire.CodeStaleEpoch, "gang g epoch 2: stale epoch"},
		{fmt.Errorf("job j1 lease 3: %w", fsm.ErrStaleLease), wire.CodeStaleLease, "job j1 lease 3: stale lease"},
		{fmt.Errorf("job j1: %w", fsm.ErrLeaseRequired), wire.CodeLeaseRequired, "job j1: lease required"},
		{fmt.Errorf("job j1: %w", fsm.ErrForbidden), wire.CodeForbidden, "job j1: forbidden"},
		{fmt.Errorf("job j1: %w", fsm.ErrNotRunning), wire.CodeNotRunning, "job j1: job is not running"},
		{&fsm.StateError{JobID: "j1", Status: "done", Op: "cancel"}, wire.CodeConflict, "cannot cancel job j1: it is done"},
		{fmt.Errorf("job j1 step a: %w", fsm.ErrStepRecorded), wire.CodeStepRecorded, "job j1 step a: step already recorded"},
		{&fsm.JournalFullError{JobID: "j1", Limit: "max_steps_per_job", Have: 3, Max: 3}, wire.CodeJournalFull, "job j1: the journal holds 3 of max_steps_per_job = 3: the step was not recorded"},
		{&fsm.ValidationError{Field: "queue", Reason: "too long"}, wire.CodeInvalid, "queue: too long"},
		{invalid("max", "must be positive"), wire.CodeInvalid, "max: must be positive"},
		{&badRequest{reason: "too big", tooBig: true}, wire.CodeTooLarge, "too big"},
		{refuse(wire.CodeBadBackup, "not a backup"), wire.CodeBadBackup, "not a backup"},
		{fmt.Errorf("claim: %w", errTooManyLongPolls), wire.CodeOverloaded, msgOverloaded},
		{fmt.Errorf("propose: %w", raftnode.ErrNotLeader), wire.CodeNoLeader, msgNoLeader},
		{fmt.Errorf("propose: %w", raftnode.ErrShutdown), wire.CodeNoLeader, msgNoLeader},
		{fmt.Errorf("propose: %w", raftnode.ErrUnknownOutcome), wire.CodeOutcomeUnknown, whyNotCommitted + msgUnknownOutcome},
		{errors.New("disk on fire"), wire.CodeInternal, "disk on fire"},
	} {
		code, msg := reply(tc.err)
		if code != tc.code || msg != tc.msg {
			t.Errorf("reply(%v) = %q, %q; want %q, %q", tc.err, code, msg, tc.code, tc.msg)
		}
	}
	if statusOf(wire.CodeStaleEpoch) != http.StatusConflict || statusOf("no such code") != http.StatusInternalServerError {
		t.Error("statusOf maps stale_epoch or an unknown code wrongly")
	}
}
