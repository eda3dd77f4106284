package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/workron/workron/api/wire"
	"github.com/workron/workron/internal/testkit/clustertest"
)

// screenshotDir is where WORKRON_SCREENSHOTS=1 writes the images of docs/cli.md.
const screenshotDir = "../../docs/img"

// TestDashboardInBrowser drives the dashboard in headless Chromium against a
// real three-node cluster, through a follower (so every read and click is
// forwarded to the leader, as for a user behind a load balancer): the jobs
// appear, cancel and pause change the cluster, a job page shows its attempts
// and dependencies, errors reach the banner. Raft's timeouts are 1 s: the
// test stops only a follower, and with Chromium beside the race detector a
// shorter one saw an election answer a write 504 outcome_unknown.
func TestDashboardInBrowser(t *testing.T) {
	chrome := findChromium(t)
	c := clustertest.New(t, 3, clustertest.WithLeaseTTL(10*time.Minute), clustertest.WithRaftTimeout(time.Second))
	follower := c.Followers(t)[0]
	cl := &client{t: t, base: c.URL(c.Leader(t))}
	jobs := seed(cl)

	ctx := startBrowser(t, chrome)
	dash := c.URL(follower) + "/ui/"
	b := &page{t: t, ctx: ctx}

	t.Run("JobsAppear", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(dash + "#/jobs"))
		for _, id := range jobs.all {
			b.waitFor(fmt.Sprintf("a row for %s", id), fmt.Sprintf(`!!document.querySelector('tr[data-job-id=%q]')`, id))
		}
		b.waitFor("the running job shown running", fmt.Sprintf(`rowStatus(%q) === "running"`, jobs.train))
	})

	t.Run("CancelChangesTheState", func(t *testing.T) {
		b.t = t
		id := jobs.cancel
		b.waitFor("the job pending", fmt.Sprintf(`rowStatus(%q) === "pending"`, id))
		btn := fmt.Sprintf(`tr[data-job-id=%q] button[data-action="cancel"]`, id)
		b.do(chromedp.Click(chromedp.CSS(btn)))
		b.do(chromedp.Click(chromedp.CSS(btn + `[data-armed="1"]`)))
		b.waitFor("the row to show cancelled", fmt.Sprintf(`rowStatus(%q) === "cancelled"`, id))
		if j := cl.job(id); j.Status != wire.StatusCancelled {
			t.Fatalf("the API shows %s as %s after the click", id, j.Status)
		}
		b.waitFor("a retry button on the cancelled job", fmt.Sprintf(`!!document.querySelector('tr[data-job-id=%q] button[data-action="retry"]')`, id))
		b.screenshot("dashboard-jobs.png")
	})

	t.Run("RefreshesItself", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(dash + "#/jobs"))
		b.waitFor("the job pending", fmt.Sprintf(`rowStatus(%q) === "pending"`, jobs.video))
		cl.call(http.MethodPost, "/jobs/"+jobs.video+"/cancel", nil, nil, http.StatusOK)
		b.waitFor("the change made elsewhere", fmt.Sprintf(`rowStatus(%q) === "cancelled"`, jobs.video))
	})

	t.Run("PagesGoOlderAndBack", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(dash + "#/jobs?limit=4"))
		newest := jobs.all[len(jobs.all)-1]
		b.waitFor("four rows, newest first", fmt.Sprintf(`document.querySelectorAll('tr[data-job-id]').length === 4 && !!document.querySelector('tr[data-job-id=%q]')`, newest))
		b.do(chromedp.Click(chromedp.ID("page-next")))
		b.waitFor("page 2 without the newest job", fmt.Sprintf(`document.querySelector('[data-test="page"]').textContent === "Page 2" && !document.querySelector('tr[data-job-id=%q]')`, newest))
		b.do(chromedp.Click(chromedp.ID("page-prev")))
		b.waitFor("page 1 again", fmt.Sprintf(`document.querySelector('[data-test="page"]').textContent === "Page 1" && !!document.querySelector('tr[data-job-id=%q]')`, newest))
	})

	t.Run("FiltersNarrowTheList", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(dash + "#/jobs?status=failed"))
		b.waitFor("only the failed job listed", fmt.Sprintf(
			`document.querySelectorAll('tr[data-job-id]').length === 1 && rowStatus(%q) === "failed"`, jobs.failed))
	})

	t.Run("AFilterNarrowsTheListAndCountsItsStatuses", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(dash + "#/jobs"))
		b.do(chromedp.SendKeys(chromedp.CSS(`input[data-test="job-filter"]`), `queue == "email" and command contains "send-digest"`))
		b.click(`button[data-action="apply-filter"]`)
		var want wire.JobCount
		cl.call(http.MethodGet, "/jobs/count?filter="+url.QueryEscape(`queue == "email" and command contains "send-digest"`), nil, &want, http.StatusOK)
		if want.Count != 3 || want.ByStatus["failed"] != 1 || want.ByStatus["pending"] != 2 {
			t.Fatalf("the API counts %+v, want the 3 digests: 1 failed, 2 pending", want)
		}
		b.waitFor("the three digests listed", fmt.Sprintf(
			`document.querySelectorAll('tr[data-job-id]').length === 3 && rowStatus(%q) === "failed" && [...document.querySelectorAll('tr[data-job-id]')].every((r) => r.textContent.includes('send-digest'))`, jobs.failed))
		b.waitFor("the filter's counts on the tabs", `tabCount("all") === "3" && tabCount("failed") === "1" && tabCount("pending") === "2" && tabCount("done") === "0"`)
		b.click(`a.tab[data-status="failed"]`)
		b.waitFor("the failed digest alone, the counts kept", fmt.Sprintf(
			`document.querySelectorAll('tr[data-job-id]').length === 1 && rowStatus(%q) === "failed" && tabCount("pending") === "2"`, jobs.failed))

		b.do(chromedp.Navigate(dash + "#/jobs?filter=" + url.QueryEscape(`queue = "email"`)))
		b.waitFor("the server's word on the bad filter in the banner", `!document.getElementById("banner").hidden && document.getElementById("banner").dataset.code === "invalid" && document.getElementById("banner").textContent.includes("filter: at column 7")`)
		b.click(`button[data-action="clear-filter"]`)
		b.waitFor("every job again", fmt.Sprintf(`!!document.querySelector('tr[data-job-id=%q]') && !!document.querySelector('tr[data-job-id=%q]')`, jobs.failed, jobs.fetch))
	})

	t.Run("ChartsDrawTheJobsThatRan", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(dash + "#/charts"))
		line := func(chart, series string) string {
			return fmt.Sprintf(`document.querySelector('[data-test=%q] path[data-series=%q]')`, chart, series)
		}
		b.waitFor("fetch and hello done", line("chart-done", "etl")+` && `+line("chart-done", "etl")+`.dataset.total === "1" && `+line("chart-done", "default")+`.dataset.total === "1"`)
		b.waitFor("the failed digest", line("chart-failed", "email")+` && `+line("chart-failed", "email")+`.dataset.total === "1"`)
		b.waitFor("the two digests waiting", line("chart-depth", "email")+` && `+line("chart-depth", "email")+`.dataset.max === "2"`)
		b.waitFor("a submit-to-start latency", line("chart-latency", "p95")+` && Number(`+line("chart-latency", "p95")+`.dataset.max) > 0`)
		b.screenshot("dashboard-charts.png")
		b.do(chromedp.Navigate(dash + "#/charts?queue=email&span=1h"))
		b.waitFor("the email queue alone", line("chart-failed", "email")+` && document.querySelectorAll('[data-test="chart-done"] path[data-series]').length === 1`)
	})

	t.Run("JobPageShowsAttemptsAndDependencies", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(dash + "#/jobs/" + jobs.train))
		b.waitFor("two attempts", `document.querySelectorAll('[data-test="attempt-row"]').length === 2`)
		b.waitFor("the failed first attempt", `document.querySelector('[data-test="attempt-row"][data-attempt="1"] [data-test="attempt-status"]').textContent === "failed"`)
		b.waitFor("parent and dependent in the graph", fmt.Sprintf(
			`!!document.querySelector('[data-test="graph-node"][data-job-id=%q]') && !!document.querySelector('[data-test="graph-node"][data-job-id=%q]')`,
			jobs.fetch, jobs.publish))
		b.waitFor("a cancel button", `!!document.querySelector('.page-head button[data-action="cancel"]')`)
		b.waitFor("its progress", `document.querySelector('[data-test="progress"]').dataset.percent === "45" && document.querySelector('[data-test="progress-message"]').textContent === "epoch 9/20"`)
		b.screenshot("dashboard-job.png")
	})

	t.Run("JobPageShowsItsResult", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(dash + "#/jobs/" + jobs.fetch))
		b.waitFor("the result", `JSON.parse(document.querySelector('[data-test="result-json"]').textContent).files === 412`)
	})

	t.Run("JobPageDrawsItsSteps", func(t *testing.T) {
		b.t = t
		id := cl.submit(wire.SubmitRequest{Command: "./checkout.sh --order 42", Queue: "orders"})
		j := cl.claim("cpu-worker-1", "orders")
		if j.ID != id {
			t.Fatalf("claimed %s from orders, want %s", j.ID, id)
		}
		put := func(key string, req wire.StepRequest) {
			req.Lease = j.Lease
			cl.call(http.MethodPut, "/jobs/"+id+"/steps/"+url.PathEscape(key), req, nil, http.StatusCreated)
		}
		put("charge", wire.StepRequest{Result: json.RawMessage(`{"charge":"ch_1"}`), DurationMillis: 420})
		put("send", wire.StepRequest{Status: wire.StepFailed, Result: json.RawMessage(`"no such address"`), Attempts: 3, DurationMillis: 80})
		put("send#2", wire.StepRequest{DurationMillis: 5})
		row := func(key string) string {
			return fmt.Sprintf(`document.querySelector('[data-test="step-row"][data-key=%q]')`, key)
		}
		b.do(chromedp.Navigate(dash + "#/jobs/" + id))
		b.waitFor("three steps in the order they began", `[...document.querySelectorAll('[data-test="step-row"]')].map((r) => r.dataset.key).join() === "charge,send,send#2"`)
		b.waitFor("each step's status, tries and result size", row("charge")+`.querySelector('[data-test="step-status"]').textContent === "ok" && `+
			row("charge")+`.querySelector('[data-test="step-size"]').textContent === "17 B" && `+
			row("send")+`.dataset.status === "failed" && `+row("send")+`.children[3].textContent === "3" && `+
			row("send#2")+`.querySelector('[data-test="step-size"]').textContent === "0 B"`)
		b.waitFor("a bar per step on one time scale, the longest step the widest", `(() => {
			const w = (k) => parseFloat(document.querySelector('[data-test="step-row"][data-key="' + k + '"] .bar').style.width);
			return w("charge") > w("send") && w("send") >= w("send#2") && w("send#2") > 0;
		})()`)
		b.click(`[data-test="step-row"][data-key="charge"] button[data-action="step-result"]`)
		b.waitFor("the step's result under it", `JSON.parse(document.querySelector('[data-test="step-result"][data-key="charge"] pre')?.textContent || "{}").charge === "ch_1"`)
		b.screenshot("dashboard-steps.png")
		b.click(`[data-test="step-row"][data-key="charge"] button[data-action="step-result"]`)
		b.waitFor("the result hidden again", `!document.querySelector('[data-test="step-result"]')`)

		// A journal longer than a page is read a page at a time.
		for i := range 110 {
			put(fmt.Sprintf("item-%03d", i), wire.StepRequest{})
		}
		b.waitFor("the first page of 113 steps", `document.querySelector('[data-test="steps"]')?.dataset.count === "113" && `+
			`document.querySelectorAll('[data-test="step-row"]').length === 100 && !!`+row("charge")+` && !`+row("send#2"))
		b.click(`#steps-next`)
		b.waitFor("the second page", `document.querySelector('[data-test="steps-page"]')?.textContent === "Page 2" && `+
			`document.querySelectorAll('[data-test="step-row"]').length === 13 && !!`+row("send#2")+` && !!`+row("item-099")+` && !`+row("charge"))
		b.click(`#steps-first`)
		b.waitFor("the first page again", `document.querySelector('[data-test="steps-page"]')?.textContent === "Page 1" && !!`+row("charge"))
	})

	t.Run("ParkedJobsSayWhatTheyWaitFor", func(t *testing.T) {
		b.t = t
		running := func(queue string) wire.Job {
			cl.submit(wire.SubmitRequest{Command: "./order.sh --step " + queue, Queue: queue})
			return cl.claim("cpu-worker-1", queue)
		}
		park := func(j wire.Job, key, what string, body map[string]any) wire.ParkReply {
			body["lease"] = j.Lease
			var rep wire.ParkReply
			cl.call(http.MethodPost, "/jobs/"+j.ID+"/steps/"+key+"/"+what, body, &rep, http.StatusCreated)
			if !rep.Parked {
				t.Fatalf("%s %s of %s did not park: %+v", what, key, j.ID, rep)
			}
			return rep
		}
		sleeper, waiter, parent := running("durable-nap"), running("durable-pay"), running("durable-ship")
		park(sleeper, "cool-off", "sleep", map[string]any{"duration_ms": 3 * 3600 * 1000})
		cl.call(http.MethodPut, "/jobs/"+waiter.ID+"/steps/charge", wire.StepRequest{Lease: waiter.Lease, Result: json.RawMessage(`{"charge":"ch_2"}`)}, nil, http.StatusCreated)
		park(waiter, "settled", "wait", map[string]any{"event": "payment.settled", "key": "order-42", "timeout_ms": 24 * 3600 * 1000})
		child := park(parent, "ship", "invoke", map[string]any{"job": wire.SubmitRequest{Command: "./ship.sh --order 42", Queue: "durable-child"}}).Step.ChildID
		if child == "" {
			t.Fatal("the invoke's step names no child")
		}

		parked := `document.querySelector('[data-test="parked"]')`
		b.do(chromedp.Navigate(dash + "#/jobs/" + sleeper.ID))
		b.waitFor("the sleeper says it sleeps until a time", parked+`?.dataset.kind === "sleep" && !!`+parked+`.querySelector('time') && `+parked+`.textContent.includes("cool-off")`)
		b.waitFor("its sleep step in the timeline", `document.querySelector('[data-test="step-row"][data-key="cool-off"]')?.dataset.kind === "sleep"`)
		b.do(chromedp.Navigate(dash + "#/jobs/" + waiter.ID))
		b.waitFor("the waiter names its event and key", parked+`?.dataset.kind === "wait" && `+parked+`.textContent.includes("payment.settled") && `+parked+`.textContent.includes("order-42")`)
		b.waitFor("its wait step waiting, after the charge", `[...document.querySelectorAll('[data-test="step-row"]')].map((r) => r.dataset.key + ":" + r.dataset.status).join() === "charge:ok,settled:waiting"`)
		b.screenshot("dashboard-parked.png")
		b.do(chromedp.Navigate(dash + "#/jobs/" + parent.ID))
		b.waitFor("the parent links its child", fmt.Sprintf(parked+`?.dataset.kind === "invoke" && !!`+parked+`.querySelector('a[href="#/jobs/%s"]')`, child))
	})

	t.Run("GangTaskPageShowsItsGang", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(dash + "#/jobs/" + jobs.gang[1]))
		b.waitFor("both tasks in the gang card", `document.querySelectorAll('[data-test="gang"] [data-test="gang-task"]').length === 2`)
		b.waitFor("the other task linked", fmt.Sprintf(`!!document.querySelector('[data-test="gang-task"][data-job-id=%q] a')`, jobs.gang[0]))
		b.waitFor("the gang waiting to be placed", `document.querySelector('[data-test="gang-status"]').textContent === "blocked"`)
		b.waitFor("why no worker can run it", `document.querySelector('[data-test="gang-unschedulable"]').textContent.includes("VRAM")`)
		b.screenshot("dashboard-gang.png")
	})

	t.Run("WaitingJobsSayWhy", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(dash + "#/jobs"))
		b.waitFor("the blocked job's row names its dependency", fmt.Sprintf(
			`document.querySelector('tr[data-job-id=%q] [data-test="row-waiting"]')?.dataset.code === "dependency"`, jobs.publish))
		b.do(chromedp.Navigate(dash + "#/jobs/" + jobs.publish))
		b.waitFor("the job page says what it waits for", fmt.Sprintf(
			`(document.querySelector('[data-test="waiting"]')?.textContent || "").includes(%q)`, jobs.train))
		b.do(chromedp.Navigate(dash + "#/jobs/" + jobs.gang[0]))
		b.waitFor("the gang task says no worker fits it", `document.querySelector('[data-test="waiting"]')?.dataset.code === "resources"`)
	})

	t.Run("QueuesPauseAndResume", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(dash + "#/queues"))
		b.do(chromedp.Click(chromedp.CSS(`tr[data-queue="email"] button[data-action="pause"]`)))
		b.waitFor("the queue shown paused", `document.querySelector('tr[data-queue="email"]').dataset.paused === "1"`)
		if !cl.paused("email") {
			t.Fatal("the API does not show queue email paused after the click")
		}
		b.do(chromedp.Click(chromedp.CSS(`tr[data-queue="email"] button[data-action="resume"]`)))
		b.waitFor("the queue shown active", `document.querySelector('tr[data-queue="email"]').dataset.paused === "0"`)
		if cl.paused("email") {
			t.Fatal("the API still shows queue email paused after resume")
		}
	})

	t.Run("QueueLimitsAreSetFromThePage", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(dash + "#/queues"))
		// Ahead of time: the queue has no jobs yet.
		b.click(`button[data-action="new-limits"]`)
		form := `form[data-test="limits-form"] `
		b.do(
			chromedp.SendKeys(chromedp.CSS(form+`input[name="name"]`), "tenants"),
			chromedp.SendKeys(chromedp.CSS(form+`input[name="concurrency"]`), "3"),
			chromedp.SendKeys(chromedp.CSS(form+`input[name="key_concurrency"]`), "1"),
			chromedp.SendKeys(chromedp.CSS(form+`input[name="rate"]`), "600/m"),
		)
		b.click(form + `button[data-action="save"]`)
		b.waitFor("the queue listed with its limits", `document.querySelector('tr[data-queue="tenants"]')?.dataset.limited === "1"`)
		if l := cl.limits("tenants"); l == nil || deref(l.Concurrency) != 3 || deref(l.KeyConcurrency) != 1 || l.Rate != "600/m" || l.KeyRate != "" {
			t.Fatalf("the API shows the limits the page set as %+v", l)
		}

		// A job held back by its key's limit says so, in the list and on
		// its page, and the queue counts it held.
		cl.call(http.MethodPost, "/workers/register", wire.Worker{ID: "tenant-worker-1", Resources: wire.Resources{Slots: 4}, Queues: []string{"tenants"}}, nil, http.StatusCreated)
		first := cl.submit(wire.SubmitRequest{Command: "./sync-tenant.sh acme", Queue: "tenants", ConcurrencyKey: "acme"})
		second := cl.submit(wire.SubmitRequest{Command: "./sync-tenant.sh acme --full", Queue: "tenants", ConcurrencyKey: "acme"})
		j := cl.claim("tenant-worker-1", "tenants")
		if j.ID != first {
			t.Fatalf("claimed %s from tenants, want %s", j.ID, first)
		}
		firstLease := j.Lease
		b.waitFor("one job held, by the key's limit", `(() => { const el = document.querySelector('tr[data-queue="tenants"] [data-test="held"]');
			return el?.dataset.held === "1" && el.title.includes("key concurrency"); })()`)
		b.waitFor("the running count against the queue's limit", `document.querySelector('tr[data-queue="tenants"] [data-limit="concurrency"]')?.textContent === "1 / 3 running"`)
		b.screenshot("dashboard-queues.png")
		b.do(chromedp.Navigate(dash + "#/jobs?queue=tenants"))
		b.waitFor("the held job's row says why", fmt.Sprintf(`document.querySelector('tr[data-job-id=%q] [data-test="row-waiting"]')?.dataset.code === "limit"`, second))
		b.do(chromedp.Navigate(dash + "#/jobs/" + second))
		b.waitFor("the job page names the limit", `(document.querySelector('[data-test="waiting"]')?.textContent || "").includes("key acme at its limit 1/1")`)

		// Editing starts from the limits as they are: one field changed,
		// the others kept, key weights too (set through the API; the form
		// does not show them).
		cl.call(http.MethodPut, "/queues/tenants", wire.QueueLimits{Concurrency: wire.Limit(3), KeyConcurrency: wire.Limit(1), Rate: "600/m",
			KeyWeights: map[string]int{"acme": 3}}, nil, http.StatusOK)
		b.do(chromedp.Navigate(dash + "#/queues"))
		b.click(`tr[data-queue="tenants"] button[data-action="limits"]`)
		b.waitFor("the form filled in", `document.querySelector('form[data-test="limits-form"] input[name="key_concurrency"]').value === "1"`)
		b.do(chromedp.SetValue(chromedp.CSS(form+`input[name="key_concurrency"]`), "2"))
		b.click(form + `button[data-action="save"]`)
		clustertest.WaitFor(t, 10*time.Second, func() error {
			if l := cl.limits("tenants"); l == nil || deref(l.KeyConcurrency) != 2 {
				return fmt.Errorf("limits %+v after the edit", l)
			}
			return nil
		})
		if l := cl.limits("tenants"); deref(l.Concurrency) != 3 || l.Rate != "600/m" || l.KeyWeights["acme"] != 3 {
			t.Fatalf("the edit changed more than key_concurrency: %+v", l)
		}
		b.waitFor("the held job released", `document.querySelector('tr[data-queue="tenants"] [data-test="held"]')?.dataset.held === "0"`)
		b.waitFor("the key weights shown", `document.querySelector('tr[data-queue="tenants"] [data-limit="key_weights"]')?.textContent === "weights acme 3"`)

		del := `tr[data-queue="tenants"] button[data-action="clear-limits"]`
		b.click(del)
		b.click(del + `[data-armed="1"]`)
		b.waitFor("the queue shown without limits", `document.querySelector('tr[data-queue="tenants"]')?.dataset.limited === "0"`)
		if l := cl.limits("tenants"); l != nil {
			t.Fatalf("the API still shows limits after clearing them: %+v", l)
		}

		// A rate-limited attempt pauses its key, limits or none: the row
		// says until when, and why on hover.
		cl.call(http.MethodPost, "/jobs/"+first+"/fail", wire.ReportRequest{Lease: firstLease, Error: "429 from the tenant API", RateLimitedFor: "1h"}, nil, http.StatusOK)
		b.waitFor("the key's pause shown", `(() => { const el = document.querySelector('tr[data-queue="tenants"] [data-limit="paused"][data-key="acme"]');
			return !!el && el.textContent.startsWith("key acme paused until ") && el.title === "429 from the tenant API"; })()`)

		// An admin lifts it.
		b.click(`tr[data-queue="tenants"] button[data-action="lift-pauses"]`)
		b.waitFor("the pause gone", `!document.querySelector('tr[data-queue="tenants"] [data-limit="paused"]')`)
		var ps wire.PauseList
		if cl.call(http.MethodGet, "/pauses", nil, &ps, http.StatusOK); ps.Total != 0 {
			t.Fatalf("GET /pauses after the lift: %+v", ps)
		}
	})

	t.Run("WorkersShowCapacity", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(dash + "#/workers"))
		b.waitFor("gpu-worker-1 with 1 of 4 slots busy", `(document.querySelector('tr[data-worker-id="gpu-worker-1"]') || {}).textContent?.includes("1 / 4")`)
		b.screenshot("dashboard-workers.png")
	})

	t.Run("SchedulesShowTheirNextRun", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(dash + "#/schedules"))
		if !jobs.schedules {
			b.waitFor("the empty state", `(document.querySelector('#schedules-table [data-test="empty"]') || {}).textContent?.includes("No schedules")`)
			b.waitFor("no error banner", `document.getElementById("banner").hidden`)
			return
		}
		b.waitFor("the next run of cache-warmup", `/^in /.test(document.querySelector('tr[data-schedule="cache-warmup"] [data-test="next-run"]').textContent)`)
		b.do(chromedp.Click(chromedp.CSS(`tr[data-schedule="nightly-report"] button[data-action="pause"]`)))
		b.waitFor("nightly-report shown paused", `document.querySelector('tr[data-schedule="nightly-report"]').dataset.paused === "1"`)
		b.do(chromedp.Click(chromedp.CSS(`tr[data-schedule="cache-warmup"] button[data-action="trigger"]`)))
		b.waitFor("the run it started", `!!document.querySelector('tr[data-schedule="cache-warmup"] [data-test="last-run"] a')`)
		b.screenshot("dashboard-schedules.png")
	})

	t.Run("ClusterShowsEveryNode", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(dash + "#/cluster"))
		leader := c.Node(c.Leader(t)).ID()
		b.waitFor("three nodes", `document.querySelectorAll('tr[data-node-id]').length === 3`)
		b.waitFor("no error banner", `document.getElementById("banner").hidden`)
		b.waitFor("the leader named", fmt.Sprintf(`document.querySelector('[data-test="leader"]').textContent === %q`, leader))
		b.waitFor("the follower's last contact", `/ago|just now/.test(document.querySelector('[data-test="last-contact"]').textContent)`)
		b.screenshot("dashboard-cluster.png")
	})

	t.Run("APIErrorsShowInTheBanner", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(dash + "#/jobs/no-such-job"))
		b.waitFor("a not_found banner", `!document.getElementById("banner").hidden && document.getElementById("banner").dataset.code === "not_found"`)
	})

	t.Run("SubmitAJob", func(t *testing.T) {
		b.t = t
		b.do(chromedp.Navigate(dash + "#/jobs"))
		b.click(`button[data-action="new-job"]`)
		form := `form[data-test="submit-form"] `
		b.do(
			chromedp.SendKeys(chromedp.CSS(form+`input[name="command"]`), "printf '[%s]' \"a b\""),
			chromedp.SendKeys(chromedp.CSS(form+`input[name="queue"]`), "forms"),
			chromedp.SendKeys(chromedp.CSS(form+`input[name="priority"]`), "3"),
			chromedp.SendKeys(chromedp.CSS(form+`textarea[name="env"]`), "LIST=a,b,c\nA=1"),
			chromedp.SendKeys(chromedp.CSS(form+`input[name="depends_on"]`), jobs.fetch),
		)
		b.click(form + `button[data-action="save"]`)
		b.waitFor("the new job's page", `/^#\/jobs\/job-/.test(location.hash) && !!document.querySelector('[data-test="job-id"]')`)
		id := b.eval(`document.querySelector('[data-test="job-id"]').textContent`)
		j := cl.job(id)
		if j.Command != `printf '[%s]' "a b"` || j.Queue != "forms" || j.Priority != 3 || j.Env["LIST"] != "a,b,c" || j.Env["A"] != "1" ||
			len(j.DependsOn) != 1 || j.DependsOn[0] != jobs.fetch {
			t.Fatalf("the job the form made: %+v", j)
		}
	})

	t.Run("BadInputInAFormIsRefused", func(t *testing.T) {
		b.t = t
		before := cl.count()
		b.do(chromedp.Navigate(dash + "#/jobs"))
		b.click(`button[data-action="new-job"]`)
		form := `form[data-test="submit-form"] `
		b.do(
			chromedp.SendKeys(chromedp.CSS(form+`input[name="type"]`), "email.send"),
			chromedp.SendKeys(chromedp.CSS(form+`input[name="payload"]`), "{not json"),
		)
		b.click(form + `button[data-action="save"]`)
		b.waitFor("the field named in the banner", `!document.getElementById("banner").hidden && document.getElementById("banner-text").textContent.startsWith("payload: not JSON")`)
		b.do(chromedp.SetValue(chromedp.CSS(form+`input[name="payload"]`), `{"to":"a@b.c"}`),
			chromedp.SendKeys(chromedp.CSS(form+`input[name="max_attempts"]`), "-1"),
		)
		b.click(form + `button[data-action="save"]`)
		b.waitFor("the server's 400 in the banner", `document.getElementById("banner").dataset.code === "invalid" && document.getElementById("banner-text").textContent.includes("max_attempts")`)
		if after := cl.count(); after != before {
			t.Fatalf("%d jobs after refused forms, %d before", after, before)
		}
		b.click("#banner-close")
	})

	t.Run("JobFailedByItsDependencySaysSo", func(t *testing.T) {
		b.t = t
		one := 1
		parent := cl.submit(wire.SubmitRequest{Command: "./extract.sh", Queue: "deps-demo", MaxAttempts: &one})
		child := cl.submit(wire.SubmitRequest{Command: "./load.sh", Queue: "deps-demo", DependsOn: []string{parent}})
		j := cl.claim("cpu-worker-1", "deps-demo")
		cl.call(http.MethodPost, "/jobs/"+j.ID+"/fail", wire.ReportRequest{Lease: j.Lease, Error: "exit status 2"}, nil, http.StatusOK)
		b.do(chromedp.Navigate(dash + "#/jobs/" + child))
		b.waitFor("why it never ran", fmt.Sprintf(`[...document.querySelectorAll('#job-body [data-test="empty"]')].some((e) => e.textContent.includes("never ran") && e.textContent.includes("dependency %s failed"))`, parent))
		if strings.Contains(b.eval(`document.querySelector('#job-body').textContent`), "waits for a worker") {
			t.Fatal("a job failed by its dependency still says it waits for a worker")
		}
	})

	t.Run("SchedulesAreCreatedEditedAndDeleted", func(t *testing.T) {
		b.t = t
		if !jobs.schedules {
			t.Skip("the node serves no schedules")
		}
		b.do(chromedp.Navigate(dash + "#/schedules"))
		b.click(`button[data-action="new-schedule"]`)
		form := `form[data-test="schedule-form"] `
		b.do(
			chromedp.SendKeys(chromedp.CSS(form+`input[name="name"]`), "from-the-page"),
			chromedp.SendKeys(chromedp.CSS(form+`input[name="cron"]`), "@every 1h"),
			chromedp.SendKeys(chromedp.CSS(form+`input[name="command"]`), "./rotate-logs.sh"),
			chromedp.SendKeys(chromedp.CSS(form+`textarea[name="env"]`), "KEEP=7"),
		)
		b.click(form + `button[data-action="save"]`)
		b.waitFor("the new schedule listed", `!!document.querySelector('tr[data-schedule="from-the-page"]')`)
		cl.call(http.MethodPost, "/schedules/from-the-page/pause", nil, nil, http.StatusOK)
		b.waitFor("shown paused", `document.querySelector('tr[data-schedule="from-the-page"]').dataset.paused === "1"`)

		b.click(`tr[data-schedule="from-the-page"] button[data-action="edit"]`)
		b.waitFor("the form filled in", `document.querySelector('form[data-test="schedule-form"] input[name="cron"]').value === "@every 1h"`)
		b.do(chromedp.SetValue(chromedp.CSS(form+`input[name="cron"]`), "@every 2h"))
		b.click(form + `button[data-action="save"]`)
		var sc wire.Schedule
		clustertest.WaitFor(t, 10*time.Second, func() error {
			cl.call(http.MethodGet, "/schedules/from-the-page", nil, &sc, http.StatusOK)
			if sc.Cron != "@every 2h" {
				return fmt.Errorf("cron %q after the edit", sc.Cron)
			}
			return nil
		})
		if !sc.Paused || sc.Job.Command != "./rotate-logs.sh" || sc.Job.Env["KEEP"] != "7" {
			t.Fatalf("the edit changed more than the cron: %+v", sc)
		}

		del := `tr[data-schedule="from-the-page"] button[data-action="delete"]`
		b.click(del)
		b.click(del + `[data-armed="1"]`)
		b.waitFor("the schedule gone from the list", `!document.querySelector('tr[data-schedule="from-the-page"]')`)
		cl.call(http.MethodGet, "/schedules/from-the-page", nil, nil, http.StatusNotFound)
	})

	// Lists the API pages (100 items without a limit): each page follows
	// them, so the 150th worker, queue and schedule show.
	t.Run("ListsFollowThePages", func(t *testing.T) {
		b.t = t
		const n = 150
		for i := range n {
			cl.call(http.MethodPost, "/workers/register", wire.Worker{ID: fmt.Sprintf("zz-worker-%03d", i)}, nil, http.StatusCreated)
			cl.call(http.MethodPost, fmt.Sprintf("/queues/zz-queue-%03d/pause", i), nil, nil, http.StatusOK)
			if jobs.schedules {
				cl.call(http.MethodPost, "/schedules", wire.ScheduleRequest{Name: fmt.Sprintf("zz-sched-%03d", i), Cron: "@daily", Job: wire.SubmitRequest{Command: "true"}}, nil, http.StatusCreated)
			}
		}
		last := fmt.Sprintf("%03d", n-1)
		b.do(chromedp.Navigate(dash + "#/workers"))
		b.waitFor("every worker", `document.querySelectorAll('tr[data-worker-id^="zz-worker-"]').length === `+strconv.Itoa(n)+
			` && !!document.querySelector('tr[data-worker-id="zz-worker-`+last+`"]')`)
		b.do(chromedp.Navigate(dash + "#/queues"))
		b.waitFor("every queue", `document.querySelectorAll('tr[data-queue^="zz-queue-"]').length === `+strconv.Itoa(n))
		b.do(chromedp.Navigate(dash + "#/jobs"))
		b.waitFor("the last queue in the filter", `!![...document.querySelectorAll('option')].find((o) => o.value === "zz-queue-`+last+`")`)
		if jobs.schedules {
			b.do(chromedp.Navigate(dash + "#/schedules"))
			b.waitFor("every schedule", `document.querySelectorAll('tr[data-schedule^="zz-sched-"]').length === `+strconv.Itoa(n))
		}
		b.waitFor("no note of more", `!document.querySelector('[data-test="list-more"]')`)
	})

	t.Run("BulkRetryAsksWithTheCount", func(t *testing.T) {
		b.t = t
		one := 1
		var failed []string
		for range 3 {
			cl.submit(wire.SubmitRequest{Command: "./sync.sh", Queue: "bulk-demo", MaxAttempts: &one})
			j := cl.claim("cpu-worker-1", "bulk-demo")
			cl.call(http.MethodPost, "/jobs/"+j.ID+"/fail", wire.ReportRequest{Lease: j.Lease, Error: "timeout"}, nil, http.StatusOK)
			failed = append(failed, j.ID)
		}
		b.do(chromedp.Navigate(dash + "#/jobs?status=failed&queue=bulk-demo"))
		b.waitFor("the three failed jobs", `document.querySelectorAll('tr[data-job-id]').length === 3`)
		b.do(chromedp.Click(chromedp.CSS(`button[data-action="bulk-retry"]`)))
		b.waitFor("a confirmation that shows the count", `document.querySelector('[data-test="bulk-confirm-text"]')?.dataset.count === "3"`)
		if n := len(failed); cl.job(failed[0]).Status != wire.StatusFailed || n != 3 {
			t.Fatal("the count retried something before the confirmation")
		}
		b.do(chromedp.Click(chromedp.CSS(`button[data-action="bulk-confirm"]`)))
		b.waitFor("the action done", `document.querySelector('[data-test="bulk-progress"]')?.dataset.state === "done" && document.querySelector('[data-test="bulk-progress"]').dataset.done === "3"`)
		for _, id := range failed {
			if j := cl.job(id); j.Status != wire.StatusPending {
				t.Errorf("job %s is %s after the bulk retry, want pending", id, j.Status)
			}
		}
		b.screenshot("dashboard-bulk.png")
	})

	// Last: it stops a node.
	t.Run("ClusterShowsANodeThatDoesNotAnswer", func(t *testing.T) {
		b.t = t
		var down int
		for _, i := range c.Followers(t) {
			if i != follower {
				down = i
			}
		}
		id := c.Node(down).ID()
		c.Kill(t, down)
		b.do(chromedp.Navigate(dash + "#/cluster"))
		b.waitFor("the stopped node shown unreachable", fmt.Sprintf(
			`document.querySelector('tr[data-node-id=%q]').dataset.reachable === "0" && document.querySelector('tr[data-node-id=%q] [data-test="role"]').textContent === "unreachable"`, id, id))
		b.waitFor("the others reachable", fmt.Sprintf(`document.querySelectorAll('tr[data-reachable="1"]').length === 2 && !document.querySelector('tr[data-node-id=%q] .st-follower')`, id))
	})

	b.t = t
	b.noExceptions()
}

