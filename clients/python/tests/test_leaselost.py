"""Lost leases (docs/workers.md, "Lost leases"): a worker whose heartbeats
fail for the lease TTL, go unanswered, are refused as stale, or are
answered naming the lease lost (reaped, or leased again) stops the
attempt (a handler sees LeaseLost, a shell job's process group is killed)
and reports nothing for it; failures shorter than the TTL stop nothing.
Against the fake node of fakepark.py, whose heartbeats the tests cut, and,
through go test, a worker cut off from the real binary by a proxy."""

from __future__ import annotations

import logging
import os
import socket
import tempfile
import threading
import time
import unittest
import urllib.parse
from typing import Any, Callable, Dict, List, Optional

from tests.fakepark import FakePark
from tests.helpers import CA, LEASE_TTL, URL, WORKER, RunningWorker, client, eventually, needs_node, new_worker, unique
from workron import JobContext, LeaseLost, Worker, WorkronError
from workron.client import Job
from workron.durable import Journal
from workron.lease import LeaseClock
from workron.worker import _Task

# The fake's lease TTL: heartbeats go every third of it. A test where the
# worker must keep its lease through a failed heartbeat takes longer ones:
# the client tries a 503 again a second later.
TTL_MS = 1500
LONG_TTL_MS = 3000


def gone(pid: int) -> bool:
    """Whether pid has exited (a zombie counts: it runs nothing), from /proc
    as internal/testkit/proctest does, or by signal 0 without it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
    state = stat[stat.rfind(")") + 2:][:1]
    return state in ("Z", "X", "")


class _Holder:
    """A handler that runs until its job is told to stop, and records what
    it saw then (or until release is set, and returns)."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.ended = threading.Event()
        self.seen: Dict[str, Any] = {}

    def __call__(self, job: JobContext) -> str:
        self.started.set()
        while not job.stopping.is_set() and not self.release.is_set():
            job.stopping.wait(0.05)
        if not job.stopping.is_set():
            return "released"
        self.seen["lease_lost"] = job.lease_lost.is_set()
        self.seen["stop_reason"] = job.stop_reason
        for name, call in (("step", lambda: job.step("after", lambda: "ran")),
                           ("progress", lambda: job.progress(50, "after")),
                           ("sleep", lambda: job.sleep("nap", 1)),
                           ("check_lease", job.check_lease)):
            try:
                call()
                self.seen[name] = "returned"
            except LeaseLost:
                self.seen[name] = "LeaseLost"
            except BaseException as e:  # noqa: B036 - what it raised is the finding
                self.seen[name] = type(e).__name__
        self.ended.set()
        return "done anyway"  # not reported when the lease was lost


