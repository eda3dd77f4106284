"""The client against a real node: submit, batch, get, list, wait, cancel,
retry, schedules, queues and errors."""

from __future__ import annotations

import datetime as dt
import os
import tempfile
import unittest

from tests.helpers import ADMIN, CA, URL, RunningWorker, client, eventually, needs_node, new_worker, unique
from workron import Backoff, Client, JobList, JobSpec, Resources, Worker, WorkronError
from workron.client import DEFAULT_SERVERS, go_duration, parse_go_duration


class DurationTest(unittest.TestCase):
    def test_go_durations(self) -> None:
        self.assertEqual(go_duration(1.5), "1500ms")
        self.assertEqual(go_duration(dt.timedelta(minutes=2)), "120000ms")
        self.assertEqual(go_duration("5m"), "5m")
        self.assertEqual(parse_go_duration("1h2m3.5s"), 3723.5)
        self.assertEqual(parse_go_duration("300ms"), 0.3)
        with self.assertRaises(ValueError):
            parse_go_duration("5x")


class DefaultServersTest(unittest.TestCase):
    def test_without_servers_the_client_tries_what_the_cli_does(self) -> None:
        saved = os.environ.pop("WORKRON_SERVER", None)
        try:
            self.assertEqual(Client()._servers, list(DEFAULT_SERVERS))
            self.assertEqual(DEFAULT_SERVERS[0], "http://127.0.0.1:7070", "the dev node first")
            os.environ["WORKRON_SERVER"] = "http://a:1,http://b:2"
            self.assertEqual(Client()._servers, ["http://a:1", "http://b:2"])
            self.assertEqual(Worker(queues=["q"]).client._servers, ["http://a:1", "http://b:2"])
            self.assertEqual(Client("http://c:3")._servers, ["http://c:3"], "given servers win")
        finally:
            os.environ.pop("WORKRON_SERVER", None)
            if saved is not None:
                os.environ["WORKRON_SERVER"] = saved