// TestHostilePageCannotUseANodeWithoutTokens (issue #28): a developer with
// a node without tokens on 127.0.0.1 (as `workron dev` runs) opens a web
// page that tries, from another port of 127.0.0.1 (same site) and from a
// domain of its own (cross site), every request a page can make a browser
// send without asking the node first: fetch and sendBeacon with text/plain
// and urlencoded JSON bodies, text/plain and urlencoded forms, an image
// whose URL claims a job, body-less POSTs that cancel a job and pause a
// queue. Each reaches the node and is refused: no job is created, the
// waiting job is neither claimed nor cancelled, the queue runs. Then the
// page's domain is rebound to the node's address (DNS rebinding: the page
// is now same-origin to the node) and gets 403 host_not_allowed.
func TestHostilePageCannotUseANodeWithoutTokens(t *testing.T) {
	chrome := findChromium(t)
	c := clustertest.New(t, 1, clustertest.WithLeaseTTL(10*time.Minute))
	node := c.URL(0)
	cl := &client{t: t, base: node}
	waiting := cl.submit(wire.SubmitRequest{Command: "echo the developer's own job"})

	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, hostilePage(node, waiting))
	}))
	defer evil.Close()
	_, evilPort, _ := strings.Cut(evil.URL, "127.0.0.1:")

	// evil.test resolves to 127.0.0.1, as an attacker's domain would to
	// its own server and, once rebound, to the developer's machine.
	ctx := startBrowser(t, chrome,
		chromedp.Flag("host-resolver-rules", "MAP evil.test 127.0.0.1"),
		chromedp.Flag("disable-features", "HttpsUpgrades"))
	b := &page{t: t, ctx: ctx}

	for _, from := range []struct{ name, origin string }{
		{"FromAnotherPortOfLoopback", evil.URL},             // Sec-Fetch-Site: same-site
		{"FromAnotherSite", "http://evil.test:" + evilPort}, // cross-site
	} {
		origin := from.origin
		t.Run(from.name, func(t *testing.T) {
			b.t = t
			before := refusals(t, node)
			b.do(chromedp.Navigate(origin + "/"))
			b.waitFor("the page to send everything", `window.sent === hostileRequests`)
			// Each of the page's requests gets one refusal, counted once
			// the node has answered it (a beacon's answer reaches no one).
			clustertest.WaitFor(t, 10*time.Second, func() error {
				if n := refusals(t, node) - before; n != hostileRequests {
					return fmt.Errorf("the node refused %d of the page's %d requests, and holds %d jobs (1 before)", n, hostileRequests, cl.count())
				}
				return nil
			})
			if n := cl.count(); n != 1 {
				t.Fatalf("the node holds %d jobs, want the developer's one", n)
			}
			if j := cl.job(waiting); j.Status != wire.StatusPending || j.Attempts != 0 {
				t.Fatalf("the developer's job is %s after %d attempts, want pending and unclaimed", j.Status, j.Attempts)
			}
			if cl.paused("default") {
				t.Fatal("the page paused the default queue")
			}
			var workers wire.WorkerList
			cl.call(http.MethodGet, "/workers", nil, &workers, http.StatusOK)
			if len(workers.Workers) != 0 {
				t.Fatalf("the page's claim left workers %+v", workers.Workers)
			}
			b.noExceptions()
		})
	}

	t.Run("AfterDNSRebinding", func(t *testing.T) {
		b.t = t
		_, nodePort, _ := strings.Cut(node, "127.0.0.1:")
		rebound := "http://evil.test:" + nodePort
		b.do(chromedp.Navigate(rebound + "/health"))
		b.waitFor("the node to refuse the name", `document.body.innerText.includes("host_not_allowed")`)
		// Same origin now: the page may read the answer, and set any header.
		sctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		defer cancel()
		got, err := chromedp.Run(sctx, chromedp.Evaluate[string](`fetch("/jobs", {method: "POST", headers: {"Content-Type": "application/json"},
			body: JSON.stringify({command: "touch /tmp/pwned-rebound"})}).then(r => r.text().then(body => r.status + " " + body))`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("the rebound page's submit: %v", err)
		}
		if !strings.HasPrefix(got, "403 ") || !strings.Contains(got, "host_not_allowed") {
			t.Fatalf("a same-origin submit from the rebound name got %q, want 403", got)
		}
		if n := cl.count(); n != 1 {
			t.Fatalf("the node holds %d jobs, want the developer's one", n)
		}
	})
}

