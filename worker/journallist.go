package worker

import (
	"context"
	"fmt"

	"github.com/workron/workron/api/wire"
)

// A claim lists at most wire.MaxClaimJournalSteps steps of a job's
// journal, without results. When it lists fewer than the journal holds,
// the attempt reads the whole listing once, with results (GET
// /jobs/{id}/steps?results=1, by pages of at most 1,000 steps and
// wire.MaxStepPageResultBytes of results), before its first step: a step
// not listed is then known to be new, and a step listed with its outcome
// is replayed, without a read of its own. The attempt holds those
// results until it ends: at most the journal's bound, fsm.MaxJournalBytes
// (16 MiB, keys included), which one attempt may hold; and it reads them
// once, where a GET per step was one round trip per replayed step (a
// resume over 10,000 steps with results took seconds).
//
// A step the claim listed whole (its journal not truncated) comes without
// its result: one with a result is read, one GET, when the handler
// reaches it. A waiting step (a wait or invoke the job parked on) is read
// again too: its outcome may have come since the listing.

// journalPage is the steps asked for per page of the listing: the
// server's largest page (api.MaxPageLimit).
const journalPage = 1000

// maxJournalPages bounds the pages read for one listing: the cluster holds
// at most 10,000 steps per job, so a server that sends more is refused.
const maxJournalPages = 100

// readListing reads the whole listing of the journal, with results, once,
// when the claim's was truncated; from then on the journal knows every
// step and the outcome of each one recorded.
func (j *journal) readListing(ctx context.Context) error {
	j.mu.Lock()
	complete := j.complete
	j.mu.Unlock()
	if complete {
		return nil
	}
	var steps []wire.Step
	cursor := ""
	for range maxJournalPages {
		page, err := j.client.StepsWithResults(ctx, j.jobID, cursor, journalPage)
		if err != nil {
			return fmt.Errorf("read the journal: %w", err)
		}
		steps = append(steps, page.Steps...)
		if cursor = page.NextCursor; cursor == "" {
			j.mu.Lock()
			defer j.mu.Unlock()
			for _, st := range steps {
				j.recorded[st.Key] = st.Status
				j.listed[st.Key] = st
			}
			j.complete, j.withResults = true, true
			return nil
		}
	}
	return fmt.Errorf("read the journal: more than %d pages", maxJournalPages)
}

// listedStep is the listed step key when the listing says all there is
// to know of it: read with its result (readListing), or recorded ok with
// no result (size 0: its result is null), and not waiting. nil: not
// listed, or it must be read.
func (j *journal) listedStep(key string) *wire.Step {
	j.mu.Lock()
	defer j.mu.Unlock()
	st, ok := j.listed[key]
	switch {
	case !ok || st.Status == wire.StepWaiting:
		return nil
	case st.Size == 0 && st.Status == wire.StepOK, j.withResults && (st.Size == 0 || st.Result != nil):
		return &st // (a listing from a server that ignored ?results has none: read each step)
	}
	return nil
}
