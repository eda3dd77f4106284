"""The step socket of shell jobs on the Python worker (stepsocket.py): the
Go worker's protocol, against the fake node; and `workron step` in a shell
job of the Python worker, against the real binary (go test)."""

from __future__ import annotations

import http.client
import json
import logging
import os
import socket
import subprocess
import tempfile
import threading
import unittest
from typing import Optional, Tuple

from tests.fakepark import FakePark
from tests.helpers import RunningWorker, client, eventually, needs_node, new_worker, unique
from workron import Client, Worker
from workron.client import Job
from workron.durable import Journal
from workron.stepsocket import MAX_BODY, MAX_PENDING, STEP_SOCKET_ENV, StepSocket, go_json

BIN = os.environ.get("WORKRON_TEST_BIN", "")


def bin_parks() -> bool:
    """Whether the workron binary has the parking verbs (workron sleep...)."""
    if not BIN:
        return False
    out = subprocess.run([BIN, "sleep"], capture_output=True, text=True, env={}, timeout=30)
    return "wait-event" in out.stderr


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("step")
        self._path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self._path)


def call(path: str, method: str, name: str, body: Optional[bytes] = None) -> Tuple[int, bytes]:
    conn = _UnixConnection(path)
    try:
        conn.request(method, "/steps/" + name, body=body,
                     headers={"Content-Type": "application/json"} if body is not None else {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


class StepSocketTest(unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakePark()
        self.addCleanup(self.fake.close)
        self.job_id = self.fake.submit(type="sh")

    def attempt(self) -> StepSocket:
        """A new attempt of the job, and its step socket."""
        with self.fake.lock:
            self.fake.jobs[self.job_id].update(status="pending", run_at=0)
        claimed = self.fake.claim({"types": ["sh"], "max": 1})["jobs"][0]
        self.journal = Journal(Client(self.fake.url), Job.from_dict(claimed), threading.Event())
        self.parks = 0

        def parked() -> None:
            self.parks += 1
        self.journal.on_park = parked
        s = StepSocket(self.journal)
        self.addCleanup(s.close)
        return s

    def test_park_sleep_wait_and_invoke(self) -> None:
        s = self.attempt()
        self.assertEqual(call(s.path, "POST", "nap/sleep", b'{"duration_ms":3600000}'),
                         (200, b'{"key":"nap","parked":true}\n'))
        self.assertEqual(self.parks, 1, "the worker is told, to stop the command")
        self.assertEqual(self.fake.job(self.job_id)["parked"]["kind"], "sleep")
        status, raw = call(s.path, "POST", "again/sleep", b'{"duration_ms":1}')
        self.assertEqual(json.loads(raw), {"key": "nap", "parked": True}, "the attempt has ended: parked still")

        s = self.attempt()
        status, raw = call(s.path, "POST", "nap/sleep", b'{"duration_ms":3600000}')
        self.assertEqual((status, json.loads(raw)["step"]["status"]), (200, "ok"), "replayed: the time has come")
        self.fake.send_event({"name": "paid", "key": "o1", "payload": {"cents": 1}})
        status, raw = call(s.path, "POST", "pay/wait", b'{"event":"paid","key":"o1","timeout_ms":5000}')
        self.assertEqual(status, 200, raw)
        self.assertEqual((json.loads(raw)["key"], json.loads(raw)["step"]["result"]), ("pay", {"cents": 1}))
        self.assertEqual(call(s.path, "POST", "both/wait", b'{"event":"e","signal":"s"}')[0], 400)
        self.assertEqual(call(s.path, "POST", "child/invoke", b'{"job":"no"}')[0], 400)
        self.assertEqual(call(s.path, "POST", "child/invoke", b'{"job":{"type":"c"}}'),
                         (200, b'{"key":"child","parked":true}\n'))
        self.assertEqual(self.parks, 1)
        self.assertEqual(self.fake.job(self.job_id)["parked"]["child_id"], f"{self.job_id}.child")

    @unittest.skipUnless(hasattr(socket, "SO_PEERCRED"), "peer credentials are read on Linux only")
    def test_another_users_process_is_refused_and_logged(self) -> None:
        self.attempt()
        log = logging.getLogger("test.stepsocket.peers")
        with self.assertLogs(log, "WARNING") as logged:
            s = StepSocket(self.journal, allowed=[os.geteuid() + 1], log=log)
            self.addCleanup(s.close)
            status, raw = call(s.path, "POST", "charge")
        self.assertEqual(status, 403, raw)
        self.assertIn(f"peer uid {os.geteuid()}".encode(), raw)
        self.assertIn("refused a connection", "\n".join(logged.output))
        with self.fake.lock:
            self.assertNotIn("charge", self.fake.jobs[self.job_id]["steps"], "nothing asked of the cluster")
        s = StepSocket(self.journal, allowed=[os.geteuid()])
        self.addCleanup(s.close)
        self.assertEqual(call(s.path, "POST", "charge"), (200, b'{"key":"charge"}\n'))

    def test_look_up_record_and_replay(self) -> None:
        s = self.attempt()
        self.assertEqual(os.stat(s.dir).st_mode & 0o777, 0o700)
        self.assertEqual(os.stat(s.path).st_mode & 0o777, 0o600)
        self.assertEqual(call(s.path, "POST", "charge"), (200, b'{"key":"charge"}\n'))
        self.assertEqual(call(s.path, "POST", "charge")[1], b'{"key":"charge#2"}\n')
        status, raw = call(s.path, "PUT", "charge", json.dumps({"lease": 999, "result": "a<é"}).encode())
        self.assertEqual(status, 200, raw)
        self.assertIn(b'"result":"a\\u003c\xc3\xa9"', raw, "the result as Go encodes it: workron step compares")
        self.assertEqual(json.loads(raw)["key"], "charge")
        self.assertEqual(call(s.path, "DELETE", "charge#2"), (200, b"{}\n"))
        status, raw = call(s.path, "PUT", "charge#2", b'{"result":"x"}')
        self.assertEqual(status, 409, "released: not pending any more")
        self.assertIn(b"not looked up as unrecorded", raw)
        s.close()
        self.assertFalse(os.path.exists(s.dir), "the socket's directory goes with it")

        again = self.attempt()
        status, raw = call(again.path, "POST", "charge")
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(raw)["step"]["result"], "a<é")
        self.assertEqual(json.loads(raw)["step"]["job_attempt"], 1)

    def test_bounds(self) -> None:
        s = self.attempt()
        status, raw = call(s.path, "PUT", "x", b" " * (MAX_BODY + 1))
        self.assertEqual(status, 413, raw)
        self.assertEqual(call(s.path, "PUT", "x", b"[1]")[0], 400)
        for i in range(MAX_PENDING):
            self.assertEqual(call(s.path, "POST", f"s{i}")[0], 200)
        status, raw = call(s.path, "POST", "one-more")
        self.assertEqual(status, 429)
        self.assertIn(f"more than {MAX_PENDING} steps running at once".encode(), raw)
        self.assertEqual(call(s.path, "GET", "x/y")[0], 404)

    def test_a_refusal_of_the_cluster_is_a_502(self) -> None:
        s = self.attempt()
        call(s.path, "POST", "late")
        with self.fake.lock:
            self.fake.jobs[self.job_id]["lease"] += 1  # the attempt lost its lease
        status, raw = call(s.path, "PUT", "late", b'{"result":1}')
        self.assertEqual(status, 502)
        self.assertIn(b"stale_lease", raw)

    def test_go_json(self) -> None:
        self.assertEqual(go_json({"s": "<a&b>\u2028é\n"}), '{"s":"\\u003ca\\u0026b\\u003e\\u2028é\\n"}'.encode())


@needs_node
@unittest.skipUnless(BIN, "WORKRON_TEST_BIN not set: run `go test ./clients/python`")
class ShellStepTest(unittest.TestCase):
    """`workron step` in a shell job of the Python worker: recorded once,
    replayed in the next attempt."""

    def test_workron_step_under_the_python_worker(self) -> None:
        c, queue = client(), unique("pyss")
        w = new_worker(queue, shell=True)
        script = ('set -e; c=$("$WORKRON" step charge -- sh -c \'echo run >> "$MARKS"; printf "ch-<1> é"\'); '
                  'echo "socket=${%s:+set} got=$c"; [ "$WORKRON_ATTEMPT" -ge 2 ] || exit 3; '
                  'printf \'"%%s"\' "$c" > "$WORKRON_RESULT_FILE"' % STEP_SOCKET_ENV)
        with tempfile.TemporaryDirectory() as tmp:
            marks = os.path.join(tmp, "marks")
            rw = RunningWorker(w)
            try:
                j = c.submit(command=script, env={"WORKRON": BIN, "MARKS": marks}, queue=queue, max_attempts=2,
                             backoff={"base": "10ms"})
                done = c.wait(j.id, timeout=30, poll=0.05)
            finally:
                rw.stop()
            with open(marks) as f:
                runs = f.read()
        self.assertEqual((done.status, done.result), ("done", "ch-<1> é"), done.last_error)
        self.assertEqual(runs, "run\n", "the step's command ran once, in the first attempt")
        self.assertIn("socket=set got=ch-<1> é", done.output)
        self.assertEqual(done.attempts, 2)
        self.assertEqual(c.step(done.id, "charge")["result"], "ch-<1> é")



class _ShellParking:
    """A shell job of the Python worker that sleeps and waits for an event
    with the parking verbs: its script is stopped when the job parks, runs
    again from the top when it wakes, and is reported once."""

    def client(self) -> Client:
        raise NotImplementedError

    def worker(self, queue: str) -> Worker:
        raise NotImplementedError

    def test_a_shell_job_sleeps_and_waits(self) -> None:
        c, queue, order = self.client(), unique("pysp"), unique("order")
        script = ('set -e; "$WORKRON" step charge -- sh -c \'echo run >> "$MARKS"; printf ch\'; '
                  '"$WORKRON" sleep nap 200ms; echo after >> "$MARKS"; '
                  'p=$("$WORKRON" wait-event paid payment.settled "$ORDER" --timeout 1h); '
                  'printf "%s" "$p" > "$WORKRON_RESULT_FILE"')
        with tempfile.TemporaryDirectory() as tmp:
            marks = os.path.join(tmp, "marks")
            rw = RunningWorker(self.worker(queue))
            try:
                j = c.submit(command=script, env={"WORKRON": BIN, "MARKS": marks, "ORDER": order}, queue=queue,
                             max_attempts=1)
                eventually(lambda: (c.get(j.id).raw.get("parked") or {}).get("event") == "payment.settled",
                           what="the job parked on the event")
                c.send_event("payment.settled", order, {"cents": 7})
                done = c.wait(j.id, timeout=30, poll=0.05)
            finally:
                rw.stop()
            with open(marks) as f:
                runs = f.read()
        self.assertEqual((done.status, done.result), ("done", {"cents": 7}), done.last_error)  # type: ignore
        self.assertEqual(runs, "run\nafter\nafter\n",  # type: ignore
                         "charged once; past the sleep twice: before the wait and after it")


@unittest.skipUnless(bin_parks(), "WORKRON_TEST_BIN not set or without workron sleep")
class ShellParkingOnFakeTest(_ShellParking, unittest.TestCase):
    def setUp(self) -> None:
        self.fake = FakePark()
        self.addCleanup(self.fake.close)

    def client(self) -> Client:
        return Client(self.fake.url)

    def worker(self, queue: str) -> Worker:
        return Worker(self.fake.url, queues=[queue], id=unique("pyw"), poll_wait=0.3, grace=2.0, shell=True,
                      kill_grace=1.0)

    def test_a_shell_job_sleeps_and_waits(self) -> None:
        super().test_a_shell_job_sleeps_and_waits()
        with self.fake.lock:
            self.assertEqual([r["status"] for r in self.fake.reports], ["done"], "parked attempts: no report")


@needs_node
@unittest.skipUnless(bin_parks(), "WORKRON_TEST_BIN not set or without workron sleep")
class ShellParkingOnNodeTest(_ShellParking, unittest.TestCase):
    def client(self) -> Client:
        return client()

    def worker(self, queue: str) -> Worker:
        return new_worker(queue, shell=True, kill_grace=1.0)


if __name__ == "__main__":
    unittest.main()
