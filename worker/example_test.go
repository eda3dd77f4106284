package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/workron/workron/worker"
)

// A worker that runs shell jobs and one typed job, until SIGINT or SIGTERM,
// then lets running jobs finish for up to Grace.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cfg := worker.DefaultConfig()
	cfg.Servers = []string{"http://127.0.0.1:7001", "http://127.0.0.1:7002", "http://127.0.0.1:7003"}
	cfg.Queues = []string{"emails", "default"}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	w, err := worker.New(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	w.Handle("send-email", func(ctx context.Context, job *worker.Job) error {
		var p struct{ To string }
		if err := json.Unmarshal(job.Payload, &p); err != nil {
			return worker.NoRetry(fmt.Errorf("payload: %w", err)) // retrying cannot help
		}
		// Send the mail, giving up when ctx ends.
		return nil
	})
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// A handler that meets a rate limit downstream returns RateLimited: the
// attempt does not count, and the job's concurrency key pauses for every
// worker of the cluster. Snooze only runs the job again later.
func ExampleRateLimited() {
	cfg := worker.DefaultConfig()
	cfg.Servers = []string{"http://127.0.0.1:7001"}
	w, err := worker.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	w.Handle("send", func(ctx context.Context, job *worker.Job) error {
		// resp, err := api.Send(ctx, job.Payload) ...; on a 429:
		return worker.RateLimited(30*time.Second, "429 from the mail API")
	})
	fmt.Println(worker.RateLimited(30*time.Second, "429 from the mail API"))
	fmt.Println(worker.Snooze(5 * time.Minute))
	// Output:
	// rate limited for 30s: 429 from the mail API
	// snoozed for 5m0s
}