// hostileRequests is how many requests hostilePage sends to the node.
const hostileRequests = 8

// hostilePage is a web page that tries to make the browser change the
// node at nodeURL: submit jobs, claim and cancel the job waiting, pause a
// queue. It counts what it sent in window.sent.
func hostilePage(nodeURL, waiting string) string {
	return fmt.Sprintf(`<!doctype html>
<title>cute cats</title>
<iframe name="sink1"></iframe><iframe name="sink2"></iframe>
<form id="text" method="POST" action="%[1]s/jobs" enctype="text/plain" target="sink1"><input name='{"command":"touch /tmp/pwned-form-text","x":"' value='"}'></form>
<form id="urlencoded" method="POST" action="%[1]s/jobs" target="sink2"><input name='{"command":"touch /tmp/pwned-form-urlencoded","x":"' value='"}'></form>
<script>
const node = %[2]q;
const hostileRequests = %[4]d;
window.hostileRequests = hostileRequests;
window.sent = 0;
const job = (n) => JSON.stringify({command: "touch /tmp/pwned-" + n});
const sent = () => { window.sent++; };
fetch(node + "/jobs", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: job("fetch-text")}).finally(sent);
fetch(node + "/jobs", {method: "POST", mode: "no-cors", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: job("fetch-form")}).finally(sent);
fetch(node + "/jobs/" + %[3]q + "/cancel", {method: "POST", mode: "no-cors"}).finally(sent);
fetch(node + "/queues/default/pause", {method: "POST", mode: "no-cors"}).finally(sent);
if (navigator.sendBeacon(node + "/jobs", new Blob([job("beacon")], {type: "text/plain"}))) sent();
for (const id of ["text", "urlencoded"]) {
  document.querySelector("iframe[name=" + (id === "text" ? "sink1" : "sink2") + "]").addEventListener("load", sent, {once: true});
  document.getElementById(id).submit();
}
const img = new Image();
img.onerror = img.onload = sent;
img.src = node + "/jobs/next?worker_id=evil";
</script>`, nodeURL, nodeURL, waiting, hostileRequests)
}

