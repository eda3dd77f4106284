"""Durable steps against a real node: a step recorded in one attempt is
replayed, not run, in the next; a step failed with NoRetry is recorded and
fails the job for good."""

from __future__ import annotations

import threading
import unittest
from collections import Counter

from tests.helpers import RunningWorker, client, needs_node, new_worker, unique
from workron import Backoff, JobContext, NoRetry, StepFailed


@needs_node
class StepsTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()
        self.queue = unique("pys")

    def test_recorded_steps_are_replayed_after_a_crash(self) -> None:
        w = new_worker(self.queue)
        runs: Counter = Counter()
        lock = threading.Lock()
        seen = {}

        def run(name: str, value):
            def fn():
                with lock:
                    runs[name] += 1
                return value
            return fn

        @w.handle("py.steps")
        def steps(job: JobContext) -> str:
            a = job.step("A", run("A", {"from": job.attempt}))
            b = job.step("B", run("B", f"b{job.attempt}"))
            seen[job.attempt] = (a, b)
            if job.attempt == 1:
                raise RuntimeError("crash after B")
            job.step("C", run("C", None))
            for _ in range(2):
                job.step("send", run("send", 1))
            return "done"

        rw = RunningWorker(w)
        try:
            j = self.c.submit(type="py.steps", queue=self.queue, max_attempts=3, backoff=Backoff(base="10ms"))
            done = self.c.wait(j.id, timeout=20, poll=0.05)
        finally:
            rw.stop()
        self.assertEqual((done.status, done.attempts), ("done", 2), done.last_error)
        self.assertEqual(dict(runs), {"A": 1, "B": 1, "C": 1, "send": 2})
        self.assertEqual(seen[2], ({"from": 1}, "b1"), "the second attempt gets the first's results")
        listed, cursor = self.c.steps(j.id)
        self.assertEqual([(s["key"], s["job_attempt"]) for s in listed],
                         [("A", 1), ("B", 1), ("C", 2), ("send", 2), ("send#2", 2)])
        self.assertEqual(cursor, "")
        self.assertEqual(self.c.step(j.id, "B")["result"], "b1")

    def test_a_step_failed_for_good_fails_the_job(self) -> None:
        w = new_worker(self.queue)

        @w.handle("py.badstep")
        def bad(job: JobContext) -> None:
            def charge():
                raise NoRetry("card declined")
            try:
                job.step("charge", charge)
            except StepFailed as e:
                raise NoRetry(f"seen: {e.message}") from e

        rw = RunningWorker(w)
        try:
            j = self.c.submit(type="py.badstep", queue=self.queue, max_attempts=3)
            done = self.c.wait(j.id, timeout=20, poll=0.05)
        finally:
            rw.stop()
        self.assertEqual((done.status, done.attempts), ("failed", 1))
        self.assertIn("seen: card declined", done.last_error)
        rec = self.c.step(j.id, "charge")
        self.assertEqual((rec["status"], rec["result"]), ("failed", "card declined"))


if __name__ == "__main__":
    unittest.main()
