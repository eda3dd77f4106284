"""Cancels and progress reach the cluster and the worker at once, not at the
worker's next heartbeat: against the node whose leases last 90s (its
workers heartbeat every 30s), every wait here gives up after 15s."""

from __future__ import annotations

import os
import tempfile
import threading
import unittest

from tests.helpers import CA, CLIENT, LONG_LEASE_URL, WORKER, RunningWorker, eventually, unique
from workron import Client, JobContext, Worker

BEFORE_HEARTBEAT = 15.0  # a heartbeat comes 30s after a job starts


@unittest.skipUnless(LONG_LEASE_URL, "WORKRON_TEST_LONG_LEASE_URL not set: run `go test ./clients/python`")
class PushTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = Client(LONG_LEASE_URL, token=CLIENT, tls_ca=CA)
        self.queue = unique("pypush")

    def worker(self, **kw) -> Worker:
        return Worker(LONG_LEASE_URL, queues=[self.queue], token=WORKER, tls_ca=CA, id=unique("pyw"),
                      poll_wait=5.0, grace=5.0, kill_grace=2.0, **kw)

    def test_cancel_signals_the_command(self) -> None:
        d = tempfile.mkdtemp()
        started, termed = os.path.join(d, "started"), os.path.join(d, "termed")
        rw = RunningWorker(self.worker(shell=True))
        try:
            j = self.c.submit(queue=self.queue, command=(
                f"trap 'echo TERM > {termed}; exit 143' TERM; touch {started}; while true; do sleep 0.02; done"))
            eventually(lambda: os.path.exists(started), timeout=BEFORE_HEARTBEAT, what="the command started")
            # The worker's first heartbeat comes a third of a default TTL
            # (10s) after it starts, before it learned the node's: cancel
            # once that one renewed the lease, so the next is 30s away.
            claimed = self.c.get(j.id).lease_expires_at
            eventually(lambda: self.c.get(j.id).lease_expires_at != claimed, timeout=20,
                       what="the first heartbeat renewed the lease")
            self.c.cancel(j.id)
            eventually(lambda: self.c.get(j.id).status == "cancelled", timeout=BEFORE_HEARTBEAT,
                       what="the job cancelled")
        finally:
            rw.stop()
        with open(termed) as f:
            self.assertEqual(f.read(), "TERM\n", "the command got SIGTERM")

    def test_progress_shows_each_value(self) -> None:
        w = self.worker()
        seen = [threading.Event() for _ in range(3)]
        steps = [(10, "rows"), (40, "sorting"), (80, "writing")]

        @w.handle("py.steps")
        def steps_handler(job: JobContext) -> None:
            for (pct, msg), ev in zip(steps, seen):
                job.progress(pct, msg)
                ev.wait(BEFORE_HEARTBEAT + 5)

        rw = RunningWorker(w)
        try:
            j = self.c.submit(type="py.steps", queue=self.queue)
            for (pct, msg), ev in zip(steps, seen):
                def shows() -> bool:
                    p = self.c.get(j.id).progress
                    return p is not None and (p.percent, p.message) == (pct, msg)
                eventually(shows, timeout=BEFORE_HEARTBEAT, what=f"progress {pct}% {msg} shown")
                ev.set()
            done = self.c.wait(j.id, timeout=BEFORE_HEARTBEAT, poll=0.05)
        finally:
            for ev in seen:
                ev.set()
            rw.stop()
        self.assertEqual(done.status, "done")