// refusals is how many requests the node has refused at its door (403 and
// 415), from its metrics.
func refusals(t *testing.T, node string) int {
	t.Helper()
	resp, err := http.Get(node + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "workron_http_requests_total{") ||
			!(strings.Contains(line, `status="403"`) || strings.Contains(line, `status="415"`)) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		n += int(v)
	}
	return n
}

// findChromium returns the browser to drive. Outside CI a machine without
// one skips the test; in CI (CI=true) it must run.
func findChromium(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("WORKRON_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "headless-shell"}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Chromium found (looked for $WORKRON_CHROMIUM, /usr/bin/chromium, chromium, chromium-browser, google-chrome); CI must run the dashboard's browser test: apt-get install chromium")
	}
	t.Skip("no Chromium found: install it (apt-get install chromium) or set WORKRON_CHROMIUM to run the dashboard's browser test")
	return ""
}

// startBrowser starts headless Chromium with a fresh profile; cleanup stops it.
func startBrowser(t *testing.T, path string, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	profile := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 800),
	)
	opts = append(opts, extra...)
	// The whole browser session is bounded; each step has its own deadline.
	life, cancelLife := context.WithTimeout(context.Background(), 2*time.Minute)
	actx, cancelAlloc := chromedp.NewExecAllocator(life, opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc()
		cancelLife()
	})
	// The first action starts the browser, which lives as long as the
	// context it is given: so no per-step deadline here.
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 800), chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// page drives the browser tab and collects the page's uncaught exceptions.
type page struct {
	t   *testing.T
	ctx context.Context

	once       sync.Once
	mu         sync.Mutex
	exceptions []string
}

