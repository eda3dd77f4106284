package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/worker/client"
)

func ExampleClient_Submit() {
	// A stand-in for a Workron node; use your cluster's URLs instead.
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req wire.SubmitRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(wire.Job{
			ID: "job-1", Command: req.Command, Queue: req.Queue, Status: wire.StatusPending,
		})
	}))
	defer node.Close()

	cfg := client.DefaultConfig()
	cfg.Servers = []string{node.URL}
	c, err := client.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	job, err := c.Submit(context.Background(), wire.SubmitRequest{
		Command: "echo hello",
		Queue:   "default",
		Timeout: "90s",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(job.ID, job.Status, job.Command)
	// Output: job-1 pending echo hello
}

// Example_sdk is the Go SDK example of docs/workers.md; it is compiled, not run.
func Example_sdk() {
	ctx := context.Background()
	pool, _ := x509.SystemCertPool()
	run := func() error {
		cfg := client.DefaultConfig()
		cfg.Servers = []string{"https://n1:7001", "https://n2:7001", "https://n3:7001"}
		cfg.Token = os.Getenv("WORKRON_TOKEN") // sent as "Authorization: Bearer …"
		cfg.TLS = &tls.Config{RootCAs: pool}   // or cfg.HTTPClient; nil trusts the system's CAs
		c, err := client.New(cfg)
		if err != nil {
			return err
		}
		defer c.Close()

		job, err := c.Submit(ctx, wire.SubmitRequest{
			Type: "email.send", Payload: json.RawMessage(`{"to":"a@example.com"}`),
			IdempotencyKey: "welcome-a@example.com", // makes the submit safe to resend
		})
		if err != nil {
			return err
		}
		if _, err := c.CreateSchedule(ctx, wire.ScheduleRequest{
			Name: "nightly", Cron: "0 2 * * *", Timezone: "Europe/Paris",
			Job: wire.SubmitRequest{Command: "make backup"},
		}); errors.Is(err, client.ErrConflict) {
			// a schedule of that name exists
		} else if err != nil {
			return err
		}
		done, err := c.Wait(ctx, job.ID, time.Second) // until done, failed or cancelled
		var ae *client.Error
		switch {
		case errors.As(err, &ae):
			log.Printf("HTTP %d %s: %s", ae.Status, ae.Code, ae.Message) // the server's words
		case err != nil:
			return err // transport error, ctx ended
		default:
			log.Printf("%s ended %s", done.ID, done.Status)
		}
		return nil
	}
	_ = run
}
