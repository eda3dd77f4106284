"""Finding and acting on many jobs: list with filter=, count, bulk actions."""

from __future__ import annotations

import unittest

from tests.helpers import client, needs_node, unique
from workron import JobSpec, WorkronError


@needs_node
class FilterCountTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()
        self.queue = unique("pyfind")

    def test_list_and_count_with_filter(self) -> None:
        ids = self.c.batch_ids([JobSpec(command="x", queue=self.queue, metadata={"tenant": "acme" if i % 2 else "other"})
                                for i in range(6)])
        acme = [ids[i] for i in (5, 3, 1)]  # newest first
        expr = f'queue == "{self.queue}" and metadata["tenant"] == "acme"'
        page = self.c.list(filter=expr)
        self.assertEqual([j.id for j in page.jobs], acme)
        self.assertEqual((page.next_cursor, page.partial), ("", False))
        self.assertEqual([j.id for j in self.c.iter_jobs(filter=expr, limit=2)], acme)
        self.assertEqual([j.id for j in self.c.list(filter='metadata["tenant"] == "acme"', queue=self.queue).jobs],
                         acme, "filter and the other conditions all hold")

        n = self.c.count(queue=self.queue)
        self.assertEqual((n.count, n.by_status, n.exact), (6, {"pending": 6}, True))
        n = self.c.count(filter=expr)
        self.assertEqual((n.count, n.exact, n.next_cursor), (3, True, ""))
        self.assertEqual(self.c.count_all(filter=expr).count, 3)
        self.assertEqual(self.c.count(queue=self.queue, metadata={"tenant": "other"}).count, 3)
        self.assertEqual(self.c.count(queue=self.queue, status="done").count, 0)

    def test_bad_filter_is_a_400_naming_it(self) -> None:
        for call in (lambda: self.c.list(filter="status =="), lambda: self.c.count(filter="status ==")):
            with self.assertRaises(WorkronError) as e:
                call()
            self.assertEqual((e.exception.status, e.exception.code), (400, "invalid"))
            self.assertIn("filter", e.exception.message)


@needs_node
class BulkTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()
        self.queue = unique("pybulk")

    def test_cancel_retry_and_priority_in_bulk(self) -> None:
        ids = self.c.batch_ids([JobSpec(command="x", queue=self.queue) for _ in range(5)])
        other = self.c.submit(command="x", queue=unique("pybulk-other"))

        dry = self.c.count_bulk("cancel", queue=self.queue, status="pending")
        self.assertEqual((dry.matched, dry.exact), (5, True))
        self.assertEqual(self.c.count(queue=self.queue, status="pending").count, 5, "a dry run starts nothing")

        started = self.c.start_bulk("cancel", queue=self.queue, status="pending")
        self.assertEqual(started.action, "cancel")
        self.assertIn("queue=" + self.queue, started.selector)
        b = self.c.wait_bulk(started.id, timeout=20, poll=0.05)
        self.assertEqual((b.state, b.matched, b.done, b.skipped, b.failed), ("done", 5, 5, 0, 0))
        self.assertEqual({self.c.get(i).status for i in ids}, {"cancelled"})
        self.assertEqual(self.c.get(other.id).status, "pending", "a job the filters do not match is left alone")

        retry = self.c.start_bulk("retry", filter=f'queue == "{self.queue}" and status == "cancelled"')
        b = self.c.wait_bulk(retry.id, timeout=20, poll=0.05)
        self.assertEqual((b.state, b.matched, b.done), ("done", 5, 5))
        self.assertEqual(self.c.count(queue=self.queue).by_status, {"pending": 5})

        prio = self.c.start_bulk("priority", queue=self.queue, priority=7)
        b = self.c.wait_bulk(prio.id, timeout=20, poll=0.05)
        self.assertEqual((b.state, b.done, b.priority), ("done", 5, 7))
        self.assertEqual({self.c.get(i).priority for i in ids}, {7})

        self.assertEqual(self.c.get_bulk(prio.id).done, 5)
        listed = [x.id for x in self.c.bulks()]
        self.assertLess(listed.index(prio.id), listed.index(retry.id), "newest first")
        self.assertLess(listed.index(retry.id), listed.index(started.id))

    def test_stop(self) -> None:
        n = 1000
        self.c.batch_ids([JobSpec(command="x", queue=self.queue) for _ in range(n)])
        started = self.c.start_bulk("cancel", queue=self.queue)
        stopped = self.c.stop_bulk(started.id)
        self.assertIn(stopped.state, ("stopped", "done"))
        b = self.c.wait_bulk(started.id, timeout=20, poll=0.05)
        self.assertEqual(b.state, stopped.state)
        cancelled = self.c.count(queue=self.queue, status="cancelled").count
        if b.state == "stopped":
            self.assertLess(b.matched, n, "a stopped action ends before its walk does")
        self.assertEqual(cancelled, b.done, "each job it acted on, and no other")
        self.assertEqual(self.c.stop_bulk(started.id).state, b.state, "stopping again changes nothing")

    def test_bad_requests(self) -> None:
        cases = [
            (lambda: self.c.start_bulk("explode", queue=self.queue), "action"),
            (lambda: self.c.start_bulk("retry"), "filter"),
            (lambda: self.c.start_bulk("priority", queue=self.queue), "priority"),
            (lambda: self.c.count_bulk("retry", filter="status =="), "filter"),
        ]
        for call, field in cases:
            with self.assertRaises(WorkronError) as e:
                call()
            self.assertEqual((e.exception.status, e.exception.code), (400, "invalid"), field)
            self.assertIn(field, e.exception.message)
        with self.assertRaises(WorkronError) as e:
            self.c.get_bulk("999999")
        self.assertEqual(e.exception.status, 404)
        with self.assertRaises(WorkronError) as e:
            self.c.stop_bulk("999999")
        self.assertEqual(e.exception.status, 404)


if __name__ == "__main__":
    unittest.main()
