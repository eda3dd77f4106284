"""How the worker ends an attempt before its handler or command does:
a timeout, a cancel or a shutdown (reported failed), a lost lease
(stopped, never reported: lease.py) and a gang's drain (preempted, its
checkpoint uploaded). A command is stopped with SIGTERM to its process
group, the kill grace, then SIGKILL; a handler's thread cannot be killed,
so it is told through JobContext.stopping and abandoned.

_Stopping is a part of Worker (worker.py), which holds the state it uses.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time

from .lease import Key
from .shell import kill_group
from .task import _Task


class _Stopping:
    """Worker's methods that stop running attempts (see the module doc)."""

    def _stop_task(self, task: _Task, error: str, retry: bool = True) -> None:
        """Ends a running attempt early (timeout, cancel, shutdown): a
        handler's is reported failed at once; a command is stopped and
        reported when it has ended."""
        if not task.command:
            self._settle(task, "failed", error=error, retry=retry)
            return
        with self._cond:
            if task.settled or task.cause:
                return
            task.cause, task.retry = error, retry
        self.log.info("stopping job %s: %s", task.ctx.id, error)
        self._interrupt(task, error)

    def _interrupt(self, task: _Task, reason: str) -> None:
        """Tells the handler to return, and stops the command."""
        task.ctx.stop_reason = reason
        task.ctx.stopping.set()
        with self._cond:
            running = task.proc is not None
        if running:
            self._signal(task)

    def _signal(self, task: _Task) -> None:
        """SIGTERM to the command's process group, SIGKILL after the kill
        grace; once."""
        with self._cond:
            proc = task.proc
            if proc is None or task.signalled:
                return
            task.signalled = True
        kill_group(proc.pid, signal.SIGTERM)
        task.kill_timer = threading.Timer(self.kill_grace, self._kill, (task, proc))
        task.kill_timer.daemon = True
        task.kill_timer.start()

    def _kill(self, task: _Task, proc: subprocess.Popen) -> None:
        if not task.ended.is_set():
            self.log.warning("job %s ignored SIGTERM: sending SIGKILL", task.ctx.id)
            kill_group(proc.pid, signal.SIGKILL)

    def _forget(self, task: _Task) -> None:
        """Ends task's attempt without a report and frees its slot."""
        with self._cond:
            task.settled = True
            if self._running.get(task.key) is task:
                del self._running[task.key]
            self._cond.notify_all()
        self._leases.end(task.key)

    def _lease_expired(self, key: Key) -> None:
        self._lose_lease(key, f"not renewed within its {self._lease_ttl:g}s TTL")

    def _lose_lease(self, key: Key, why: str) -> None:
        """Stops attempt key, whose lease is lost (why), unless its end was
        decided first: a command as on a cancel (SIGTERM to its process
        group, SIGKILL after the kill grace), its slot held until it ended;
        a handler is told (lease_lost, stopping; its SDK calls raise
        LeaseLost) and its thread abandoned, its slot free at once. Neither
        is reported: the cluster may have given the job to another worker."""
        with self._cond:  # one step: a handler that returns meanwhile is reported, or not at all
            task = self._running.get(key)
            if task is None or task.settled or task.cause:
                return
            task.cause = "lease lost"
            task.ctx._lose_lease(f"lease lost: {why}")  # _settle now forgets it
            if not task.command:
                task.settled = True
                del self._running[key]
                self._cond.notify_all()
        self._leases.end(key)
        if task.timer is not None:
            task.timer.cancel()
        self.log.warning("job %s: lease %d lost (%s): stopping the job; its attempt is not reported", key[0],
                         key[1], why)
        self._signal(task)  # a command's; one not started yet is stopped when it starts (_started)

    def _preempt(self, task: _Task, epoch: int) -> None:
        """Stops a gang task for the drain of epoch: its attempt is not
        reported; its checkpoint is uploaded and the preemption acknowledged
        once its command ended or its handler returned (or the kill grace
        passed)."""
        with self._cond:
            if task.settled or task.cause:  # the first reason to stop wins
                return
            task.settled, task.preempt_epoch = True, epoch
        if task.timer is not None:
            task.timer.cancel()
        self.log.info("stopping job %s: its gang drains (epoch %d)", task.ctx.id, epoch)
        task.ctx.stop_reason = "preempted"
        task.ctx.preempted.set()  # before stopping: a handler woken by stopping sees why
        self._interrupt(task, "preempted")
        if not task.command:  # a command's thread finishes it when the command ends
            threading.Thread(target=self._await_handler, args=(task,), name=f"workron-preempt-{task.ctx.id}",
                             daemon=True).start()

    def _await_handler(self, task: _Task) -> None:
        if not task.ended.wait(self.kill_grace):
            self.log.warning("job %s: the handler did not return within the %ss kill grace after its preemption; "
                             "uploading the checkpoint it saved", task.ctx.id, self.kill_grace)
        self._finish_preempted(task)

    def _finish_preempted(self, task: _Task) -> None:
        """Uploads a preempted task's checkpoint file, if not empty, and
        acknowledges the preemption, for at most one lease TTL; then frees
        its slot. A 409 or 404 means the drain is over: nothing more."""
        job, ck, epoch = task.ctx.job, task.ctx._ckpt, task.preempt_epoch
        deadline = time.monotonic() + self._lease_ttl
        try:
            data = ck.read(self.log) if ck is not None else None
            if data:
                self._retry("checkpoint", job.id, lambda: self.client.checkpoint(job.id, epoch, data), deadline)
            if self._retry("preemption acknowledgement", job.id, lambda: self.client.preempted(job.id, epoch),
                           deadline):
                self.log.info("job %s: preemption acknowledged (epoch %d)", job.id, epoch)
        finally:
            if ck is not None:
                ck.remove()
            self._forget(task)