// helpers are defined in the page for waitFor's expressions.
const helpers = `window.rowStatus = (id) => {
  const el = document.querySelector('tr[data-job-id="' + id + '"] [data-test="status"]');
  return el ? el.textContent : null;
};
window.tabCount = (status) => {
  const el = document.querySelector('a.tab[data-status="' + status + '"] .count');
  return el ? el.textContent : null;
};`

func (p *page) do(steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	p.once.Do(p.watch)
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.t.Fatalf("browser: %v\n%s", err, p.dump())
	}
}

// watch records uncaught exceptions of the page until the browser stops.
func (p *page) watch() {
	events := chromedp.Events(p.ctx, runtime.ExceptionThrown)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			msg := ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
			p.mu.Lock()
			p.exceptions = append(p.exceptions, msg)
			p.mu.Unlock()
		}
	}()
}

func (p *page) noExceptions() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.exceptions {
		p.t.Errorf("uncaught exception in the page: %s", e)
	}
}

// waitFor polls a JavaScript expression until it is true, for 10 s.
func (p *page) waitFor(what, expr string) {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](helpers+"\n!!("+expr+")"))
		cancel()
		if err == nil && ok {
			return
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	p.t.Fatalf("waited 10s for %s (%s); last error %v\n%s", what, expr, last, p.dump())
}

