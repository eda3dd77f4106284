"""The worker runtime: typed handlers for jobs claimed from the cluster.

It follows the protocol of the Go worker (package worker, docs/workers.md):
it registers, long-polls POST /jobs/claim for as many jobs as it has free
slots, numbering each claim (claim_seq); runs each job's handler in a thread
of its own; renews all its leases with one heartbeat per third of the lease
TTL each claim reply announces (lease_ttl_ms), naming the claims that had ended so that a job whose claim reply was
lost goes back at once; and reports every attempt's end with its lease,
carried on the next claim or batched on POST /jobs/reports.

A handler reports progress with ``job.progress(percent, message)``: the
worker sends it at once, in a heartbeat that lists only the jobs with new
progress, or ``progress_interval`` seconds after the last it sent, with the
latest update of every job (at most one such request per interval,
whatever the number of jobs).

While jobs run, the worker also holds one long-poll (POST
/workers/{id}/actions) that the cluster answers as soon as one of its
attempts must stop: a cancel or a gang's drain reaches it at once rather
than at its next heartbeat, whose reply still carries the same actions. What a handler returns is the job's result (any JSON value;
None: none), and ``job.parent_results`` holds the results of the jobs it
depends on.

Each attempt's lease ends, by the worker's clock, one lease TTL after the
arrival of its claim's reply or of the last good heartbeat's reply
(lease.py). When that passes, or a heartbeat is refused with stale_lease or
not_running, or its reply names the lease lost (the cluster did not renew
it), the lease is lost: the cluster may give the job to another
worker, so the worker stops the attempt and never reports it, as the Go
worker does (a report would be refused as stale).

Python cannot kill a thread: when a job times out, is cancelled, or is still
running when the shutdown grace ends, its attempt is reported failed and its
JobContext.stopping event is set; the handler's thread is abandoned, and what
it returns later is ignored. So it is when its lease is lost, unreported, and
with JobContext.lease_lost set too: every call of that JobContext raises
LeaseLost from then on. Handlers that run long should check
``job.stopping``.

With ``shell=True`` it also runs shell-command jobs as the Go worker does
(shell.py): those it can stop (a lost lease too), with SIGTERM to the
command's process group, the kill grace, then SIGKILL. Each gets a step
socket (stepsocket.py), so that ``workron step`` in it is durable.

Durable steps (durable.py): ``job.step``, ``job.sleep``,
``job.wait_for_event``, ``job.invoke``... record through the attempt's
journal. A sleep, wait or invoke that parks the job raises Parked: the
attempt has ended on the server, so the worker frees its slot and sends no
report (also when the handler caught Parked and returned).

Gang tasks (gang.py): ``job.gang`` and ``job.checkpoint`` hold the gang's
env and the checkpoint the task's previous attempt left; every gang task has
a checkpoint file (WORKRON_CHECKPOINT, ``job.save_checkpoint(data)``). When
the gang drains, the heartbeat's "preempt" action stops the task (a command
as above; a handler sees ``job.preempted`` and ``job.stopping`` and has the
kill grace to return), then the worker uploads the checkpoint file if it is
not empty and acknowledges the preemption instead of reporting the attempt.

Its parts, one job each: context.py (JobContext, what a handler sees, and
RateLimited, Snooze), task.py (_Task, a running attempt's record),
stopping.py (ending an attempt early), reporting.py (settling attempts and
sending their reports) and heartbeat.py (heartbeats, progress and the
actions long-poll). This module registers, claims and runs; its names
(Worker, JobContext, RateLimited, Snooze...) import from here as before.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import threading
import time
import traceback
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from .client import Abort, Client, Job, Resources, WorkronError, parse_go_duration
from .context import Handler, JobContext, RateLimited, Snooze  # noqa: F401 - public here too
from .durable import Parked, StepFailed  # noqa: F401 - StepFailed: where it was
from .errors import NoRetry
from .gang import CheckpointFile, Gang
from .heartbeat import _Heartbeats
from .lease import LeaseClock
from .reporting import _Reporting
from .shell import BASE_ENV, Command, Outcome, Watcher, bound_hold_off, check_pass_env, command_env
from .stopping import _Stopping
from .task import _Task  # noqa: F401 - tests import it from here
from .tracing import TraceHook, traced

# The lease TTL a worker assumes until a claim reply announces the
# server's (lease_ttl_ms), as the Go worker does (worker.defaultLeaseTTL).
_DEFAULT_LEASE_TTL = 15.0


class Worker(_Heartbeats, _Reporting, _Stopping):
    """Runs handlers registered by job type for jobs claimed from the cluster.

    ``servers`` (by default WORKRON_SERVER, else the quick starts' nodes),
    ``token``, ``token_file`` and ``tls_ca`` are as for Client (the token
    needs the worker role). ``id`` defaults to HOSTNAME-PID; ``queues`` are served
    in order of preference; ``concurrency`` is how many jobs run at once (the
    slots it registers); ``poll_wait`` the seconds one claim long-polls;
    ``grace`` how long running jobs may finish after stop() or SIGTERM
    before they are reported failed. ``trace_hook`` wraps each handler to
    continue the job's trace (see workron.tracing).

    ``shell`` makes it run shell-command jobs too (``sh -c``; see shell.py),
    with the worker's variables of ``pass_env`` besides the base ones, the
    last ``output_tail`` bytes of output reported, and ``kill_grace``
    seconds between SIGTERM and SIGKILL when one is stopped; a preempted
    gang task's handler has the kill grace to return. ``progress_interval``
    is the least time in seconds between two sends of progress (at least
    0.1). ``exec_addr``
    (where gang peers reach this worker), ``tags`` and ``resources`` are
    registered.
    """

    def __init__(self, servers: Union[str, Sequence[str], None] = None, *, id: Optional[str] = None,
                 queues: Sequence[str] = ("default",), concurrency: int = 4, token: Optional[str] = None,
                 token_file: Optional[str] = None, tls_ca: Optional[str] = None, poll_wait: float = 30.0,
                 grace: float = 30.0,
                 tags: Sequence[str] = (), resources: Optional[Resources] = None, exec_addr: str = "",
                 shell: bool = False, pass_env: Sequence[str] = (), kill_grace: float = 5.0,
                 output_tail: int = 4096, progress_interval: float = 1.0,
                 logger: Optional[logging.Logger] = None, trace_hook: Optional[TraceHook] = None) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency: must be at least 1, got {concurrency}")
        if poll_wait < 0 or grace < 0 or kill_grace < 0:
            raise ValueError("poll_wait, grace and kill_grace must not be negative")
        if progress_interval < 0.1:
            raise ValueError(f"progress_interval: must be at least 0.1 seconds, got {progress_interval}")
        if not 0 <= output_tail <= 1 << 20:
            raise ValueError(f"output_tail: must be from 0 to {1 << 20} bytes, got {output_tail}")
        self.shell = shell
        self.exec_addr = exec_addr
        self.kill_grace = kill_grace
        self.output_tail = output_tail
        self.progress_interval = progress_interval
        self._env_names = list(BASE_ENV) + check_pass_env(pass_env)
        self._watcher: Optional[Watcher] = None
        self.id = id or f"{socket.gethostname()}-{os.getpid()}"
        self.client = Client(servers, token=token, token_file=token_file, tls_ca=tls_ca)
        self.queues = list(queues)
        self.concurrency = concurrency
        self.poll_wait = poll_wait
        self.grace = grace
        self.tags = list(tags)
        self.resources = resources or Resources()
        if not self.resources.slots:
            self.resources.slots = concurrency
        self.log = logger or logging.getLogger("workron.worker")
        self._handlers: Dict[str, Handler] = {}
        self._trace_hook = trace_hook
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._stop = threading.Event()  # stop claiming
        self._quit = threading.Event()  # the heartbeat and reporter end
        self._kick = threading.Event()  # the heartbeat loop looks again
        self._abort = Abort()
        self._actions_abort = Abort()  # cuts the actions long-poll at the end
        self._progressed = threading.Event()  # a running job made progress
        self._jobs_began = threading.Event()  # the actions loop looks again
        self._running: Dict[Tuple[str, int], _Task] = {}
        self._reports: List[Dict[str, Any]] = []  # queued
        self._sending: Dict[Tuple[str, int], Dict[str, Any]] = {}  # sent, not answered
        self._lease_ttl = _DEFAULT_LEASE_TTL  # the server's, from each claim reply
        self._leases = LeaseClock(self._lease_expired)  # each attempt's lease end, by this worker's clock
        self._claims_from = time.time_ns()
        self._claims_ended = 0
        self._claim_lost = 0
        self._progress_off_until = 0.0

    def handle(self, job_type: str, fn: Optional[Handler] = None) -> Any:
        """Registers fn for jobs of job_type; usable as a decorator
        (``@worker.handle("email.send")``). A handler that returns ends the
        attempt done, what it returns (any JSON value, at most 64 KiB; None:
        nothing) being the job's result; one that raises fails it, with the
        traceback as its error (NoRetry: no more attempts; RateLimited and
        Snooze: the attempt does not count, see them)."""
        if not job_type:
            raise ValueError("job_type: must not be empty")

        def register(f: Handler) -> Handler:
            self._handlers[job_type] = f
            return f

        return register(fn) if fn is not None else register

    def stop(self) -> None:
        """Starts a graceful stop: no more claims; run() returns once the
        running jobs finished or the grace period ended."""
        self._stop.set()
        self._abort.abort()
        with self._cond:
            self._cond.notify_all()

    def run(self, *, install_signals: bool = True) -> None:
        """Registers and serves until stop() (or SIGTERM/SIGINT, with
        install_signals, from the main thread), then shuts down: running jobs
        get ``grace`` seconds, the rest are reported failed, every report is
        sent, and a last heartbeat gives back what a cut claim leased."""
        if not self._handlers and not self.shell:
            raise ValueError("no handlers: call handle() first, or run shell commands (shell=True)")
        previous = {}
        if install_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: self.stop())
        try:
            self._serve()
        finally:
            for sig, h in previous.items():
                signal.signal(sig, h)

    def _serve(self) -> None:
        if self.shell:
            self._watcher = Watcher(self.log)
        try:
            self._serve_registered()
        finally:
            if self._watcher is not None:  # every command has ended, or is killed now
                self._watcher.stop()
                self._watcher = None

    def _serve_registered(self) -> None:
        if not self._register():
            return
        self.log.info("worker %s serving %s%s", self.id, sorted(self._handlers), " and shell commands" * self.shell)
        threads = [threading.Thread(target=f, name=f"workron-{n}", daemon=True)
                   for n, f in (("claim", self._claim_loop), ("heartbeat", self._heartbeat_loop),
                                ("reporter", self._report_loop), ("progress", self._progress_loop),
                                ("actions", self._actions_loop), ("leases", self._leases.run))]
        for t in threads:
            t.start()
        while not self._stop.wait(0.2):  # wakes so signal handlers run
            pass
        threads[0].join()
        self._drain()
        self._quit.set()
        self._leases.close()
        self._kick.set()
        self._progressed.set()
        self._jobs_began.set()
        self._actions_abort.abort()
        with self._cond:
            self._cond.notify_all()
        for t in threads[1:]:
            t.join()
        self._flush()
        self._final_heartbeat()
        self.log.info("worker %s stopped", self.id)

    def _register(self) -> bool:
        delay = 0.1
        while not self._stop.is_set():
            try:
                self.client.register(self.id, queues=self.queues, tags=self.tags, resources=self.resources,
                                     exec_addr=self.exec_addr)
                return True
            except WorkronError as e:
                if e.status in (400, 401, 403):
                    raise
                self.log.warning("register failed: %s", e)
            self._stop.wait(delay)
            delay = min(delay * 2, 5.0)
        return False

    # ---- claims

    def _claim_loop(self) -> None:
        seq, delay = self._claims_from, 0.1
        types = sorted(self._handlers)
        while True:
            with self._cond:
                while not self._stop.is_set() and len(self._running) >= self.concurrency:
                    self._cond.wait()
                if self._stop.is_set():
                    return
                free = self.concurrency - len(self._running)
                reps, self._reports = self._reports[:1000], self._reports[1000:]
                for r in reps:
                    self._sending[(r["job_id"], r["lease"])] = r
            began = time.monotonic()
            try:
                jobs, ttl, answers = self.client.claim(
                    self.id, types=types, shell=self.shell, queues=self.queues, max=free, claim_seq=seq, reports=reps,
                    wait="0s" if reps else self.poll_wait, abort=self._abort)
                got = time.monotonic()  # the leases began before: their ends are at most this + TTL
            except WorkronError as e:
                self._answered(reps, None)
                with self._cond:
                    self._claims_ended = self._claim_lost = seq
                self._kick.set()
                if not self._stop.is_set():
                    self.log.warning("claim failed: %s", e)
                    if e.status == 404:
                        self._register()
                    self._stop.wait(delay)
                    delay = min(delay * 2, 5.0)
                seq += 1
                continue
            self._answered(reps, answers)
            with self._cond:
                if ttl > 0:
                    self._lease_ttl = ttl / 1000.0
                if not self._stop.is_set():  # else the last heartbeat gives them back
                    for j in jobs:
                        self._start(j, got)
                self._claims_ended = seq
            if jobs:
                self._kick.set()
            seq += 1
            if not jobs and not reps and time.monotonic() - began < min(1.0, self.poll_wait / 2):
                self._stop.wait(delay)  # answered at once with nothing: do not spin
                delay = min(delay * 2, 5.0)
            else:
                delay = 0.1

    def _start(self, job: Job, got: float) -> None:
        """Starts job's handler or command, claimed by a reply that arrived
        at got (time.monotonic); called with the lock held."""
        task = _Task(JobContext(job, traceparent=job.traceparent, _progressed=self._progressed,
                                _client=self.client))
        self._jobs_began.set()
        self._with_checkpoint(task)
        self._running[task.key] = task
        self._leases.begin(task.key, got + self._lease_ttl)
        timeout = parse_go_duration(job.timeout)
        if timeout:
            task.timer = threading.Timer(timeout, self._stop_task, (task, f"timed out after {job.timeout}"))
            task.timer.daemon = True
            task.timer.start()
        run = self._run_command if task.command else self._run_task
        threading.Thread(target=run, args=(task,), name=f"workron-job-{job.id}", daemon=True).start()

    def _with_checkpoint(self, task: _Task) -> None:
        """Gives a gang task its gang and checkpoint file (its path in the
        job's env as WORKRON_CHECKPOINT, as the Go worker does)."""
        ctx = task.ctx
        ctx.gang = Gang.from_env(ctx.job.env)
        if ctx.gang is None:
            return
        try:
            ck = CheckpointFile(ctx.job.env, self.log)
        except OSError as e:
            self.log.warning("job %s: no checkpoint file for this gang task: %s", ctx.id, e)
            return
        ctx._ckpt, ctx.checkpoint = ck, ck.restored
        ctx.job.env = ck.env(ctx.job.env)

    def _run_task(self, task: _Task) -> None:
        try:
            self._call_handler(task)
        finally:
            task.ended.set()
            self._release(task)

    def _release(self, task: _Task) -> None:
        """Removes the checkpoint file of a task that ended unpreempted (a
        preempted one's goes after its upload)."""
        with self._cond:
            preempted = task.preempt_epoch != 0
        if not preempted and task.ctx._ckpt is not None:
            task.ctx._ckpt.remove()

    def _call_handler(self, task: _Task) -> None:
        handler = self._handlers.get(task.ctx.type)
        try:
            if handler is None:
                raise NoRetry(f"no handler for job type {task.ctx.type!r}")
            self.client.fetch_parent_results(task.ctx.job)  # all of them, when the claim cut them short
            with traced(self._trace_hook, task.ctx):
                value = handler(task.ctx)
        except Parked:
            self._park(task)
        except BaseException as e:  # noqa: B036 - any failure fails the attempt, not the worker
            self._settle_raised(task, e)  # parked instead if it parked (_settle)
        else:
            self._settle_result(task, value)  # parked instead if it parked and caught Parked

    def _settle_raised(self, task: _Task, e: BaseException) -> None:
        """Ends task's attempt as what its handler raised says."""
        if isinstance(e, NoRetry):
            self._settle(task, "failed", error=traceback.format_exc(), retry=False)
        elif isinstance(e, RateLimited):
            self._settle(task, "failed", error=e.reason or str(e), hold={"rate_limited_for": bound_hold_off(e.after)})
        elif isinstance(e, Snooze):
            self._settle(task, "failed", error=str(e), hold={"snooze_for": bound_hold_off(e.after)})
        else:
            self._settle(task, "failed", error=traceback.format_exc())

    def _stop_parked(self, task: _Task) -> None:
        """Stops the command of a shell job that parked through its step
        socket (`workron sleep` and the like): SIGTERM, the kill grace,
        SIGKILL. Its attempt ends without a report once it has ended."""
        with self._cond:
            if task.settled or task.cause:
                return
            task.cause = "parked"
        self.log.info("stopping job %s: it parked", task.ctx.id)
        self._interrupt(task, "parked")

    def _park(self, task: _Task) -> None:
        """Ends an attempt a sleep, wait or invoke parked: the server ended
        it already, so the worker frees its slot and reports nothing."""
        with self._cond:
            if task.settled:
                return
            task.settled = True
            self._running.pop(task.key, None)
            self._cond.notify_all()
        self._leases.end(task.key)
        if task.timer is not None:
            task.timer.cancel()
        step = task.ctx._journal.parked if task.ctx._journal is not None else None
        self.log.info("job %s parked on %s", task.ctx.id, f"{step.get('kind', 'step')} {step.get('key', '')}"
                      if step else "a step")
        task.ctx.stop_reason = "parked"
        task.ctx.stopping.set()

    def _run_command(self, task: _Task) -> None:
        """Runs a shell job's command and settles its attempt: reported, or
        when its gang drained, its checkpoint uploaded and acknowledged."""
        ctx = task.ctx
        job = ctx.job
        env = command_env(job.env, self._env_names, job.id, job.attempts, ctx.traceparent)
        if ctx._journal is not None:
            ctx._journal.on_park = lambda: self._stop_parked(task)
        try:
            self.client.fetch_parent_results(job)  # all of them, when the claim cut them short
            cmd = Command(job.command, env, job.parent_results, self.output_tail, ctx._record_progress, self._watcher,
                          lambda proc: self._started(task, proc), journal=ctx._journal, log=self.log)
            out = cmd.run()
        except Exception:  # noqa: BLE001 - a failure fails the attempt, not the worker
            out = Outcome("failed", error=traceback.format_exc())
        if task.kill_timer is not None:
            task.kill_timer.cancel()
        task.ended.set()
        with self._cond:
            cause, retry = task.cause, task.retry
        if cause:
            out.status, out.error, out.result, out.hold = "failed", cause, None, {}
        # Parked through its step socket, the attempt is not reported (_settle).
        settled = self._settle(task, out.status, error=out.error, retry=retry, result=out.result, hold=out.hold,
                               exit_code=out.exit_code, output=out.output)
        if not settled and task.preempt_epoch:
            self._finish_preempted(task)
        self._release(task)

    def _started(self, task: _Task, proc: subprocess.Popen) -> None:
        """Keeps a command's process, and stops it if its task was stopped
        before it ran."""
        with self._cond:
            task.proc = proc
            stop = task.ctx.stopping.is_set()
        if stop:
            self._signal(task)

    def _drain(self) -> None:
        """Waits up to grace for running jobs, then fails what is left: a
        handler's attempt at once, a command once it was stopped (and
        preempted gang tasks once acknowledged)."""
        self._wait_running(self.grace)
        with self._cond:
            left = list(self._running.values())
        for task in left:
            self._stop_task(task, f"worker {self.id} stopped: the job outlived the {self.grace}s grace")
        self._wait_running(self.kill_grace + self._lease_ttl + 1)

    def _wait_running(self, secs: float) -> None:
        deadline = time.monotonic() + secs
        with self._cond:
            while self._running and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
