//go:build !workron_protocol1 && !workron_protocol2 && !workron_protocol3

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/workron/workron/internal/testkit/clustertest"
)

// TestExample runs the example on a real 3-node cluster, both ways: the
// webhook comes (charge once, receipt once, done) and it never does (the
// wait times out, refund, failed). Each step prints once: a line twice
// would be a step run again.
func TestExample(t *testing.T) {
	c := clustertest.New(t, 3)
	for _, tc := range []struct {
		name string
		opt  options
		want []string
	}{
		{"WebhookComes", options{order: "order-1", timeout: time.Hour}, []string{
			"order-1: charged 1999 cents as ch_order-1",
			"webhook: payment.settled order-1 sent, woke 1 job(s)",
			`order-1: settled {"status":"settled"}: receipt sent`,
			`job job-1: done {"charge":"ch_order-1","receipt":"rc_order-1"}`,
		}},
		{"WebhookNeverComes", options{order: "order-2", timeout: 500 * time.Millisecond, noWebhook: true}, []string{
			"order-2: charged 1999 cents as ch_order-2",
			"order-2: no webhook within 500ms: refunded ch_order-2",
			"job job-2: failed: payment of order-2 not settled within 500ms",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var out bytes.Buffer
			if err := run(ctx, c.URLs(), tc.opt, &out); err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			if got := strings.Split(strings.TrimSpace(out.String()), "\n"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("output:\n%s\nwant:\n%s", out.String(), strings.Join(tc.want, "\n"))
			}
		})
	}
}