@needs_node
class ClientTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()
        self.queue = unique("pyq")

    def test_submit_every_field(self) -> None:
        parent = self.c.submit(command="true", queue=self.queue)
        run_at = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)
        spec = JobSpec(
            type="py.every", payload={"n": 1, "s": "x"}, env={"A": "1"}, depends_on=[parent.id],
            max_attempts=5, queue=self.queue, priority=7, idempotency_key=unique("key"), timeout=90,
            run_at=run_at, backoff=Backoff(base="2s", max="1m", jitter=0.1), metadata={"team": "py"},
            retention="48h", unique_for="1h", resources=Resources(memory_mb=64), tags=["py"])
        job = self.c.submit(spec)
        self.assertEqual(job.status, "blocked")
        got = self.c.get(job.id)
        self.assertEqual((got.type, got.payload, got.env), ("py.every", {"n": 1, "s": "x"}, {"A": "1"}))
        self.assertEqual((got.queue, got.priority, got.max_attempts), (self.queue, 7, 5))
        self.assertEqual((got.depends_on, got.metadata, got.tags), ([parent.id], {"team": "py"}, ["py"]))
        self.assertEqual(got.idempotency_key, spec.idempotency_key)
        self.assertEqual(parse_go_duration(got.timeout), 90.0)
        self.assertEqual(got.resources, Resources(memory_mb=64))
        self.assertEqual(got.raw["backoff"], {"base": "2s", "max": "1m0s", "jitter": 0.1})
        self.assertEqual(got.run_at.replace(microsecond=0), run_at.replace(microsecond=0))
        self.assertEqual(self.c.submit(spec).id, job.id, "same idempotency_key: the same job")

    def test_delay_and_gang(self) -> None:
        job = self.c.submit(command="true", queue=self.queue, delay=3600)
        self.assertEqual(job.status, "scheduled")
        gang, tasks = self.c.submit_gang(JobSpec(command="true", queue=self.queue, gang_size=2))
        self.assertEqual(len(tasks), 2)
        self.assertEqual(self.c.get(tasks[1]).gang_id, gang)

    def test_batch_depends(self) -> None:
        jobs = self.c.batch([JobSpec(command="a", queue=self.queue),
                             JobSpec(command="b", queue=self.queue, depends_on=["$0"])])
        self.assertEqual([j.status for j in jobs], ["pending", "blocked"])
        self.assertEqual(jobs[1].depends_on, [jobs[0].id])

    def test_batch_ids(self) -> None:
        key = unique("key")
        first = self.c.batch([JobSpec(command="a", queue=self.queue, idempotency_key=key)])
        ids = self.c.batch_ids([JobSpec(command="a", queue=self.queue, idempotency_key=key),
                                JobSpec(command="b", queue=self.queue),
                                JobSpec(command="c", queue=self.queue, depends_on=["$1"])])
        self.assertEqual(len(ids), 3)
        self.assertEqual(ids[0], first[0].id, "an idempotency key's job")
        self.assertNotIn(ids[1], (ids[0], ids[2]))
        c = self.c.get(ids[2])
        self.assertEqual((c.command, c.depends_on), ("c", [ids[1]]))
        self.assertEqual(len(self.c.list(queue=self.queue).jobs), 3)
        with self.assertRaises(WorkronError) as e:
            self.c.batch_ids([JobSpec(command="d", queue=self.queue), JobSpec(queue=self.queue)])
        self.assertEqual((e.exception.status, e.exception.code), (400, "invalid"))
        self.assertEqual(len(self.c.list(queue=self.queue).jobs), 3, "all or nothing")

    def test_plain_dicts_are_jobs(self) -> None:
        # What a user writes from the API's JSON: dicts, durations in seconds
        # or as Go strings, nested backoff and resources as dicts.
        ids = self.c.batch_ids([{"command": "a", "queue": self.queue, "timeout": 30},
                                {"command": "b", "queue": self.queue, "depends_on": ["$0"], "max_attempts": 2,
                                 "backoff": {"base": "2s"}, "resources": {"slots": 1}}])
        a, b = self.c.get(ids[0]), self.c.get(ids[1])
        self.assertEqual((a.command, parse_go_duration(a.timeout)), ("a", 30.0))
        self.assertEqual((b.command, b.depends_on, b.max_attempts), ("b", [ids[0]], 2))
        self.assertEqual(b.resources.slots if b.resources else None, 1)
        jobs = self.c.batch([{"command": "c", "queue": self.queue, "delay": 3600}])
        self.assertEqual((jobs[0].command, jobs[0].status), ("c", "scheduled"))
        self.assertEqual(self.c.submit({"command": "d", "queue": self.queue}).command, "d")
        with self.assertRaises(WorkronError) as e:  # a bad value is the server's 400, naming it
            self.c.batch_ids([{"command": "e", "queue": self.queue, "timeout": "soon"}])
        self.assertEqual((e.exception.status, e.exception.code), (400, "invalid"))
        self.assertIn("timeout", e.exception.message)
        with self.assertRaises(TypeError):
            self.c.batch_ids(["echo hi"])  # type: ignore[list-item]
        self.assertEqual(len(self.c.list(queue=self.queue).jobs), 4)

    def test_list_filters_and_cursor(self) -> None:
        tag = unique("batch")
        ids = [j.id for j in self.c.batch([JobSpec(command="x", queue=self.queue, metadata={"b": tag})
                                           for _ in range(5)])]
        page = self.c.list(metadata={"b": tag}, limit=2)
        self.assertEqual(len(page.jobs), 2)
        self.assertTrue(page.next_cursor)
        self.assertEqual(page.jobs[0].id, ids[-1], "newest first")
        every = [j.id for j in self.c.iter_jobs(metadata={"b": tag}, limit=2)]
        self.assertEqual(every, list(reversed(ids)))
        self.assertEqual(len(self.c.list(queue=self.queue, status="pending").jobs), 5)
        self.assertEqual(self.c.list(queue=self.queue, status="done").jobs, [])

    def test_cancel_retry(self) -> None:
        a, b = self.c.batch([JobSpec(command="a", queue=self.queue),
                             JobSpec(command="b", queue=self.queue, depends_on=["$0"])])
        self.assertEqual(self.c.cancel(a.id).status, "cancelled")
        self.assertEqual(self.c.get(b.id).status, "cancelled", "cascade")
        self.assertEqual(self.c.retry(a.id).status, "pending")
        self.assertEqual(self.c.get(b.id).status, "blocked", "retry cascades back")
        self.assertEqual(self.c.cancel(a.id, cascade=False).status, "cancelled")
        self.assertEqual(self.c.get(b.id).status, "blocked")
        with self.assertRaises(WorkronError) as e:
            self.c.cancel(a.id)
        self.assertEqual((e.exception.status, e.exception.code), (409, "conflict"))

    def test_wait_reports_progress(self) -> None:
        w = new_worker(self.queue)
        w.handle("py.wait", lambda job: None)
        rw = RunningWorker(w)
        try:
            job = self.c.submit(type="py.wait", queue=self.queue)
            seen = []
            done = self.c.wait(job.id, timeout=30, poll=0.05, on_progress=lambda j: seen.append(j.status))
        finally:
            rw.stop()
        self.assertEqual(done.status, "done")
        self.assertEqual(seen[-1], "done")
        self.assertEqual(done.worker_id, w.id)
        with self.assertRaises(TimeoutError):
            self.c.wait(self.c.submit(command="never", queue=unique("idle")).id, timeout=0.2, poll=0.05)

    def test_schedules(self) -> None:
        name = unique("pysched")
        job = JobSpec(command="echo tick", queue=self.queue)
        s = self.c.create_schedule(name, "0 3 * * *", job, timezone="UTC", overlap="skip")
        self.assertEqual((s.name, s.cron, s.overlap, s.paused), (name, "0 3 * * *", "skip", False))
        self.assertIsNotNone(s.next_run)
        self.assertIn(name, [x.name for x in self.c.schedules()])
        self.assertTrue(self.c.pause_schedule(name).paused)
        self.assertFalse(self.c.resume_schedule(name).paused)
        self.assertEqual(self.c.update_schedule(name, "0 4 * * *", job).cron, "0 4 * * *")
        run = self.c.trigger_schedule(name)
        self.assertEqual((run.schedule, run.queue), (name, self.queue))
        self.assertEqual(self.c.get_schedule(name).last_job_id, run.id)
        self.c.delete_schedule(name)
        with self.assertRaises(WorkronError) as e:
            self.c.get_schedule(name)
        self.assertEqual(e.exception.status, 404)

    def test_queues(self) -> None:
        self.c.submit(command="x", queue=self.queue)
        q = {x.name: x for x in self.c.queues()}[self.queue]
        self.assertEqual(q.counts.get("pending"), 1)
        admin = client(ADMIN)
        admin.pause_queue(self.queue)
        self.assertTrue({x.name: x for x in self.c.queues()}[self.queue].paused)
        admin.resume_queue(self.queue)
        self.assertFalse({x.name: x for x in self.c.queues()}[self.queue].paused)
        with self.assertRaises(WorkronError) as e:
            self.c.pause_queue(self.queue)
        self.assertEqual((e.exception.status, e.exception.code), (403, "forbidden"))

    def test_errors(self) -> None:
        with self.assertRaises(WorkronError) as e:
            self.c.get("no-such-job")
        self.assertEqual((e.exception.status, e.exception.code), (404, "not_found"))
        with self.assertRaises(WorkronError) as e:
            self.c.submit(command="x", max_attempts=0)
        self.assertEqual((e.exception.status, e.exception.code), (400, "invalid"))
        self.assertIn("max_attempts", e.exception.message)
        with self.assertRaises(WorkronError) as e:
            client(None).list()
        self.assertEqual(e.exception.status, 401)
        with self.assertRaises(WorkronError) as e:
            self.c.claim("w", types=["x"])
        self.assertEqual(e.exception.status, 403, "a client token may not claim")

    def test_token_file_and_environment(self) -> None:
        with tempfile.NamedTemporaryFile("w", suffix=".token") as f:
            f.write(self.c._token + "\n")
            f.flush()
            self.assertIsInstance(Client(URL, token_file=f.name, tls_ca=CA).list(limit=1), JobList)
        old = {k: os.environ.get(k) for k in ("WORKRON_TOKEN", "WORKRON_TLS_CA")}
        os.environ["WORKRON_TOKEN"], os.environ["WORKRON_TLS_CA"] = self.c._token, CA or ""
        try:
            self.assertIsInstance(Client(URL).list(limit=1), JobList)
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def test_next_node_when_one_refuses(self) -> None:
        c = Client(["http://127.0.0.1:1", URL], token=self.c._token, tls_ca=CA)
        self.assertEqual(c.list(limit=1).jobs.__class__, list)
        with self.assertRaises(WorkronError) as e:
            Client("http://127.0.0.1:1").list()
        self.assertEqual(e.exception.code, "unreachable")


if __name__ == "__main__":
    unittest.main()
