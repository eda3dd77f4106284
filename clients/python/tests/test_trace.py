"""A job's trace against a real node: the handler and its processes see the
TRACEPARENT of the job's trace, and a trace_hook's span replaces it."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import unittest
from typing import Dict, Iterator, Optional

from tests.helpers import RunningWorker, client, needs_node, new_worker, unique
from workron import JobContext, JobSpec, valid_traceparent

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
HOOK_SPAN = "00-4bf92f3577b34da6a3ce929d0e0e4736-b7ad6b7169203331-01"


class TraceparentTest(unittest.TestCase):
    def test_valid_traceparent(self) -> None:
        self.assertTrue(valid_traceparent(CALLER))
        for bad in ("", None, "garbage", CALLER.upper(), CALLER + "-extra", "ff" + CALLER[2:],
                    "00-" + "0" * 32 + "-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-" + "0" * 16 + "-01"):
            self.assertFalse(valid_traceparent(bad), bad)


@needs_node
class TraceTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()
        self.queue = unique("pytrace")

    def run_one(self, **kw) -> Dict[str, Optional[str]]:
        """Runs one job submitted with the caller's traceparent; returns what
        its handler saw."""
        seen: Dict[str, Optional[str]] = {}
        ran = threading.Event()
        w = new_worker(self.queue, **kw)

        @w.handle("py.trace")
        def handle(job: JobContext) -> None:
            seen["ctx"] = job.traceparent
            seen["job"] = job.job.traceparent
            out = subprocess.run(["sh", "-c", 'printf %s "$TRACEPARENT"'], env=job.environ(),
                                 capture_output=True, text=True, check=True)
            seen["process"] = out.stdout
            ran.set()

        rw = RunningWorker(w)
        try:
            j = self.c.submit(type="py.trace", queue=self.queue, traceparent=CALLER)
            # The test node exports no spans: the job keeps the caller's trace.
            self.assertEqual(j.traceparent, CALLER)
            self.assertEqual(self.c.wait(j.id, timeout=20, poll=0.05).status, "done")
            self.assertTrue(ran.is_set())
        finally:
            rw.stop()
        return seen

    def test_the_handler_sees_the_jobs_trace(self) -> None:
        seen = self.run_one()
        self.assertEqual(seen, {"ctx": CALLER, "job": CALLER, "process": CALLER})

    def test_a_trace_hooks_span_replaces_it(self) -> None:
        calls = []

        @contextlib.contextmanager
        def hook(job: JobContext) -> Iterator[str]:
            calls.append(job.traceparent)  # the parent of the hook's span
            yield HOOK_SPAN

        seen = self.run_one(trace_hook=hook)
        self.assertEqual(calls, [CALLER])
        self.assertEqual(seen, {"ctx": HOOK_SPAN, "job": CALLER, "process": HOOK_SPAN})

    def test_a_job_without_trace_has_none(self) -> None:
        j = self.c.submit(command="true", queue=self.queue)
        self.assertEqual(j.traceparent, "")
        self.assertNotIn("TRACEPARENT", JobContext(j).environ())

    def test_a_batch_joins_the_callers_trace(self) -> None:
        jobs = self.c.batch([JobSpec(command="true", queue=self.queue)] * 2, traceparent=CALLER)
        self.assertEqual([j.traceparent for j in jobs], [CALLER, CALLER])


if __name__ == "__main__":
    unittest.main()
