"""Parent results over the bound of a claim reply, against a real node: the
claim carries some (parent_results_truncated, parent_results_cursor), GET
/jobs/{id}/parent_results pages the rest, and a worker hands a handler and
a shell command all of them."""

from __future__ import annotations

import unittest

from tests.helpers import WORKER, RunningWorker, client, needs_node, new_worker, unique
from workron import JobContext, JobSpec

PARENTS = 20
PAD = 60 << 10  # 20 results of 60 KiB: over the 1 MiB a claim carries per job


@needs_node
class ParentResultsTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()
        self.queue = unique("pypr")

    def test_a_claim_cut_short_pages_the_rest(self) -> None:
        wc = client(WORKER)
        wid = unique("pyw-pr")
        wc.register(wid, queues=[self.queue])
        specs = [JobSpec(type="py.p", queue=self.queue) for _ in range(PARENTS)]
        specs.append(JobSpec(type="py.kid", queue=self.queue, depends_on=[f"${i}" for i in range(PARENTS)]))
        kid = self.c.batch(specs)[-1]
        parents, _, _ = wc.claim(wid, types=["py.p"], queues=[self.queue], max=PARENTS, wait="5s")
        self.assertEqual(len(parents), PARENTS)
        want = {p.id: {"parent": p.id, "pad": "x" * PAD} for p in parents}
        answers = wc.reports([{"job_id": p.id, "status": "done", "lease": p.lease, "result": want[p.id]}
                              for p in parents])
        self.assertTrue(all(a.get("status") == "done" for a in answers), answers)

        jobs, _, _ = wc.claim(wid, types=["py.kid"], queues=[self.queue], wait="5s")
        self.assertEqual([j.id for j in jobs], [kid.id])
        job = jobs[0]
        self.assertTrue(job.parent_results_truncated)
        self.assertLess(len(job.parent_results), PARENTS)
        page, nxt = wc.parent_results(job.id, job.parent_results_cursor, limit=1)
        self.assertEqual(len(page), 1)
        self.assertNotEqual(nxt, "")
        self.assertFalse(set(page) & set(job.parent_results), "the page after the cursor repeats the claim's")
        wc.fetch_parent_results(job)
        self.assertEqual((job.parent_results_truncated, job.parent_results_cursor), (False, ""))
        self.assertEqual(job.parent_results, want)
        self.assertEqual(wc.done(job.id, job.lease).status, "done")

    def test_a_worker_hands_every_parent_result_to_its_jobs(self) -> None:
        w = new_worker(self.queue, shell=True)

        @w.handle("py.p")
        def parent(job: JobContext) -> dict:
            return {"parent": job.id, "pad": "x" * PAD}

        @w.handle("py.kid")
        def kid(job: JobContext) -> int:
            assert all(r["parent"] == pid for pid, r in job.parent_results.items())
            return len(job.parent_results)

        # Over 64 KiB, a command finds them in the file the worker writes.
        count = ('n=$(grep -o \'"pad"\' "$WORKRON_PARENT_RESULTS_FILE" | wc -l); '
                 'printf \'%d\' "$n" > "$WORKRON_RESULT_FILE"')
        deps = [f"${i}" for i in range(PARENTS)]
        specs = [JobSpec(type="py.p", queue=self.queue) for _ in range(PARENTS)]
        specs += [JobSpec(type="py.kid", queue=self.queue, depends_on=deps),
                  JobSpec(command=count, queue=self.queue, depends_on=deps)]
        rw = RunningWorker(w)
        try:
            kids = [self.c.wait(j.id, timeout=60, poll=0.05) for j in self.c.batch(specs)[PARENTS:]]
        finally:
            rw.stop()
        for k in kids:
            self.assertEqual((k.status, k.result), ("done", PARENTS), k.last_error)


if __name__ == "__main__":
    unittest.main()
