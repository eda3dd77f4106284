package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

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
