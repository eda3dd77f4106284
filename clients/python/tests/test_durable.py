"""Durable sleeps, waits, child jobs and per-step retries (issue #31): each
scenario runs a Worker against the fake node of fakepark.py and, through
go test, against the real binary."""

from __future__ import annotations

import threading
import time
import unittest
from collections import Counter
from typing import Any, Dict, List, Optional

from tests.fakepark import WAKE_DELAY, FakePark
from tests.helpers import DURABLE, RunningWorker, client, eventually, needs_node, new_worker, unique
from workron import (ChildFailed, Client, JobContext, Parked, StepFailed, StepLimitExceeded, StepTimeout, Worker,
                     WorkronError)
from workron.client import Job
from workron.durable import MAX_STEP_ATTEMPTS, MAX_STEPS_PER_JOB, Journal, step_delay


class _Scenarios:
    """The scenarios; a subclass says where the node is (client, worker)."""

    c: Client

    def client(self) -> Client:
        raise NotImplementedError

    def worker(self, queue: str, **kw: Any) -> Worker:
        raise NotImplementedError

    def setUp(self) -> None:
        self.c = self.client()
        self.queue = unique("pyd")
        self.runs: Counter = Counter()
        self.lock = threading.Lock()

    def ran(self, what: str, value: Any = None) -> Any:
        with self.lock:
            self.runs[what] += 1
        return value

    def serve(self, w: Worker) -> RunningWorker:
        rw = RunningWorker(w)
        self.addCleanup(rw.stop)  # type: ignore[attr-defined]
        return rw

    def submit(self, job_type: str, **kw: Any) -> str:
        return self.c.submit(type=job_type, queue=self.queue, **kw).id

    def finished(self, job_id: str, timeout: float = 20) -> Job:
        return self.c.wait(job_id, timeout=timeout, poll=0.05)

    # ---- the scenarios

    def test_sleep_parks_and_the_next_attempt_goes_on(self) -> None:
        w = self.worker(self.queue)
        seen: List[int] = []

        @w.handle("py.sleep")
        def handler(job: JobContext) -> str:
            seen.append(job.attempt)
            a = job.step("a", lambda: self.ran("a", "A"))
            job.sleep("nap", 0.5)
            self.ran("after nap")
            return a + job.step("b", lambda: self.ran("b", "B"))

        self.serve(w)
        done = self.finished(self.submit("py.sleep", max_attempts=1))
        self.assertEqual((done.status, done.result), ("done", "AB"), done.last_error)
        self.assertEqual(dict(self.runs), {"a": 1, "after nap": 1, "b": 1})
        self.assertEqual(len(seen), 2, "the handler ran twice: to the sleep, then from it")
        nap = self.c.step(done.id, "nap")
        self.assertEqual((nap["status"], nap.get("kind")), ("ok", "sleep"))

    def test_a_parked_job_frees_its_slot(self) -> None:
        w = self.worker(self.queue, concurrency=1)

        @w.handle("py.long")
        def long_sleep(job: JobContext) -> None:
            job.sleep("long", 3600)

        @w.handle("py.quick")
        def quick(job: JobContext) -> str:
            return "quick"

        self.serve(w)
        sleeper = self.submit("py.long")
        eventually(lambda: self.c.get(sleeper).raw.get("parked") is not None, what="the sleeper parked")
        done = self.finished(self.submit("py.quick"))
        self.assertEqual((done.status, done.result), ("done", "quick"))
        self.assertNotIn(self.c.get(sleeper).status, ("done", "failed"))
        self.assertEqual(self.c.get(sleeper).raw["parked"].get("kind"), "sleep")
        self.c.cancel(sleeper)

    def test_an_event_wakes_the_waiting_job(self) -> None:
        w = self.worker(self.queue)
        order = unique("order")

        @w.handle("py.wait")
        def handler(job: JobContext) -> Any:
            self.ran("before")
            return job.wait_for_event("paid", "payment.settled", job.payload["order"], timeout=3600)

        self.serve(w)
        j = self.submit("py.wait", payload={"order": order})
        eventually(lambda: (self.c.get(j).raw.get("parked") or {}).get("event") == "payment.settled",
                   what="the job parked on the event")
        self.assertEqual(self.c.get(j).raw["parked"].get("event_key"), order)
        self.assertEqual(self.c.send_event("payment.settled", order, {"amount": 42})["woke"], 1)
        done = self.finished(j)
        self.assertEqual((done.status, done.result), ("done", {"amount": 42}), done.last_error)
        self.assertEqual(self.runs["before"], 2)

    def test_an_event_sent_before_the_wait_is_not_lost(self) -> None:
        w = self.worker(self.queue)
        order = unique("order")
        self.assertEqual(self.c.send_event("payment.settled", order, "early")["woke"], 0)

        @w.handle("py.early")
        def handler(job: JobContext) -> Any:
            self.ran("handler")
            return job.wait_for_event("paid", "payment.settled", order, timeout=3600)

        self.serve(w)
        done = self.finished(self.submit("py.early"))
        self.assertEqual((done.status, done.result), ("done", "early"), done.last_error)
        self.assertEqual(self.runs["handler"], 1, "the wait did not park: the event was there")

    def test_a_wait_times_out(self) -> None:
        w = self.worker(self.queue)

        @w.handle("py.timeout")
        def handler(job: JobContext) -> Any:
            try:
                return job.wait_for_event("paid", "payment.settled", unique("never"), timeout=0.5)
            except StepTimeout as e:
                self.ran("timeout")
                return f"timed out: {e.step}"

        self.serve(w)
        done = self.finished(self.submit("py.timeout"))
        self.assertEqual((done.status, done.result), ("done", "timed out: paid"), done.last_error)
        self.assertEqual(self.c.step(done.id, "paid")["status"], "timeout")

    def test_a_signal_reaches_one_job(self) -> None:
        w = self.worker(self.queue)

        @w.handle("py.signal")
        def handler(job: JobContext) -> Any:
            job.step("approve", lambda: None)
            return job.wait_for_signal("approve", "approved", timeout=3600)  # "approve#2"

        self.serve(w)
        j = self.submit("py.signal")
        eventually(lambda: (self.c.get(j).raw.get("parked") or {}).get("signal") == "approved",
                   what="the job parked on the signal")
        self.assertEqual(self.c.get(j).raw["parked"].get("step"), "approve#2")
        self.assertEqual(self.c.signal(j, "approved", {"by": "ada"})["woke"], 1)
        done = self.finished(j)
        self.assertEqual((done.status, done.result), ("done", {"by": "ada"}), done.last_error)

    def test_invoke_returns_the_childs_result_or_raises_child_failed(self) -> None:
        w = self.worker(self.queue)

        @w.handle("py.child")
        def child(job: JobContext) -> Any:
            self.ran("child")
            if job.payload.get("fail"):
                raise ValueError("no luck")
            return {"twice": job.payload["n"] * 2}

        @w.handle("py.parent")
        def parent(job: JobContext) -> Any:
            got = job.invoke("double", {"type": "py.child", "queue": self.queue, "payload": {"n": 21}})
            try:
                job.invoke("bad", {"type": "py.child", "queue": self.queue, "payload": {"fail": True},
                                   "max_attempts": 1})
            except ChildFailed as e:
                return {"got": got, "failed": e.status, "error": "no luck" in e.error, "child": bool(e.child_id)}
            return {"got": got}

        self.serve(w)
        done = self.finished(self.submit("py.parent"), timeout=30)
        self.assertEqual((done.status, done.result),
                         ("done", {"got": {"twice": 42}, "failed": "failed", "error": True, "child": True}),
                         done.last_error)
        self.assertEqual(self.runs["child"], 2, "each child ran once")

    def test_a_step_retries_on_its_own(self) -> None:
        w = self.worker(self.queue)
        tries: Counter = Counter()

        def flaky(name: str, fails: int) -> Any:
            def fn() -> str:
                tries[name] += 1
                if tries[name] <= fails:
                    raise ConnectionError(f"{name} try {tries[name]} failed")
                return f"{name} ok"
            return fn

        @w.handle("py.retry")
        def handler(job: JobContext) -> Any:
            a = job.step("a", flaky("a", 2), attempts=3, backoff=0.01)
            try:
                job.step("b", flaky("b", 99), attempts=2, backoff=lambda n: 0.01)
            except StepFailed as e:
                return [a, e.message]
            return [a]

        self.serve(w)
        done = self.finished(self.submit("py.retry", max_attempts=1))
        self.assertEqual((done.status, done.result), ("done", ["a ok", "b try 2 failed"]), done.last_error)
        a, b = self.c.step(done.id, "a"), self.c.step(done.id, "b")
        self.assertEqual((a["status"], a["attempts"]), ("ok", 3))
        self.assertEqual((b["status"], b["attempts"], b["result"]), ("failed", 2, "b try 2 failed"))

    def test_a_handler_that_swallows_parked_still_parks(self) -> None:
        w = self.worker(self.queue)

        @w.handle("py.swallow")
        def handler(job: JobContext) -> str:
            job.step("first", lambda: self.ran("first"))
            try:
                job.sleep("nap", 0.3)
            except Parked:
                self.ran("parked")
                with self.assertRaises(Parked):  # type: ignore[attr-defined]
                    job.step("after", lambda: None)  # the attempt has ended: no more steps
                return "lost"  # not reported: the job is parked
            return "done"

        self.serve(w)
        done = self.finished(self.submit("py.swallow", max_attempts=1))
        self.assertEqual((done.status, done.result), ("done", "done"), done.last_error)
        self.assertEqual((self.runs["first"], self.runs["parked"]), (1, 1))


