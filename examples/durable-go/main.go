// Command durable-go is a runnable example of Workron's durable steps in
// Go: an order job charges a card (a step), waits for the payment
// provider's webhook (an event, with a timeout), then sends a receipt
// (a step). While it waits the job is parked: no worker slot is held, and
// a crash or restart loses nothing. The program serves the job and plays
// the webhook itself, once the job waits for it.
//
// Start a node first (go run ./cmd/workron dev), then:
//
//	go run ./examples/durable-go --server http://127.0.0.1:7070   # or WORKRON_SERVER=...
//	go run ./examples/durable-go --no-webhook --timeout 2s   # the timeout path: refund
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker"
	"github.com/workron/workron/worker/client"
)

// order is the payload of an "order" job.
type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"` // cents
}

// options are the example's flags.
type options struct {
	order     string
	timeout   time.Duration // how long the job waits for the webhook
	noWebhook bool          // never send it: the wait times out
}

func main() {
	server := flag.String("server", cmp.Or(os.Getenv("WORKRON_SERVER"), "http://127.0.0.1:7070"), "node URLs, comma-separated (default: WORKRON_SERVER, else the dev node's)")
	var opt options
	flag.StringVar(&opt.order, "order", "order-42", "the order id (the event's key)")
	flag.DurationVar(&opt.timeout, "timeout", time.Hour, "how long the job waits for the payment webhook")
	flag.BoolVar(&opt.noWebhook, "no-webhook", false, "send no webhook: the job's wait times out and it refunds")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, strings.Split(*server, ","), opt, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "durable-go:", err)
		os.Exit(1)
	}
}

// handleOrder is the durable handler. Each step's function runs once per
// job, whatever the attempts: a later attempt gets its recorded result.
// The wait parks the job (WaitForEvent returns an error wrapping
// worker.ErrParked, which the handler returns); when the event comes the
// handler runs again from the top, the charge replays, and the wait
// returns the event's payload.
func handleOrder(out io.Writer, timeout time.Duration) worker.HandlerFunc {
	return func(ctx context.Context, job *worker.Job) error {
		var o order
		if err := json.Unmarshal(job.Payload, &o); err != nil {
			return worker.NoRetry(err)
		}
		charge, err := worker.StepAs(ctx, job, "charge", func(ctx context.Context) (string, error) {
			// A real charge passes an idempotency key: job id and step key.
			id := "ch_" + o.ID
			fmt.Fprintf(out, "%s: charged %d cents as %s\n", o.ID, o.Amount, id)
			return id, nil
		})
		if err != nil {
			return err
		}
		payment, ok, err := job.WaitForEvent(ctx, "settled", "payment.settled", o.ID, timeout)
		if err != nil {
			return err // worker.ErrParked while it waits
		}
		if !ok {
			if _, err := job.Step(ctx, "refund", func(ctx context.Context) (any, error) {
				fmt.Fprintf(out, "%s: no webhook within %s: refunded %s\n", o.ID, timeout, charge)
				return nil, nil
			}); err != nil {
				return err
			}
			return worker.NoRetry(fmt.Errorf("payment of %s not settled within %s", o.ID, timeout))
		}
		receipt, err := worker.StepAs(ctx, job, "receipt", func(ctx context.Context) (string, error) {
			fmt.Fprintf(out, "%s: settled %s: receipt sent\n", o.ID, payment)
			return "rc_" + o.ID, nil
		})
		if err != nil {
			return err
		}
		return job.SetResult(map[string]string{"charge": charge, "receipt": receipt})
	}
}

// run serves "order" jobs on the "examples-durable" queue, submits one,
// plays the webhook once the job waits for it (unless opt.noWebhook), and
// prints how the job ended.
func run(ctx context.Context, servers []string, opt options, out io.Writer) error {
	ccfg := client.DefaultConfig()
	ccfg.Servers = servers
	c, err := client.New(ccfg)
	if err != nil {
		return err
	}
	defer c.Close()

	wcfg := worker.DefaultConfig()
	wcfg.Servers = servers
	wcfg.Queues = []string{"examples-durable"}
	wcfg.Shell = false
	w, err := worker.New(wcfg)
	if err != nil {
		return err
	}
	w.Handle("order", handleOrder(out, opt.timeout))
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() {
		stop()
		<-done
	}()

	payload, _ := json.Marshal(order{ID: opt.order, Amount: 1999})
	one := 1
	job, err := c.Submit(ctx, wire.SubmitRequest{Type: "order", Payload: payload, Queue: "examples-durable", MaxAttempts: &one})
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	if !opt.noWebhook {
		if err := webhook(ctx, c, job.ID, opt.order, out); err != nil {
			return err
		}
	}
	end, err := c.Wait(ctx, job.ID, 100*time.Millisecond)
	if err != nil {
		return fmt.Errorf("wait for %s: %w", job.ID, err)
	}
	if end.Status == wire.StatusDone {
		fmt.Fprintf(out, "job %s: done %s\n", end.ID, end.Result)
	} else {
		fmt.Fprintf(out, "job %s: %s: %s\n", end.ID, end.Status, end.LastError)
	}
	return nil
}

// webhook plays the payment provider: once job id waits for its event,
// it sends payment.settled for the order (an HTTP handler would call
// SendEvent the same way; an event sent before the wait is kept for the
// cluster's look-back window and matches it too).
func webhook(ctx context.Context, c *client.Client, id, orderID string, out io.Writer) error {
	for {
		j, err := c.Get(ctx, id)
		if err != nil {
			return fmt.Errorf("get %s: %w", id, err)
		}
		if j.Parked != nil && j.Parked.Kind == wire.StepWait {
			break
		}
		if j.Status == wire.StatusDone || j.Status == wire.StatusFailed {
			return errors.New("the job ended before it waited for its webhook")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	rep, err := c.SendEvent(ctx, wire.EventRequest{Name: "payment.settled", Key: orderID, Payload: json.RawMessage(`{"status":"settled"}`)})
	if err != nil {
		return fmt.Errorf("send the webhook's event: %w", err)
	}
	fmt.Fprintf(out, "webhook: payment.settled %s sent, woke %d job(s)\n", orderID, rep.Woke)
	return nil
}
