"""Gangs on Python workers against a real node: a gang of 2 tasks on two
workers whose task 0 fails, so that the cluster drains the gang and preempts
task 1, which leaves a checkpoint that its next attempt finds; once with
handlers (job.gang, job.preempted, job.save_checkpoint, job.checkpoint) and
once with shell commands (the Go worker's env, WORKRON_CHECKPOINT, SIGTERM to
the process group and SIGKILL after the kill grace). Also shell commands on
their own, and the offline parts (gang env, checkpoint file, output)."""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from typing import Dict, List

from tests.helpers import CA, URL, WORKER, RunningWorker, client, eventually, needs_node, new_worker, unique
from workron import Backoff, JobContext, JobSpec, Worker, WorkronError
from workron.gang import MAX_CHECKPOINT_BYTES, CheckpointFile, Gang
from workron.shell import Command, Outcome, _hold_off, _Output, check_pass_env

LOG = logging.getLogger("test")
HERE = os.path.dirname(os.path.abspath(__file__))


@needs_node
class GangTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()
        self.queue = unique("pyg")
        self.running: List[RunningWorker] = []

    def tearDown(self) -> None:
        for rw in self.running:
            rw.stop()

    def serve(self, n: int, setup, **kw) -> List:
        """n workers with exec_addr 10.0.0.I:9000, each set up by setup(w)."""
        ws = []
        for i in range(n):
            w = new_worker(self.queue, exec_addr=f"10.0.0.{i + 1}:9000", **kw)
            setup(w)
            ws.append(w)
        self.running += [RunningWorker(w) for w in ws]
        return ws

    def preempted_attempt(self, job_id: str) -> None:
        """Asserts that the job's first attempt ended by its worker's
        acknowledgement of the drain, not by a forced drain."""
        h = self.c.get(job_id).attempt_history
        self.assertTrue(h, "the preempted attempt is in the history")
        self.assertIn("preempted: gang", h[0].error, "acknowledged by the worker")
        self.assertNotIn("force-drained", h[0].error)

    def test_handler_gang_preempted_sibling_checkpoints(self) -> None:
        lock = threading.Lock()
        seen: List[Dict] = []
        sibling_running, preempt_seen, stopping_seen = threading.Event(), threading.Event(), threading.Event()

        def setup(w) -> None:
            @w.handle("py.train")
            def train(job: JobContext):
                g = job.gang
                with lock:
                    seen.append({"worker": w.exec_addr, "gang": g, "attempt": job.attempt, "checkpoint": job.checkpoint,
                                 "file": job.environ().get("WORKRON_CHECKPOINT"), "path": job.checkpoint_path})
                    first = sum(1 for s in seen if s["gang"].index == g.index) == 1
                if g.index == 0:
                    if first:
                        sibling_running.wait(20)
                        raise RuntimeError("task 0 fails its first attempt")
                    return {"task": 0}
                if job.checkpoint is not None:
                    return {"restored": job.checkpoint.decode()}
                sibling_running.set()
                if job.preempted.wait(30):
                    preempt_seen.set()
                    if job.stopping.wait(5) and job.stop_reason == "preempted":
                        stopping_seen.set()
                    job.save_checkpoint(b"step-7")
                return None  # ignored: the attempt was preempted

        ws = self.serve(2, setup)

        def exec_addr() -> str:
            return next((w.get("exec_addr", "") for w in self.c.workers() if w["id"] == ws[0].id), "")

        eventually(lambda: exec_addr() == "10.0.0.1:9000", what="exec_addr registered")
        gang_id, tasks = self.c.submit_gang(JobSpec(type="py.train", queue=self.queue, gang_size=2, max_attempts=3,
                                                    backoff=Backoff(base="10ms", max="10ms")))
        done = [self.c.wait(t, timeout=60, poll=0.1) for t in tasks]
        self.assertEqual([j.status for j in done], ["done", "done"], [j.last_error for j in done])
        self.assertTrue(preempt_seen.is_set(), "job.preempted was set on task 1")
        self.assertTrue(stopping_seen.is_set(), "job.stopping is set with job.preempted")
        self.assertEqual(done[1].result, {"restored": "step-7"}, "the next attempt got job.checkpoint")
        self.assertEqual(done[0].attempts, 2, "the failed task's attempt counts")
        self.assertEqual(done[1].attempts, 1, "the preempted sibling's attempt is given back")
        self.preempted_attempt(tasks[1])
        for s in seen:
            g = s["gang"]
            self.assertEqual((g.id, g.size), (gang_id, 2))
            self.assertEqual(len(g.peers), 1)
            self.assertNotEqual(g.peers[0], s["worker"], "GANG_PEERS names the other task's worker")
            self.assertTrue(g.peers[0].startswith("10.0.0."), g.peers)
            self.assertEqual(s["file"], s["path"], "WORKRON_CHECKPOINT is in environ()")
        last1 = [s for s in seen if s["gang"].index == 1][-1]
        self.assertEqual(last1["checkpoint"], b"step-7")

    def test_handler_that_ignores_preemption_is_left_after_kill_grace(self) -> None:
        sibling_running, release = threading.Event(), threading.Event()
        self.addCleanup(release.set)

        def setup(w) -> None:
            @w.handle("py.stubborn")
            def stubborn(job: JobContext):
                if job.gang.index == 0:
                    if job.attempt == 1:
                        sibling_running.wait(20)
                        raise RuntimeError("task 0 fails its first attempt")
                    return None
                if job.checkpoint is not None:
                    return {"restored": job.checkpoint.decode()}
                job.save_checkpoint(b"saved-early")
                sibling_running.set()
                release.wait(60)  # never looks at job.preempted

        self.serve(2, setup, kill_grace=0.5)
        _, tasks = self.c.submit_gang(JobSpec(type="py.stubborn", queue=self.queue, gang_size=2, max_attempts=3,
                                              backoff=Backoff(base="10ms", max="10ms")))
        done = [self.c.wait(t, timeout=60, poll=0.1) for t in tasks]
        self.assertEqual([j.status for j in done], ["done", "done"], [j.last_error for j in done])
        self.assertEqual(done[1].result, {"restored": "saved-early"}, "uploaded after the kill grace")
        self.preempted_attempt(tasks[1])

    def test_shell_gang_preempted_sibling_checkpoints(self) -> None:
        with tempfile.TemporaryDirectory() as marks:
            # Task 0 fails its first attempt once task 1 runs. Task 1 saves
            # a checkpoint on SIGTERM and keeps running: the kill grace ends
            # it. Its next attempt prints what it was given.
            cmd = ('if [ "$GANG_INDEX" = 0 ]; then\n'
                   '  [ "$WORKRON_ATTEMPT" -ge 2 ] && exit 0\n'
                   '  while [ ! -e "$MARKS/running" ]; do sleep 0.05; done; exit 3\n'
                   'fi\n'
                   'if [ -n "$CHECKPOINT_DATA" ]; then\n'
                   '  echo "data=$CHECKPOINT_DATA file=$(cat "$WORKRON_CHECKPOINT") peers=$GANG_PEERS"; exit 0\n'
                   'fi\n'
                   'trap \'printf step-7 > "$WORKRON_CHECKPOINT"; touch "$MARKS/term"\' TERM\n'
                   'touch "$MARKS/running"\n'
                   'while :; do sleep 0.05; done\n')
            ws = self.serve(2, lambda w: None, shell=True, kill_grace=0.5)
            gang_id, tasks = self.c.submit_gang(JobSpec(command=cmd, env={"MARKS": marks}, queue=self.queue,
                                                        gang_size=2, max_attempts=3,
                                                        backoff=Backoff(base="10ms", max="10ms")))
            done = [self.c.wait(t, timeout=60, poll=0.1) for t in tasks]
            self.assertTrue(os.path.exists(os.path.join(marks, "term")), "SIGTERM reached the command")
        self.assertEqual([j.status for j in done], ["done", "done"], [j.last_error for j in done])
        want = base64.b64encode(b"step-7").decode()
        self.assertIn(f"data={want} file=step-7 peers=10.0.0.", done[1].output)
        self.assertEqual(done[0].attempts, 2)
        self.assertEqual(done[1].attempts, 1, "the preempted sibling's attempt is given back")
        self.preempted_attempt(tasks[1])
        self.assertEqual(self.c.get(tasks[0]).attempt_history[0].exit_code, 3)
        self.assertIn(self.c.get(tasks[1]).worker_id, [w.id for w in ws])


