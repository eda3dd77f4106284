package worker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/workron/workron/worker"
)

// A step with its own retries: the partner API fails twice, the third try
// succeeds, all in one attempt of the job and under one step key (the
// journal records 3 tries). A Job a test builds has no journal, so the
// step runs and is not recorded.
func ExampleJob_StepWith() {
	job := &worker.Job{ID: "job-1"}
	tries := 0
	res, err := job.StepWith(context.Background(), "call-partner", worker.StepOptions{Attempts: 5, Backoff: time.Millisecond},
		func(ctx context.Context) (any, error) {
			if tries++; tries < 3 {
				return nil, errors.New("502 from the partner API")
			}
			return map[string]string{"order": "accepted"}, nil
		})
	fmt.Println(string(res), err, "after", tries, "tries")
	// Output: {"order":"accepted"} <nil> after 3 tries
}

// A handler that waits for a webhook: the wait parks the job (the worker
// frees its slot and sends no report) until the event is sent
// (client.SendEvent, or `workron events send payment.settled order-42`),
// then the handler runs again from the top: the charge replays, and the
// wait returns the event's payload.
func ExampleJob_WaitForEvent() {
	handler := func(ctx context.Context, job *worker.Job) error {
		if _, err := job.Step(ctx, "charge", func(ctx context.Context) (any, error) { return "ch_1", nil }); err != nil {
			return err
		}
		payment, ok, err := job.WaitForEvent(ctx, "settled", "payment.settled", "order-42", time.Hour)
		if err != nil {
			return err // wraps worker.ErrParked while the job waits: return it
		}
		if !ok {
			return worker.NoRetry(errors.New("not settled within an hour"))
		}
		_, err = job.Step(ctx, "receipt", func(ctx context.Context) (any, error) { return string(payment), nil })
		return err
	}
	// Outside a worker a Job has no journal, so it cannot park.
	err := handler(context.Background(), &worker.Job{ID: "job-1"})
	fmt.Println(errors.Is(err, worker.ErrNotDurable))
	// Output: true
}
