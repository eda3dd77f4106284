package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/workron/workron/worker"
)

// A handler that reads its parent's result, reports progress as it goes
// (the worker's next heartbeat carries the latest) and returns a result of
// its own, which its dependents read in turn.
func ExampleJob_SetResult() {
	handler := func(ctx context.Context, job *worker.Job) error {
		var src struct{ Files []string }
		if err := job.ParentResult("job-1", &src); err != nil {
			return worker.NoRetry(err)
		}
		for i, f := range src.Files {
			job.Progress(100*(i+1)/len(src.Files), "resized "+f)
		}
		return job.SetResult(map[string]int{"thumbnails": len(src.Files)})
	}
	job := &worker.Job{ID: "job-2", ParentResults: map[string]json.RawMessage{"job-1": json.RawMessage(`{"Files":["a.png","b.png"]}`)}}
	fmt.Println(handler(context.Background(), job))
	fmt.Println(errors.Is(job.SetResult(strings.Repeat("x", 70_000)), worker.ErrResultTooLarge))
	fmt.Println(errors.Is(job.ParentResult("job-9", new(any)), worker.ErrNoParentResult))
	// Output:
	// <nil>
	// true
	// true
}