@needs_node
class ShellTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()
        self.queue = unique("pys")

    def test_command_env_output_exit_code_and_result(self) -> None:
        w = new_worker(self.queue, shell=True, pass_env=["WORKRON_TEST_PASSED"])
        token = os.environ.get("WORKRON_TOKEN")
        os.environ.update(WORKRON_TEST_SECRET="not for jobs", WORKRON_TEST_PASSED="passed", WORKRON_TOKEN="secret")
        rw = RunningWorker(w)
        try:
            ok = self.c.submit(command='echo "id=$WORKRON_JOB_ID a=$WORKRON_ATTEMPT x=$X p=$WORKRON_TEST_PASSED '
                                       's=${WORKRON_TEST_SECRET:-none} t=${WORKRON_TOKEN:-none}"; '
                                       'echo "::workron-progress 50 half"; echo \'{"n":1}\' > "$WORKRON_RESULT_FILE"',
                               env={"X": "y"}, queue=self.queue)
            bad = self.c.submit(command="echo oops; exit 4", queue=self.queue, max_attempts=1)
            ok, bad = self.c.wait(ok.id, timeout=20, poll=0.05), self.c.wait(bad.id, timeout=20, poll=0.05)
        finally:
            rw.stop()
            del os.environ["WORKRON_TEST_SECRET"], os.environ["WORKRON_TEST_PASSED"]
            if token is None:
                del os.environ["WORKRON_TOKEN"]
            else:
                os.environ["WORKRON_TOKEN"] = token
        self.assertEqual(ok.status, "done", ok.last_error)
        self.assertIn(f"id={ok.id} a=1 x=y p=passed s=none t=none", ok.output)
        self.assertEqual((ok.exit_code, ok.result), (0, {"n": 1}))
        self.assertEqual((ok.progress.percent, ok.progress.message), (50, "half"))
        self.assertEqual((bad.status, bad.exit_code, bad.output), ("failed", 4, "oops\n"))
        self.assertIn("exit status 4", bad.last_error)

    def test_timeout_stops_the_process_group(self) -> None:
        w = new_worker(self.queue, shell=True, kill_grace=0.3)
        rw = RunningWorker(w)
        try:
            j = self.c.submit(command="trap '' TERM; sleep 30 & wait; sleep 30", queue=self.queue, timeout="300ms",
                              max_attempts=1)
            j = self.c.wait(j.id, timeout=20, poll=0.05)
        finally:
            rw.stop()
        self.assertEqual(j.status, "failed")
        self.assertIn("timed out after 300ms", j.last_error)
        self.assertEqual(j.exit_code, 137, "SIGKILL after the kill grace: the command ignored SIGTERM")


    def test_stop_ends_commands_after_the_grace(self) -> None:
        w = new_worker(self.queue, shell=True, grace=0.3, kill_grace=5)
        rw = RunningWorker(w)
        with tempfile.TemporaryDirectory() as marks:
            try:
                j = self.c.submit(command='touch "$MARKS/started"; sleep 30', env={"MARKS": marks}, queue=self.queue,
                                  max_attempts=1)
                eventually(lambda: os.path.exists(os.path.join(marks, "started")), what="command started")
            finally:
                rw.stop()
        j = self.c.get(j.id)
        self.assertEqual(j.status, "failed")
        self.assertIn("grace", j.last_error)
        self.assertEqual(j.exit_code, 128 + 15, "SIGTERM ended it, before the kill grace")
        self.assertFalse(j.attempt_history[0].expired, "reported by the worker once the command ended")

    def test_commands_die_with_a_killed_worker(self) -> None:
        with tempfile.TemporaryDirectory() as marks:
            env = dict(os.environ, WORKRON_TEST_WORKER_TOKEN=WORKER or "", WORKRON_TEST_CA=CA or "")
            proc = subprocess.Popen([sys.executable, os.path.join(HERE, "worker_proc.py"), URL, unique("pyw-kill"),
                                     self.queue, marks, "5", "shell"], env=env)
            try:
                pidfile = os.path.join(marks, "pid")
                self.c.submit(command='echo $$ > "$MARKS/pid.tmp"; mv "$MARKS/pid.tmp" "$MARKS/pid"; sleep 60',
                              env={"MARKS": marks}, queue=self.queue)
                eventually(lambda: os.path.exists(pidfile), what="command started")
                with open(pidfile) as f:
                    pid = int(f.read())
                self.assertTrue(alive(pid))
            finally:
                proc.kill()
                proc.wait(10)
        eventually(lambda: not alive(pid), what="the command's process group killed by the job watcher")


