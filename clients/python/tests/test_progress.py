"""Progress and results against a real node: a handler's progress rides on
heartbeats and shows in GET /jobs/{id} and wait's on_progress; what it
returns is the job's result, which a dependent reads in parent_results."""

from __future__ import annotations

import threading
import unittest

from tests.helpers import WORKER, RunningWorker, client, eventually, needs_node, new_worker, unique
from workron import JobContext, WorkronError


@needs_node
class ProgressTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()
        self.queue = unique("pyp")

    def test_progress_and_result(self) -> None:
        w = new_worker(self.queue)
        release = threading.Event()

        @w.handle("py.count")
        def count(job: JobContext) -> dict:
            job.progress(10, "start")
            job.progress(55, "half way")
            release.wait(20)
            return {"rows": 42}

        rw = RunningWorker(w)
        try:
            j = self.c.submit(type="py.count", queue=self.queue)
            seen = []
            eventually(lambda: getattr(self.c.get(j.id).progress, "percent", None) == 55, what="progress 55 shown")
            p = self.c.get(j.id).progress
            self.assertEqual((p.percent, p.message), (55, "half way"))
            self.assertIsNotNone(p.at)
            threading.Timer(0.3, release.set).start()
            done = self.c.wait(j.id, timeout=20, poll=0.05, on_progress=seen.append)
        finally:
            release.set()
            rw.stop()
        self.assertEqual(done.status, "done")
        self.assertEqual(done.result, {"rows": 42})
        self.assertEqual(done.progress.percent, 55, "the finished job keeps its last progress")
        self.assertTrue(any(s.progress is not None and s.progress.percent == 55 for s in seen))

    def test_dependent_reads_its_parents_result(self) -> None:
        w = new_worker(self.queue)

        @w.handle("py.parent")
        def parent(job: JobContext) -> dict:
            return {"n": job.payload["n"]}

        @w.handle("py.child")
        def child(job: JobContext) -> int:
            return sum(r["n"] for r in job.parent_results.values())

        rw = RunningWorker(w)
        try:
            a = self.c.submit(type="py.parent", queue=self.queue, payload={"n": 2})
            b = self.c.submit(type="py.parent", queue=self.queue, payload={"n": 40})
            kid = self.c.submit(type="py.child", queue=self.queue, depends_on=[a.id, b.id])
            kid = self.c.wait(kid.id, timeout=30, poll=0.05)
        finally:
            rw.stop()
        self.assertEqual((kid.status, kid.result), ("done", 42))

    def test_the_last_progress_rides_on_the_report(self) -> None:
        w = new_worker(self.queue)

        @w.handle("py.quick")
        def quick(job: JobContext) -> str:
            job.progress(100, "all done")
            return "ok"

        rw = RunningWorker(w)
        try:
            j = self.c.submit(type="py.quick", queue=self.queue)
            j = self.c.wait(j.id, timeout=20, poll=0.05)
        finally:
            rw.stop()
        self.assertEqual((j.status, j.result), ("done", "ok"))
        self.assertEqual((j.progress.percent, j.progress.message), (100, "all done"))

    def test_job_heartbeat_carries_progress(self) -> None:
        # A worker of the v0 worker API's shape: it claims, then renews its one
        # job with POST /jobs/{id}/heartbeat, the progress riding on it.
        wc = client(WORKER)
        wid = unique("pyw-hb")
        wc.register(wid, queues=[self.queue])
        j = self.c.submit(type="py.hb", queue=self.queue)
        jobs, _, _ = wc.claim(wid, types=["py.hb"], queues=[self.queue], wait="5s")
        self.assertEqual([x.id for x in jobs], [j.id])
        lease = jobs[0].lease
        reply = wc.heartbeat_job(j.id, lease, progress=(30, "a third"))
        self.assertNotIn("action", reply)
        p = self.c.get(j.id).progress
        self.assertEqual((p.percent, p.message), (30, "a third"))
        with self.assertRaises(WorkronError) as e:
            wc.heartbeat_job(j.id, lease, progress=(101, "too far"))
        self.assertEqual(e.exception.status, 400)
        self.assertIn("progress.percent", str(e.exception))
        self.assertEqual(self.c.get(j.id).progress.percent, 30, "a refused heartbeat changes nothing")
        with self.assertRaises(WorkronError) as e:
            wc.heartbeat_job(j.id, lease + 1000)
        self.assertEqual((e.exception.status, e.exception.code), (409, "stale_lease"))
        self.assertEqual(wc.done(j.id, lease).status, "done")

    def test_a_result_too_large_fails_the_attempt(self) -> None:
        w = new_worker(self.queue)
        w.handle("py.big", lambda job: "x" * (64 << 10))
        rw = RunningWorker(w)
        try:
            j = self.c.submit(type="py.big", queue=self.queue, max_attempts=3)
            j = self.c.wait(j.id, timeout=20, poll=0.05)
        finally:
            rw.stop()
        self.assertEqual((j.status, j.attempts, j.result), ("failed", 1, None))
        self.assertIn("more than 65536", j.last_error)