class DurableOnFakeTest(_Scenarios, unittest.TestCase):
    """The scenarios against the fake node: no report for a parked attempt."""

    def setUp(self) -> None:
        self.fake = FakePark()
        self.addCleanup(self.fake.close)
        super().setUp()

    def client(self) -> Client:
        return Client(self.fake.url)

    def worker(self, queue: str, **kw: Any) -> Worker:
        kw.setdefault("poll_wait", 0.3)
        kw.setdefault("grace", 2.0)
        return Worker(self.fake.url, queues=[queue], id=unique("pyw"), **kw)

    def test_a_handler_that_swallows_parked_still_parks(self) -> None:
        super().test_a_handler_that_swallows_parked_still_parks()
        with self.fake.lock:
            self.assertEqual([r["status"] for r in self.fake.reports], ["done"], "the parked attempt: no report")

    def test_a_parked_attempt_sends_no_report(self) -> None:
        w = self.worker(self.queue)

        @w.handle("py.nap")
        def handler(job: JobContext) -> str:
            job.sleep("nap", 0.3)
            return "woke"

        self.serve(w)
        done = self.finished(self.submit("py.nap"))
        self.assertEqual((done.status, done.result), ("done", "woke"))
        with self.fake.lock:
            reports = [(r["job_id"], r["lease"], r["status"]) for r in self.fake.reports]
        self.assertEqual(reports, [(done.id, 2, "done")], "one report, of the second attempt only")
        self.assertEqual(done.attempts, 1, "the parked attempt was not charged")

    def test_a_resume_over_a_truncated_journal_reads_its_listing_once(self) -> None:
        # 100 steps (more than a claim lists), the odd ones with a result
        # of 100 KiB: the second attempt reads the listing with results in
        # two pages (4 MiB of results a page), no step of its own, and
        # replays each step's result.
        n, big = 100, "x" * (100 << 10)
        w = self.worker(self.queue)
        replays: List[Any] = []

        @w.handle("py.long")
        def handler(job: JobContext) -> str:
            got = [job.step(f"s{i:03d}", lambda i=i: self.ran(f"s{i:03d}", f"{i}{big}" if i % 2 else None))
                   for i in range(n)]
            if job.attempt == 1:
                raise RuntimeError("crash after the long journal")
            replays.extend(got)
            return "done"

        self.serve(w)
        job_id = self.submit("py.long")
        done = self.finished(job_id)
        self.assertEqual((done.status, done.result, done.attempts), ("done", "done", 2))
        self.assertEqual(replays, [f"{i}{big}" if i % 2 else None for i in range(n)])
        self.assertEqual(set(self.runs.values()), {1}, "no step ran twice")
        with self.fake.lock:
            reqs = [(m, p) for m, p in self.fake.requests if m == "GET" and p.startswith(f"/jobs/{job_id}/steps")]
        self.assertEqual(reqs, [("GET", f"/jobs/{job_id}/steps")] * 2, "two pages of the listing, no GET per step")

    def test_a_parking_call_whose_reply_was_lost_is_sent_again(self) -> None:
        w = self.worker(self.queue)
        with self.fake.lock:
            self.fake.drop_replies = 2  # the sleep's, then the invoke's: each done, its reply lost

        @w.handle("py.child")
        def child(job: JobContext) -> str:
            return "child done"

        @w.handle("py.lost")
        def handler(job: JobContext) -> Any:
            self.ran("handler")
            job.sleep("nap", 0.2)
            return job.invoke("child", {"type": "py.child"})

        self.serve(w)
        done = self.finished(self.submit("py.lost", max_attempts=1))
        self.assertEqual((done.status, done.result), ("done", "child done"), done.last_error)
        self.assertEqual(self.runs["handler"], 3, "to the sleep, to the invoke, to the end: no attempt failed")
        with self.fake.lock:
            self.assertEqual(self.fake.drop_replies, 0)
            self.assertEqual(len([j for j in self.fake.jobs.values() if j["type"] == "py.child"]), 1)
            self.assertEqual([(r["job_id"], r["status"]) for r in self.fake.reports if r["job_id"] == done.id],
                             [(done.id, "done")], "the parked attempts were not reported failed")

    def test_the_fake_wakes_a_job_no_sooner_than_the_wake_delay(self) -> None:
        # A sleep of 1 ms, and a wait that times out after 1 ms: the job is
        # claimed again, but not before WAKE_DELAY after its park (so the
        # parked attempt's worker reads the park's reply first).
        for park in (lambda j: self.c.sleep_step(j, "nap", 1, duration=0.001),
                     lambda j: self.c.wait_step(j, "w", 1, event="e", event_key="k", timeout=0.001)):
            j = self.fake.submit(type="x")
            self.assertEqual(len(self.fake.claim({"types": ["x"], "max": 1})["jobs"]), 1)
            parked_at = time.monotonic()
            _, parked = park(j)
            self.assertTrue(parked)
            got: List[Any] = []
            eventually(lambda: got.extend(self.fake.claim({"types": ["x"], "max": 1})["jobs"]) or got,
                       timeout=5, what="the parked job claimed again")
            woke_after = time.monotonic() - parked_at
            self.assertEqual(got[0]["id"], j)
            self.assertGreaterEqual(woke_after, WAKE_DELAY, "claimed again sooner than WAKE_DELAY after the park")

    def test_wait_request_bodies(self) -> None:
        j = self.fake.submit(type="x")
        self.fake.claim({"types": ["x"], "max": 1})
        step, parked = self.c.wait_step(j, "w", 1, event="e", event_key="k", timeout=1.5)
        self.assertTrue(parked)
        self.assertEqual((step["event"], step["event_key"], step["status"]), ("e", "k", "waiting"))
        with self.assertRaises(ValueError):
            self.c.wait_step(j, "w2", 1, event="e", signal="s")
        with self.assertRaises(ValueError):
            self.c.sleep_step(j, "s", 1, duration=-1)
        with self.assertRaises(WorkronError) as e:
            self.c.sleep_step(j, "s", 1, duration=1)  # the attempt ended when it parked
        self.assertEqual(e.exception.code, "stale_lease")