// click clicks the element selector finds, in the same evaluation that
// finds it: the page re-renders a table when a refresh brings new data, so a
// node found in one step may be gone by the next.
func (p *page) click(selector string) {
	p.t.Helper()
	p.waitFor("a click on "+selector, fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) return false; el.click(); return true; })()`, selector))
}

// eval returns a JavaScript expression's string value.
func (p *page) eval(expr string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// dump is the page's main view as text, for failure messages.
func (p *page) dump() string {
	ctx, cancel := context.WithTimeout(p.ctx, 3*time.Second)
	defer cancel()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`location.hash + "\nbanner: " + document.getElementById("banner").textContent.trim() + "\n" + document.getElementById("view").innerText`))
	if err != nil {
		return "(page text unavailable: " + err.Error() + ")"
	}
	return "page:\n" + text
}

// screenshot writes a full-page PNG for docs/cli.md when WORKRON_SCREENSHOTS=1.
func (p *page) screenshot(name string) {
	p.t.Helper()
	if os.Getenv("WORKRON_SCREENSHOTS") != "1" {
		return
	}
	// No focus ring, no hover highlight where the last click was.
	p.do(chromedp.Evaluate[chromedp.Void](`document.activeElement && document.activeElement.blur()`))
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.Call(ctx, input.DispatchMouseEvent, input.DispatchMouseEventParams{Type: input.DispatchMouseEventTypeMouseMoved, X: 1, Y: 790}); err != nil {
		p.t.Fatalf("move the mouse away: %v", err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		p.t.Fatal(err)
	}
	path := filepath.Join(screenshotDir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("wrote %s (%d bytes)", path, len(png))
}

// ---- the cluster's side ----

// client calls the JSON API like a worker or a script would.
type client struct {
	t    *testing.T
	base string
}

func (c *client) call(method, path string, body, out any, want int) {
	c.t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, r)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		c.t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, data, want)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			c.t.Fatalf("%s %s: decoding %s: %v", method, path, data, err)
		}
	}
}

func (c *client) job(id string) wire.Job {
	c.t.Helper()
	var j wire.Job
	c.call(http.MethodGet, "/jobs/"+id, nil, &j, http.StatusOK)
	return j
}

// count is how many jobs the cluster holds.
func (c *client) count() int {
	c.t.Helper()
	var list wire.JobList
	c.call(http.MethodGet, "/jobs?limit=1000", nil, &list, http.StatusOK)
	return len(list.Jobs)
}

func (c *client) paused(queue string) bool {
	c.t.Helper()
	var out struct {
		Queues []struct {
			Name   string `json:"name"`
			Paused bool   `json:"paused"`
		} `json:"queues"`
	}
	c.call(http.MethodGet, "/queues", nil, &out, http.StatusOK)
	for _, q := range out.Queues {
		if q.Name == queue {
			return q.Paused
		}
	}
	c.t.Fatalf("no queue %s", queue)
	return false
}

// limits is a queue's limits as GET /queues/{name} shows them, nil when
// it has none.
func (c *client) limits(queue string) *wire.QueueFlow {
	c.t.Helper()
	var q wire.Queue
	c.call(http.MethodGet, "/queues/"+queue, nil, &q, http.StatusOK)
	return q.Limits
}

func deref(n *int) int {
	if n == nil {
		return 0
	}
	return *n
}

// claim claims one job from queue for worker, as a worker would.
func (c *client) claim(worker, queue string) wire.Job {
	c.t.Helper()
	var res wire.ClaimResponse
	c.call(http.MethodPost, "/jobs/claim", wire.ClaimRequest{WorkerID: worker, Queues: []string{queue}, Max: 1, Wait: "5s"}, &res, http.StatusOK)
	if len(res.Jobs) != 1 {
		c.t.Fatalf("claim from %s: got %d jobs", queue, len(res.Jobs))
	}
	return res.Jobs[0]
}

func (c *client) submit(req wire.SubmitRequest) string {
	c.t.Helper()
	var j wire.Job
	c.call(http.MethodPost, "/jobs", req, &j, http.StatusCreated)
	return j.ID
}

// seeded names the jobs the test looks for.
type seeded struct {
	all                   []string
	fetch, train, publish string   // a chain; train is running its second attempt
	cancel                string   // pending, cancelled in the browser
	gang                  []string // the tasks of a gang no worker can place
	video                 string   // pending, cancelled through the API
	failed                string   // failed for good
	schedules             bool     // the node serves /schedules and has two
}

// seed fills the cluster with the jobs of a small, plausible installation.
// No worker runs: the test claims and reports by hand, so every job stays
// where it is put.
func seed(c *client) seeded {
	c.t.Helper()
	var s seeded
	intp := func(n int) *int { return &n }

	c.call(http.MethodPost, "/workers/register", wire.Worker{ID: "gpu-worker-1", Resources: wire.Resources{VRAMMB: 24576, MemoryMB: 65536, CPUMillis: 16000, Slots: 4},
		Tags: []string{"gpu", "us-east-1"}, Queues: []string{"etl", "email"}}, nil, http.StatusCreated)
	c.call(http.MethodPost, "/workers/register", wire.Worker{ID: "cpu-worker-1", Resources: wire.Resources{MemoryMB: 16384, CPUMillis: 8000, Slots: 8},
		Tags: []string{"us-east-1"}, Queues: []string{"default", "video", "reports"}}, nil, http.StatusCreated)

	var chain wire.JobList
	c.call(http.MethodPost, "/jobs/batch", wire.BatchSubmitRequest{Jobs: []wire.SubmitRequest{
		{Command: "./fetch-dataset.sh --date 2026-11-20", Queue: "etl", Priority: 5},
		{Command: "python train.py --epochs 20 --data /data/2026-11-20", Queue: "etl", Priority: 5, DependsOn: []string{"$0"}, Timeout: "2h",
			Backoff: &wire.Backoff{Base: "20ms", Max: "20ms"}, Metadata: map[string]string{"team": "ml", "model": "ranker-v3"}},
		{Command: "./publish-model.sh ranker-v3", Queue: "etl", DependsOn: []string{"$1"}},
	}}, &chain, http.StatusCreated)
	s.fetch, s.train, s.publish = chain.Jobs[0].ID, chain.Jobs[1].ID, chain.Jobs[2].ID

	hello := c.submit(wire.SubmitRequest{Command: "echo hello"})
	s.failed = c.submit(wire.SubmitRequest{Command: "./send-digest.sh --batch 7", Queue: "email", MaxAttempts: intp(1)})
	digests := []string{
		c.submit(wire.SubmitRequest{Command: "./send-digest.sh --batch 8", Queue: "email"}),
		c.submit(wire.SubmitRequest{Command: "./send-digest.sh --batch 9", Queue: "email"}),
	}
	s.cancel = c.submit(wire.SubmitRequest{Command: "ffmpeg -i talk.mov -vf scale=1280:-2 talk-720p.mp4", Queue: "video", Priority: 2})
	s.video = c.submit(wire.SubmitRequest{Command: "ffmpeg -i demo.mov -vf scale=1920:-2 demo-1080p.mp4", Queue: "video", Priority: 2})
	report := c.submit(wire.SubmitRequest{Type: "report.monthly", Payload: json.RawMessage(`{"month":"2026-10"}`), Queue: "reports"})

	// The chain: fetch succeeds, train fails once (out of memory) and runs
	// again; publish waits for it.
	j := c.claim("gpu-worker-1", "etl")
	c.call(http.MethodPost, "/jobs/"+j.ID+"/done", wire.ReportRequest{Lease: j.Lease, ExitCode: intp(0),
		Output: "downloading s3://datasets/2026-11-20 ...\n412 files, 3.1 GiB\nchecksums ok\n",
		Result: json.RawMessage(`{"files":412,"path":"/data/2026-11-20"}`)}, nil, http.StatusOK)
	j = c.claim("gpu-worker-1", "etl")
	c.call(http.MethodPost, "/jobs/"+j.ID+"/fail", wire.ReportRequest{Lease: j.Lease, ExitCode: intp(137), Error: "exit status 137",
		Output: "loading /data/2026-11-20\nepoch 1/20 loss=0.912 acc=0.701\nepoch 2/20 loss=0.744 acc=0.768\nepoch 3/20 loss=0.651 acc=0.802\nKilled\n"}, nil, http.StatusOK)
	j = c.claim("gpu-worker-1", "etl") // waits out the 20 ms backoff
	if j.ID != s.train || j.Attempts != 2 {
		c.t.Fatalf("claimed %s attempt %d, want %s attempt 2", j.ID, j.Attempts, s.train)
	}
	c.call(http.MethodPost, "/workers/gpu-worker-1/heartbeat", wire.WorkerHeartbeatRequest{Jobs: []wire.JobLease{
		{JobID: j.ID, Lease: j.Lease, Progress: &wire.ProgressUpdate{Percent: 45, Message: "epoch 9/20"}}}}, nil, http.StatusOK)

	j = c.claim("gpu-worker-1", "email")
	c.call(http.MethodPost, "/jobs/"+j.ID+"/fail", wire.ReportRequest{Lease: j.Lease, ExitCode: intp(1), Error: "exit status 1",
		Output: "connecting to smtp.internal:587\nerror: 421 4.7.0 Try again later, closing connection\n"}, nil, http.StatusOK)
	if j.ID != s.failed {
		c.t.Fatalf("claimed %s from email, want %s", j.ID, s.failed)
	}
	j = c.claim("cpu-worker-1", "default")
	c.call(http.MethodPost, "/jobs/"+j.ID+"/done", wire.ReportRequest{Lease: j.Lease, ExitCode: intp(0), Output: "hello\n"}, nil, http.StatusOK)

	s.schedules = c.trySchedules()

	var gang wire.GangSubmitResponse
	c.call(http.MethodPost, "/jobs", wire.SubmitRequest{Command: "torchrun --nnodes 2 train_ddp.py", Queue: "etl", GangSize: 2,
		Resources: &wire.Resources{VRAMMB: 40960}, Tags: []string{"gpu"}}, &gang, http.StatusCreated)
	s.gang = gang.Tasks

	s.all = append([]string{s.fetch, s.train, s.publish, hello, s.failed, digests[0], digests[1], s.cancel, s.video, report}, s.gang...) // in submission order
	for _, id := range s.all {
		if strings.TrimSpace(id) == "" {
			c.t.Fatal("a seeded job has no id")
		}
	}
	return s
}

// trySchedules creates two schedules; it reports false on a node that has no
// /schedules route.
func (c *client) trySchedules() bool {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.base+"/schedules", nil)
	if err != nil {
		c.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return false
	}
	for _, sc := range []wire.ScheduleRequest{
		{Name: "cache-warmup", Cron: "@every 15m", Job: wire.SubmitRequest{Command: "./warm-cache.sh --top 1000"}},
		{Name: "nightly-report", Cron: "0 3 * * *", Timezone: "Europe/Paris", Job: wire.SubmitRequest{Type: "report.daily", Payload: json.RawMessage(`{"scope":"all"}`), Queue: "reports"}},
	} {
		c.call(http.MethodPost, "/schedules", sc, nil, http.StatusCreated)
	}
	return true
}