class LeaseLostTest(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakePark()
        self.addCleanup(self.fake.close)
        self.queue = unique("pyl")

    def serve(self, ttl_ms: int = TTL_MS, **kw: Any) -> RunningWorker:
        self.fake.lease_ttl_ms = ttl_ms
        log = logging.getLogger(f"workron.test.{self.queue}")
        log.addHandler(logging.NullHandler())
        log.propagate = False  # the warnings the tests provoke
        w = Worker(self.fake.url, queues=[self.queue], id=unique("pyw"), poll_wait=0.3, grace=2.0, kill_grace=0.5,
                   logger=log, **kw)
        self.holder = _Holder()
        w.handle("py.hold", self.holder)
        rw = RunningWorker(w)
        self.addCleanup(rw.stop)
        self.addCleanup(self.fake.release_beats)  # first (cleanups run last first): a held heartbeat lets it stop
        return rw

    def reports_of(self, job_id: str) -> List[Dict[str, Any]]:
        with self.fake.lock:
            return [r for r in self.fake.reports if r.get("job_id") == job_id]

    def assert_told(self, rw: RunningWorker, job_id: str) -> int:
        """Checks that the handler was told and nothing was reported, and
        returns the number of heartbeats sent until it was told."""
        self.assertTrue(self.holder.ended.wait(20), "the handler was not told to stop")
        beats = self.fake.beat_count()
        seen = self.holder.seen
        self.assertTrue(seen["lease_lost"], f"job.lease_lost not set: {seen}")
        self.assertIn("lease lost", seen["stop_reason"])
        self.assertEqual({k: seen[k] for k in ("step", "progress", "sleep", "check_lease")},
                         dict.fromkeys(("step", "progress", "sleep", "check_lease"), "LeaseLost"))
        self.fake.release_beats()
        rw.stop()
        self.assertEqual(self.reports_of(job_id), [], "a report of an attempt whose lease was lost")
        self.assertEqual(self.fake.job(job_id)["steps"], {}, "a step recorded after the lease was lost")
        return beats

    def test_a_handler_is_stopped_when_heartbeats_fail_past_the_ttl(self) -> None:
        rw = self.serve()
        job_id = self.fake.submit(type="py.hold", queue=self.queue)
        self.assertTrue(self.holder.started.wait(10))
        self.fake.fail_beats(1 << 30, 503, "no_leader")
        self.assert_told(rw, job_id)

    def test_a_handler_is_stopped_when_heartbeats_go_unanswered(self) -> None:
        rw = self.serve()
        job_id = self.fake.submit(type="py.hold", queue=self.queue)
        self.assertTrue(self.holder.started.wait(10))
        self.fake.hold_beats()  # cut off: the heartbeat hangs, the lease's end comes all the same
        self.assert_told(rw, job_id)

    def test_a_handler_is_stopped_at_the_first_stale_lease_answer(self) -> None:
        rw = self.serve()
        job_id = self.fake.submit(type="py.hold", queue=self.queue)
        self.assertTrue(self.holder.started.wait(10))
        before = self.fake.beat_count()
        self.fake.fail_beats(1 << 30, 409, "stale_lease")
        beats = self.assert_told(rw, job_id)
        # Heartbeats go every third of the TTL: a stop that waited for the
        # TTL would come after three refused ones.
        self.assertEqual(beats - before, 1, "stopped at the first refused heartbeat")

    def test_a_handler_is_stopped_at_the_first_heartbeat_that_names_its_lease_lost(self) -> None:
        self.check_named_lost(self.fake.reap, "not_running")

    def test_a_handler_is_stopped_when_a_heartbeat_names_its_lease_leased_again(self) -> None:
        self.check_named_lost(self.fake.lease_again, "stale_lease")

    def check_named_lost(self, lose: Callable[[str], int], reason: str) -> None:
        """The handler is told at the first heartbeat after lose(job), whose
        reply (200) names the lease lost with reason."""
        rw = self.serve()
        job_id = self.fake.submit(type="py.hold", queue=self.queue)
        self.assertTrue(self.holder.started.wait(10))
        before = lose(job_id)
        beats = self.assert_told(rw, job_id)
        # One that waited for the TTL would come after three heartbeats.
        self.assertEqual(beats - before, 1, "stopped at the first heartbeat after")
        self.assertIn(reason, self.holder.seen["stop_reason"])

    def test_a_shell_job_is_killed(self) -> None:
        rw = self.serve(shell=True)
        tmp = tempfile.TemporaryDirectory(prefix="workron-leaselost-")
        self.addCleanup(tmp.cleanup)
        pid_file = os.path.join(tmp.name, "pid")
        job_id = self.fake.submit(command=f"sleep 30 & echo $! > {pid_file}; sleep 30", queue=self.queue)
        pid: Optional[int] = None

        def started() -> bool:
            nonlocal pid
            try:
                with open(pid_file) as f:
                    pid = int(f.read().strip())
            except (OSError, ValueError):
                return False
            return True

        eventually(started, timeout=10, what="the job's command started")
        assert pid is not None
        self.fake.fail_beats(1 << 30, 503, "no_leader")
        eventually(lambda: gone(pid), timeout=20, what="the job's process group killed")
        eventually(lambda: not rw.worker._running, timeout=10, what="the slot freed once the command ended")
        rw.stop()
        self.assertEqual(self.reports_of(job_id), [], "a report of an attempt whose lease was lost")

    def test_heartbeats_failing_for_less_than_the_ttl_stop_nothing(self) -> None:
        rw = self.serve(LONG_TTL_MS)
        job_id = self.fake.submit(type="py.hold", queue=self.queue)
        self.assertTrue(self.holder.started.wait(10))
        before = self.fake.beat_count()
        self.fake.fail_beats(1, 503, "no_leader")
        # Six heartbeats after the failed one span two TTLs: well past the
        # end of the lease the claim gave.
        eventually(lambda: self.fake.beat_count() - before >= 7, timeout=20, what="heartbeats after the failed one")
        self.assertFalse(self.holder.ended.is_set(), f"the handler was stopped: {self.holder.seen}")
        self.holder.release.set()
        self.fake.wait_status(job_id, ("done",))
        self.assertEqual([r["status"] for r in self.reports_of(job_id)], ["done"])
        rw.stop()


class _CutProxy:
    """A TCP proxy on 127.0.0.1 to the node at url that can be cut: then it
    closes every connection and each new one at once."""

    def __init__(self, url: str) -> None:
        u = urllib.parse.urlsplit(url)
        self.target = (u.hostname or "127.0.0.1", u.port or 443)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"{u.scheme}://127.0.0.1:{self.listener.getsockname()[1]}"
        self.lock = threading.Lock()
        self.cut = False
        self.conns: List[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            with self.lock:
                if self.cut:
                    conn.close()
                    continue
                up = socket.create_connection(self.target)
                self.conns += [conn, up]
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def set_cut(self, cut: bool) -> None:
        with self.lock:
            self.cut = cut
            conns, self.conns = (self.conns, []) if cut else ([], self.conns)
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def close(self) -> None:
        self.set_cut(True)
        self.listener.close()


@needs_node
class LeaseLostOnNodeTest(unittest.TestCase):
    """A worker cut off from the real binary: its handler is stopped, the
    node expires the lease and another worker runs the job, and the first
    sends no report for its attempt, even once it can reach the node
    again."""

    def test_a_cut_off_worker_stops_and_another_runs_the_job(self) -> None:
        c, queue = client(), unique("pyl")
        proxy = _CutProxy(URL)
        self.addCleanup(proxy.close)
        a = Worker(proxy.url, queues=[queue], tls_ca=CA, token=WORKER, id=unique("pyw-cut"), poll_wait=2.0,
                   grace=5.0, logger=logging.getLogger("workron.test.cut"))
        a.log.addHandler(logging.NullHandler())
        a.log.propagate = False
        holder = _Holder()
        a.handle("py.cut", holder)
        reported: List[Any] = []  # the job ids of every report a sends, on claims or apart
        claim, reports = a.client.claim, a.client.reports

        def claim_reporting(*args: Any, **kw: Any) -> Any:
            reported.extend(r["job_id"] for r in kw.get("reports") or [])
            return claim(*args, **kw)

        def send_reports(reps: List[Dict[str, Any]]) -> Any:
            reported.extend(r["job_id"] for r in reps)
            return reports(reps)

        a.client.claim, a.client.reports = claim_reporting, send_reports  # type: ignore[method-assign]
        ra = RunningWorker(a)
        self.addCleanup(ra.stop)
        job = c.submit(type="py.cut", queue=queue, max_attempts=3)
        self.assertTrue(holder.started.wait(20), "worker a never ran the job")
        proxy.set_cut(True)

        b = new_worker(queue)
        b.handle("py.cut", lambda job: "b")
        rb = RunningWorker(b)
        self.addCleanup(rb.stop)
        self.assertTrue(holder.ended.wait(10 * LEASE_TTL), "worker a's handler was not told its lease was lost")
        self.assertTrue(holder.seen["lease_lost"])
        self.assertEqual(holder.seen["step"], "LeaseLost")
        done = c.wait(job.id, timeout=30, poll=0.05)
        self.assertEqual((done.status, done.result, done.worker_id), ("done", "b", b.id))
        first = done.attempt_history[0]
        self.assertEqual((first.worker_id, first.expired), (a.id, True), "a's lease expired on the node")

        proxy.set_cut(False)
        ra.stop()  # sends every report it holds, and a last heartbeat
        self.assertNotIn(job.id, reported, "worker a reported the attempt whose lease it lost")


class _Client:
    """What a Journal asks of a Client: a record that the worker's loss of
    the lease overtakes (the cluster refuses it as stale)."""

    def __init__(self, lost: threading.Event) -> None:
        self.lost = lost
        self.records = 0

    def record_step(self, *args: Any, **kw: Any) -> Dict[str, Any]:
        self.records += 1
        self.lost.set()
        raise WorkronError(409, "stale_lease", "lease 1 is not the running one")


class JournalLeaseTest(unittest.TestCase):
    def journal(self) -> "tuple":
        lost = threading.Event()
        c = _Client(lost)
        job = Job.from_dict({"id": "j", "lease": 1, "attempts": 1})
        return Journal(c, job, threading.Event(), lost), c, lost  # type: ignore[arg-type]

    def test_a_record_refused_after_the_loss_raises_lease_lost(self) -> None:
        j, c, _ = self.journal()
        with self.assertRaises(LeaseLost) as e:
            j.run("s", lambda: 1, None, None)
        self.assertEqual(c.records, 1)
        self.assertIsInstance(e.exception.__cause__, WorkronError)

    def test_a_step_whose_lease_was_lost_while_it_ran_is_not_recorded(self) -> None:
        j, c, lost = self.journal()
        with self.assertRaises(LeaseLost):
            j.run("s", lost.set, None, None)
        self.assertEqual(c.records, 0)
        with self.assertRaises(LeaseLost):
            j.next_key("t")


class HeldTest(unittest.TestCase):
    def test_heartbeats_leave_out_attempts_whose_lease_is_lost(self) -> None:
        w = Worker("http://127.0.0.1:1", queues=["q"])
        for job_id in ("kept", "lost"):
            ctx = JobContext(Job.from_dict({"id": job_id, "lease": 3, "attempts": 1, "command": "sleep 9"}))
            w._running[(job_id, 3)] = _Task(ctx)
        w._running[("lost", 3)].ctx._lose_lease("lease lost: test")  # a command still stopping
        self.assertEqual(w._held(), [("kept", 3)])


class LeaseClockTest(unittest.TestCase):
    def test_expires_once_what_was_not_renewed_or_ended(self) -> None:
        expired: List[Any] = []
        clock = LeaseClock(expired.append)
        t = threading.Thread(target=clock.run, daemon=True)
        t.start()
        self.addCleanup(t.join, 5)
        self.addCleanup(clock.close)
        now = time.monotonic()
        clock.begin(("a", 1), now + 0.2)
        clock.begin(("b", 1), now + 0.2)
        clock.begin(("c", 1), now + 0.2)
        clock.renew([("b", 1)], now + 3600)
        clock.renew([("c", 1)], now)  # an earlier end moves nothing
        clock.end(("c", 1))
        eventually(lambda: expired == [("a", 1)], timeout=10, what="a expired")
        clock.renew([("a", 1)], now + 3600)  # expired: not watched again
        self.assertEqual(len(clock), 1, "b only")
        clock.end(("b", 1))
        self.assertEqual(len(clock), 0)


if __name__ == "__main__":
    unittest.main()
