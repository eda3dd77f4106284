"""The worker against a real node: handlers, failures with tracebacks,
timeouts, cancels, SIGTERM with a grace period, a worker killed mid-job, and
a stale lease refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from tests.helpers import (CA, LEASE_TTL, URL, WORKER, RunningWorker, client, eventually, needs_node, new_worker,
                           unique)
from workron import Backoff, JobContext, NoRetry, RateLimited, Snooze, Worker, WorkronError

HERE = os.path.dirname(os.path.abspath(__file__))


class HeartbeatWaitTest(unittest.TestCase):
    def test_a_third_of_the_lease_and_a_second_while_a_claim_is_lost(self) -> None:
        w = Worker("http://127.0.0.1:1", queues=["q"])
        self.assertEqual(w._heartbeat_wait(), 5.0, "a third of the Go worker's default until a claim tells")
        w._lease_ttl = 3.0
        self.assertEqual(w._heartbeat_wait(), 1.0)
        w._lease_ttl = 90.0
        self.assertEqual(w._heartbeat_wait(), 30.0)
        w._claim_lost = 7  # its jobs go back once a heartbeat names it: soon
        self.assertEqual(w._heartbeat_wait(), 1.0)


@needs_node
class WorkerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()
        self.queue = unique("pyq")

    def serve(self, **kw) -> "tuple":
        w = new_worker(self.queue, **kw)
        return w, RunningWorker(w)

    def test_handlers_by_type_several_at_once(self) -> None:
        w = new_worker(self.queue, concurrency=4)
        started, release = [], threading.Event()
        lock = threading.Lock()

        @w.handle("py.add")
        def add(job: JobContext) -> None:
            with lock:
                started.append(job.id)
            release.wait(20)

        w.handle("py.noop", lambda job: None)
        rw = RunningWorker(w)
        try:
            jobs = [self.c.submit(type="py.add", queue=self.queue, payload={"n": i}) for i in range(4)]
            other = self.c.submit(type="py.noop", queue=self.queue)
            eventually(lambda: len(started) == 4, what="four jobs running at once")
            release.set()
            for j in jobs + [other]:
                done = self.c.wait(j.id, timeout=20, poll=0.05)
                self.assertEqual((done.status, done.worker_id), ("done", w.id))
                self.assertEqual(done.attempts, 1)
            unserved = self.c.submit(type="py.unknown", queue=self.queue)
            time.sleep(0.5)
            self.assertEqual(self.c.get(unserved.id).status, "pending", "no handler: never claimed")
        finally:
            release.set()
            rw.stop()

    def test_exception_fails_with_traceback(self) -> None:
        w = new_worker(self.queue)

        @w.handle("py.boom")
        def boom(job: JobContext) -> None:
            raise ValueError(f"boom {job.payload['n']}")

        @w.handle("py.final")
        def final(job: JobContext) -> None:
            raise NoRetry("bad payload")

        rw = RunningWorker(w)
        try:
            j = self.c.submit(type="py.boom", queue=self.queue, payload={"n": 7}, max_attempts=2,
                              backoff=Backoff(base="10ms", max="10ms"))
            f = self.c.submit(type="py.final", queue=self.queue, max_attempts=3)
            j = self.c.wait(j.id, timeout=30, poll=0.05)
            f = self.c.wait(f.id, timeout=30, poll=0.05)
        finally:
            rw.stop()
        self.assertEqual((j.status, j.attempts), ("failed", 2))
        self.assertIn("Traceback (most recent call last)", j.last_error)
        self.assertIn("ValueError: boom 7", j.last_error)
        self.assertEqual((f.status, f.attempts), ("failed", 1), "NoRetry: no more attempts")
        self.assertIn("NoRetry: bad payload", f.last_error)

    def test_rate_limited_and_snooze_use_no_attempt(self) -> None:
        w = new_worker(self.queue)
        runs: dict = {}
        lock = threading.Lock()

        def count(job: JobContext) -> int:
            with lock:
                runs[job.id] = runs.get(job.id, 0) + 1
                return runs[job.id]

        @w.handle("py.limited")
        def limited(job: JobContext) -> None:
            if count(job) == 1:
                raise RateLimited(2.0, "429 from the api")

        @w.handle("py.snooze")
        def snooze(job: JobContext) -> None:
            if count(job) == 1:
                raise Snooze("300ms")

        rw = RunningWorker(w)
        try:
            a = self.c.submit(type="py.limited", queue=self.queue, concurrency_key="acme", max_attempts=1)
            s = self.c.submit(type="py.snooze", queue=self.queue, max_attempts=1)

            def paused() -> bool:
                _, q = self.c.request("GET", f"/queues/{self.queue}")
                return any(p.get("key") == "acme" and p.get("reason") == "429 from the api"
                           for p in (q.get("limits") or {}).get("paused") or [])

            eventually(paused, what="key acme paused by the rate-limited attempt")
            a = self.c.wait(a.id, timeout=30, poll=0.05)
            s = self.c.wait(s.id, timeout=30, poll=0.05)
        finally:
            rw.stop()
        self.assertEqual((a.status, a.attempts), ("done", 1), "the rate-limited attempt did not count")
        self.assertEqual([h.status for h in a.attempt_history], ["rate_limited", "done"])
        self.assertEqual(a.attempt_history[0].error, "429 from the api")
        self.assertEqual((s.status, s.attempts), ("done", 1), "the snoozed attempt did not count")
        self.assertEqual([h.status for h in s.attempt_history], ["snoozed", "done"])
        gap = a.attempt_history[1].started_at - a.attempt_history[0].ended_at
        self.assertGreaterEqual(gap.total_seconds(), 2.0, "the key stayed paused for the time asked")

    def test_timeout_honoured(self) -> None:
        w = new_worker(self.queue)
        stopped = threading.Event()

        @w.handle("py.slow")
        def slow(job: JobContext) -> None:
            if job.stopping.wait(20):
                stopped.set()

        rw = RunningWorker(w)
        try:
            j = self.c.submit(type="py.slow", queue=self.queue, timeout="300ms", max_attempts=1)
            j = self.c.wait(j.id, timeout=20, poll=0.05)
            self.assertTrue(stopped.wait(5), "the handler was told to stop")
        finally:
            rw.stop()
        self.assertEqual(j.status, "failed")
        self.assertIn("timed out after 300ms", j.last_error)
        self.assertFalse(j.attempt_history[0].expired, "the worker reported it, the cluster did not expire it")

    def test_cancel_while_running(self) -> None:
        w = new_worker(self.queue)
        running, reasons = threading.Event(), []

        @w.handle("py.block")
        def block(job: JobContext) -> None:
            running.set()
            job.stopping.wait(20)
            reasons.append(job.stop_reason)

        rw = RunningWorker(w)
        try:
            j = self.c.submit(type="py.block", queue=self.queue)
            self.assertTrue(running.wait(20))
            self.assertEqual(self.c.cancel(j.id).status, "cancelling")
            j = self.c.wait(j.id, timeout=20, poll=0.05)
            eventually(lambda: reasons, what="handler returned")
        finally:
            rw.stop()
        self.assertEqual(j.status, "cancelled")
        self.assertEqual(reasons, ["cancelled"], "the heartbeat's cancel action stopped the handler")
        self.assertEqual(j.last_error, "cancelled")

    def test_reports_ride_on_claims(self) -> None:
        w = new_worker(self.queue, concurrency=1)
        w.handle("py.quick", lambda job: None)
        carried, posted = [], []
        claim, reports = w.client.claim, w.client.reports

        def spy_claim(*a, **kw):
            carried.extend(r["lease"] for r in kw.get("reports") or [])
            return claim(*a, **kw)

        def spy_reports(reps):
            posted.extend(r["lease"] for r in reps)
            return reports(reps)

        w.client.claim, w.client.reports = spy_claim, spy_reports
        jobs = [self.c.submit(type="py.quick", queue=self.queue) for _ in range(3)]
        rw = RunningWorker(w)
        try:
            done = [self.c.wait(j.id, timeout=20, poll=0.05) for j in jobs]
        finally:
            rw.stop()
        self.assertEqual([j.status for j in done], ["done"] * 3)
        self.assertEqual(sorted(carried + posted), sorted(j.attempt_history[0].lease for j in done),
                         "each attempt reported once, with its lease")
        self.assertTrue(carried, "a finished job's report rides on the next claim")

    def test_heartbeats_keep_leases(self) -> None:
        w = new_worker(self.queue, concurrency=2)
        w.handle("py.long", lambda job: time.sleep(2 * LEASE_TTL))
        rw = RunningWorker(w)
        try:
            jobs = [self.c.submit(type="py.long", queue=self.queue) for _ in range(2)]
            done = [self.c.wait(j.id, timeout=30, poll=0.1) for j in jobs]
        finally:
            rw.stop()
        for j in done:
            self.assertEqual((j.status, j.attempts), ("done", 1), "leases outlived their TTL")

    def test_a_job_longer_than_several_leases_keeps_its_lease(self) -> None:
        # The node's lease is LEASE_TTL (2s): a job of four leases lives on
        # the heartbeats of the TTL the claim reply announced, not of the
        # worker's default.
        w = new_worker(self.queue)
        w.handle("py.longer", lambda job: time.sleep(4 * LEASE_TTL))
        rw = RunningWorker(w)
        try:
            j = self.c.submit(type="py.longer", queue=self.queue)
            j = self.c.wait(j.id, timeout=60, poll=0.1)
        finally:
            rw.stop()
        self.assertEqual((j.status, j.attempts), ("done", 1))
        self.assertEqual([(a.status, a.expired) for a in j.attempt_history], [("done", False)],
                         "no attempt's lease expired")
        self.assertEqual(w._lease_ttl, LEASE_TTL, "the worker follows the lease the claim reply announced")

    def start_proc(self, worker_id: str, markers: str, grace: float = 5.0) -> subprocess.Popen:
        env = dict(os.environ, WORKRON_TEST_WORKER_TOKEN=WORKER or "", WORKRON_TEST_CA=CA or "")
        return subprocess.Popen([sys.executable, os.path.join(HERE, "worker_proc.py"), URL, worker_id,
                                 self.queue, markers, str(grace)], env=env)

    def test_killed_worker_job_runs_elsewhere(self) -> None:
        with tempfile.TemporaryDirectory() as markers:
            first = unique("pyw-killed")
            proc = self.start_proc(first, markers)
            try:
                j = self.c.submit(type="py.block", queue=self.queue)
                eventually(lambda: os.path.exists(os.path.join(markers, j.id)), what="job started")
                claimed = self.c.get(j.id)
                self.assertEqual(claimed.worker_id, first)
                # Its heartbeat moves the lease's end: the worker has acknowledged the
                # attempt, so its loss counts (an unacknowledged one would not).
                eventually(lambda: self.c.get(j.id).lease_expires_at != claimed.lease_expires_at,
                           timeout=10 * LEASE_TTL, what="the worker's first heartbeat")
            finally:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
        w = new_worker(self.queue)
        w.handle("py.block", lambda job: None)
        rw = RunningWorker(w)
        try:
            j = self.c.wait(j.id, timeout=10 * LEASE_TTL + 10, poll=0.1)
        finally:
            rw.stop()
        self.assertEqual((j.status, j.worker_id, j.attempts), ("done", w.id, 2))
        a = j.attempt_history[0]
        self.assertEqual((a.worker_id, a.expired), (first, True), "the killed worker's lease expired")

    def test_sigterm_stops_claiming_and_fails_after_grace(self) -> None:
        with tempfile.TemporaryDirectory() as markers:
            proc = self.start_proc(unique("pyw-term"), markers, grace=3.0)
            try:
                quick = self.c.submit(type="py.quick", queue=self.queue)
                block = self.c.submit(type="py.block", queue=self.queue, max_attempts=1)
                eventually(lambda: all(os.path.exists(os.path.join(markers, x.id)) for x in (quick, block)),
                           what="both jobs started")
                proc.send_signal(signal.SIGTERM)
                self.assertEqual(proc.wait(30), 0)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            after = self.c.submit(type="py.quick", queue=self.queue)
        self.assertEqual(self.c.get(quick.id).status, "done", "finished within the grace")
        b = self.c.get(block.id)
        self.assertEqual(b.status, "failed")
        self.assertIn("grace", b.last_error)
        self.assertFalse(b.attempt_history[0].expired, "reported by the worker, not expired")
        self.assertEqual(self.c.get(after.id).status, "pending", "the stopped worker claims nothing")

    def test_stale_lease_refused(self) -> None:
        wc = client(WORKER)
        wid = unique("pyw-stale")
        wc.register(wid, queues=[self.queue])
        j = self.c.submit(type="py.stale", queue=self.queue)
        jobs, ttl, _ = wc.claim(wid, types=["py.stale"], queues=[self.queue], wait="5s")
        self.assertEqual([x.id for x in jobs], [j.id])
        self.assertEqual(ttl, int(LEASE_TTL * 1000))
        first = jobs[0].lease
        # No heartbeat: the lease expires and the job is claimed again.
        eventually(lambda: self.c.get(j.id).status == "pending", timeout=10 * LEASE_TTL, what="lease expired")
        jobs, _, _ = wc.claim(wid, types=["py.stale"], queues=[self.queue], wait="5s")
        self.assertEqual([x.id for x in jobs], [j.id])
        second = jobs[0].lease
        self.assertNotEqual(first, second)
        with self.assertRaises(WorkronError) as e:
            wc.done(j.id, first)
        self.assertEqual((e.exception.status, e.exception.code), (409, "stale_lease"))
        answers = wc.reports([{"job_id": j.id, "status": "done", "lease": first}])
        self.assertEqual(answers[0].get("code"), "stale_lease")
        self.assertEqual(wc.done(j.id, second).status, "done")

    def test_lost_claim_reply_given_back(self) -> None:
        wc = client(WORKER)
        wid = unique("pyw-lost")
        wc.register(wid, queues=[self.queue])
        j = self.c.submit(type="py.lost", queue=self.queue)
        jobs, _, _ = wc.claim(wid, types=["py.lost"], queues=[self.queue], wait="5s", claim_seq=41)
        self.assertEqual([x.id for x in jobs], [j.id])
        # As if the reply never arrived: a heartbeat naming claim 41 without the job.
        wc.heartbeat_worker(wid, [], claims_from=40, claims_to=41)
        got = self.c.get(j.id)
        self.assertEqual((got.status, got.attempts), ("pending", 0), "given back, not counted")


if __name__ == "__main__":
    unittest.main()