@needs_node
class DurableOnNodeTest(_Scenarios, unittest.TestCase):
    """The scenarios against the real binary (go test ./clients/python)."""

    def client(self) -> Client:
        return client()

    def worker(self, queue: str, **kw: Any) -> Worker:
        # client and worker: an invoke submits its child job
        return new_worker(queue, token=DURABLE, **kw)


class _NoRequests:
    """A client that must not be called."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"unexpected request: {name}")


class JournalTest(unittest.TestCase):
    def journal(self, raw: Optional[Dict[str, Any]] = None) -> Journal:
        job = Job.from_dict(dict({"id": "j1", "status": "running", "lease": 7}, **(raw or {})))
        return Journal(_NoRequests(), job, threading.Event())  # type: ignore[arg-type]

    def test_occurrences_are_bounded_by_the_journals_steps(self) -> None:
        j = self.journal()
        keys = [j.next_key(f"s{i % 3}") for i in range(MAX_STEPS_PER_JOB)]
        self.assertEqual(keys[:4], ["s0", "s1", "s2", "s0#2"])
        with self.assertRaises(StepLimitExceeded) as e:
            j.next_key("one more")
        self.assertIn(f"more than {MAX_STEPS_PER_JOB} steps in one attempt", str(e.exception))
        self.assertIn("max_steps_per_job", str(e.exception))

    def test_a_steps_attempts_are_bounded(self) -> None:
        j = self.journal()
        for bad in (0, MAX_STEP_ATTEMPTS + 1):
            with self.assertRaises(ValueError) as e:
                j.run("s", lambda: None, bad, None)
            self.assertIn(f"attempts: must be from 1 to {MAX_STEP_ATTEMPTS}", str(e.exception))

    def test_a_listed_sleep_replays_without_a_request(self) -> None:
        j = self.journal({"journal": {"count": 1, "steps": [{"key": "nap", "status": "ok", "kind": "sleep"}]}})
        j.sleep("nap", duration=3600)  # _NoRequests: would fail on any request

    def test_a_run_step_not_listed_in_a_whole_listing_costs_no_read(self) -> None:
        j = self.journal({"journal": {"count": 1, "steps": [{"key": "a", "status": "ok"}]}})
        self.assertEqual(j.lookup("b"), ("b", None))

    def test_step_delay(self) -> None:
        from workron import Backoff
        self.assertEqual([step_delay(Backoff(base=1, max=5), n) for n in (1, 2, 3, 4)], [1, 2, 4, 5])
        self.assertEqual(step_delay("250ms", 3), 0.25)
        self.assertEqual(step_delay(lambda n: n * 0.5, 4), 2.0)
        d = step_delay(Backoff(base=1, max=5, jitter=0.5), 1)
        self.assertTrue(1 <= d <= 1.5, d)

    def test_the_limit_matches_the_docs(self) -> None:
        import os
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        with open(os.path.join(root, "..", "..", "docs", "workers.md")) as f:
            self.assertIn(f"| steps per job (`max_steps_per_job`) | {MAX_STEPS_PER_JOB:,} |", f.read())




if __name__ == "__main__":
    unittest.main()
