// Command typed is a runnable example of Workron's Go SDK: it submits typed
// jobs with the client and serves them with a typed handler in the same
// process, then prints how each one ended.
//
// Start a node first (go run ./cmd/workron dev), then:
//
//	go run ./examples/typed --server http://127.0.0.1:7070
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker"
	"github.com/workron/workron/worker/client"
)

// greeting is the payload of a "greet" job.
type greeting struct {
	Name string `json:"name"`
}

func main() {
	server := flag.String("server", "http://127.0.0.1:7070", "node URLs, comma-separated")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, strings.Split(*server, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "typed:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, servers []string) error {
	ccfg := client.DefaultConfig()
	ccfg.Servers = servers
	c, err := client.New(ccfg)
	if err != nil {
		return err
	}
	defer c.Close()

	// Submit: one job per name; "" fails for good, showing NoRetry.
	var ids []string
	for _, name := range []string{"Ada", "Grace", ""} {
		payload, _ := json.Marshal(greeting{Name: name})
		job, err := c.Submit(ctx, wire.SubmitRequest{Type: "greet", Payload: payload, Queue: "examples"})
		if err != nil {
			return fmt.Errorf("submit: %w", err)
		}
		ids = append(ids, job.ID)
	}

	// Serve: a worker that runs only "greet" jobs from the "examples" queue.
	wcfg := worker.DefaultConfig()
	wcfg.Servers = servers
	wcfg.Queues = []string{"examples"}
	wcfg.Shell = false
	w, err := worker.New(wcfg)
	if err != nil {
		return err
	}
	w.Handle("greet", func(ctx context.Context, job *worker.Job) error {
		var g greeting
		if err := json.Unmarshal(job.Payload, &g); err != nil {
			return worker.NoRetry(err)
		}
		if g.Name == "" {
			return worker.NoRetry(errors.New("nobody to greet"))
		}
		fmt.Printf("hello, %s (job %s, attempt %d)\n", g.Name, job.ID, job.Attempt)
		return nil
	})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()

	for _, id := range ids {
		job, err := c.Wait(ctx, id, 100*time.Millisecond)
		if err != nil {
			stop()
			return fmt.Errorf("wait for %s: %w", id, err)
		}
		fmt.Printf("%s: %s %s\n", job.ID, job.Status, job.LastError)
	}
	stop()
	return <-done
}
