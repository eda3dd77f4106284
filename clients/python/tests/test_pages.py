"""Lists the server pages (GET /workers, /queues, /schedules): workers(),
queues() and schedules() follow every page; the *_page methods read one."""

from __future__ import annotations

import unittest

from tests.helpers import ADMIN, WORKER, client, needs_node, unique
from workron import JobSpec

# More than the server's default page (100): a client that reads one page
# without a limit misses some.
N = 105


@needs_node
class PagesTest(unittest.TestCase):
    def test_workers_follow_pages(self) -> None:
        wc, c = client(WORKER), client()
        prefix = unique("pw")
        ids = [f"{prefix}-{i:03d}" for i in range(N)]
        for wid in ids:
            wc.register(wid)
        listed = [w["id"] for w in c.workers()]
        self.assertEqual([i for i in listed if i.startswith(prefix)], ids)
        self.assertEqual(len(listed), len(set(listed)), "a worker listed twice")
        page, cursor = c.workers_page(limit=2, cursor=None)
        self.assertEqual(len(page), 2)
        self.assertTrue(cursor)
        more, _ = c.workers_page(limit=2, cursor=cursor)
        self.assertGreater(more[0]["id"], page[1]["id"])

    def test_queues_follow_pages(self) -> None:
        admin = client(ADMIN)
        prefix = unique("pq")
        names = [f"{prefix}-{i:03d}" for i in range(N)]
        for q in names:
            admin.pause_queue(q)
        listed = [q.name for q in admin.queues()]
        self.assertEqual([n for n in listed if n.startswith(prefix)], names)
        page, cursor = admin.queues_page(limit=1)
        self.assertEqual((len(page), bool(cursor)), (1, True))

    def test_schedules_follow_pages(self) -> None:
        c = client()
        prefix = unique("ps")
        names = [f"{prefix}-{i:03d}" for i in range(N)]
        for n in names:
            c.create_schedule(n, "@daily", JobSpec(command="true", queue=prefix))
        try:
            listed = [s.name for s in c.schedules()]
            self.assertEqual([n for n in listed if n.startswith(prefix)], names)
            page, cursor = c.schedules_page(limit=1)
            self.assertEqual((len(page), bool(cursor)), (1, True))
        finally:
            for n in names:
                c.delete_schedule(n)
