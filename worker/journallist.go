package worker

import (
	"context"
	"fmt"

	"github.com/workron/workron/api/wire"
)

// A claim lists at most wire.MaxClaimJournalSteps steps of a job's
// journal. When it lists fewer than the journal holds, the attempt reads
// the whole listing once (GET /jobs/{id}/steps, by pages, without
// results) before its first step: a step not listed is then known to be
// new without a read of its own, and a step recorded ok with no result
// (size 0: its result is null) is replayed without one. Only the steps
// with a result are read, one GET each, when the handler reaches them.

// journalPage is the steps asked for per page of the listing: the
// server's largest page (api.MaxPageLimit).
const journalPage = 1000

// maxJournalPages bounds the pages read for one listing: the cluster holds
// at most 10,000 steps per job, so a server that sends more is refused.
const maxJournalPages = 100

// readListing reads the whole listing of the journal once, when the
// claim's was truncated, and from then on the journal knows every step.
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
		page, err := j.client.Steps(ctx, j.jobID, cursor, journalPage)
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
			j.complete = true
			return nil
		}
	}
	return fmt.Errorf("read the journal: more than %d pages", maxJournalPages)
}

// listedNull is the listed step key when the listing says all there is
// to know of it: recorded ok with no result. nil: not listed, or its
// result must be read.
func (j *journal) listedNull(key string) *wire.Step {
	j.mu.Lock()
	defer j.mu.Unlock()
	st, ok := j.listed[key]
	if !ok || st.Status != wire.StepOK || st.Size != 0 {
		return nil
	}
	return &st
}