def alive(pid: int) -> bool:
    """Whether process pid runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class GangOfflineTest(unittest.TestCase):
    def test_retry_stops_on_a_stale_epoch(self) -> None:
        w = Worker("http://127.0.0.1:1", id="w", logger=LOG)
        calls: List[int] = []

        def send(status: int):
            def f() -> None:
                calls.append(status)
                if status:
                    raise WorkronError(status, "x", "refused")
            return f

        for status, want in ((0, True), (409, False), (404, False), (400, False)):
            calls.clear()
            got = w._retry("ack", "job-1", send(status), time.monotonic() + 10)
            self.assertEqual((got, calls), (want, [status]), f"status {status}: one call")
        calls.clear()
        self.assertFalse(w._retry("ack", "job-1", send(503), time.monotonic() + 0.25))
        self.assertGreater(len(calls), 1, "a 503 is retried until the deadline")

    def test_gang_from_env(self) -> None:
        self.assertIsNone(Gang.from_env({}))
        g = Gang.from_env({"GANG_ID": "gang-1", "GANG_SIZE": "3", "GANG_INDEX": "2", "GANG_PEERS": "a:1,b:2"})
        self.assertEqual(g, Gang(id="gang-1", size=3, index=2, peers=["a:1", "b:2"]))

    def test_checkpoint_file(self) -> None:
        ck = CheckpointFile({"CHECKPOINT_DATA": base64.b64encode(b"old").decode()}, LOG)
        try:
            self.assertEqual(ck.restored, b"old")
            self.assertEqual(ck.read(LOG), b"old", "the file starts with the checkpoint")
            env = ck.env({"A": "b", "CHECKPOINT_DATA": "x" * ((64 << 10) + 1)})
            self.assertEqual((env["WORKRON_CHECKPOINT"], env["A"]), (ck.path, "b"))
            self.assertNotIn("CHECKPOINT_DATA", env, "too long for an environment variable")
            ck.write(b"")
            self.assertIsNone(ck.read(LOG), "an empty file uploads nothing")
            with self.assertRaises(ValueError):
                ck.write(b"x" * (MAX_CHECKPOINT_BYTES + 1))
            with open(ck.path, "wb") as f:
                f.write(b"x" * (MAX_CHECKPOINT_BYTES + 1))
            self.assertIsNone(ck.read(LOG), "too large to upload")
            os.unlink(ck.path)
            with tempfile.NamedTemporaryFile() as secret:
                secret.write(b"secret")
                secret.flush()
                os.symlink(secret.name, ck.path)
                self.assertIsNone(ck.read(LOG), "a symbolic link is not followed")
            os.unlink(ck.path)
            os.mkfifo(ck.path)
            self.assertIsNone(ck.read(LOG), "a FIFO neither blocks nor uploads")
        finally:
            ck.remove()
        self.assertFalse(os.path.exists(ck.dir))
        bad = CheckpointFile({"CHECKPOINT_DATA": "not base64!"}, LOG)
        self.assertIsNone(bad.restored)
        bad.remove()

    def test_output_tail_and_progress(self) -> None:
        got = []
        out = _Output(8, lambda p, m: got.append((p, m)))
        for chunk in (b"::workron-pro", b"gress 140% far\n::workron-progress 5\n", b"::workron-progress x\n"):
            out.write(chunk)
        self.assertEqual(got, [(140, "far"), (5, "")], "whole lines only; the job context holds the bounds")
        self.assertEqual(out.text(), "gress x\n", "the last bytes")

    def test_exit_75_hold_off(self) -> None:
        self.assertEqual(_hold_off(75, "x\n"), ("exit status 75", {}), "no line: an ordinary failure")
        self.assertEqual(_hold_off(75, "WORKRON_RETRY_AFTER=soon\n"), ("exit status 75", {}))
        self.assertEqual(_hold_off(75, "WORKRON_RETRY_AFTER=2s\n"), ("exit status 75: rate limited for 2000ms",
                                                                  {"rate_limited_for": "2000ms"}))
        self.assertEqual(_hold_off(75, "WORKRON_RETRY_AFTER=2s\nWORKRON_SNOOZE=5s\n")[1], {"snooze_for": "5000ms"})

    def test_exit_75_outcome(self) -> None:
        def run(command: str) -> Outcome:
            return Command(command, dict(os.environ), {}, 4096, lambda p, m: None, None, lambda p: None).run()
        out = run("echo WORKRON_RETRY_AFTER=2s; exit 75")
        self.assertEqual((out.status, out.hold, out.result), ("failed", {"rate_limited_for": "2000ms"}, None),
                         "the hold is the report's hold, not its result")
        out = run("echo busy; exit 75")
        self.assertEqual((out.status, out.error, out.hold), ("failed", "exit status 75", {}), "no line: an ordinary failure")

    def test_pass_env_refuses_the_token(self) -> None:
        with self.assertRaises(ValueError):
            check_pass_env(["WORKRON_TOKEN"])
        with self.assertRaises(ValueError):
            check_pass_env(["A=B"])


if __name__ == "__main__":
    unittest.main()
