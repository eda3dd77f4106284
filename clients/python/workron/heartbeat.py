"""The worker's heartbeats and actions: one heartbeat per third of the
lease TTL renews every lease it holds (naming the claims that had ended),
progress goes out in heartbeats of its own at most once per
progress_interval, and one long-poll (POST /workers/{id}/actions) brings a
cancel or a gang's drain at once. A reply that names a lease lost stops
that attempt (stopping.py).

_Heartbeats is a part of Worker (worker.py), which holds the state it uses.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List, Tuple

from .client import WorkronError
from .context import JobContext
from .lease import Key, named_lost, refused

# How long a worker sends no progress after the cluster refused it (a member
# runs a release without progress, during a rolling upgrade).
_PROGRESS_OFF_FOR = 60.0
# The most attempts the actions loop remembers it was told about without
# running them (a claim reply it never received).
_MAX_UNKNOWN_ACTIONS = 256


class _Heartbeats:
    """Worker's heartbeat, progress and actions loops (see the module doc)."""

    def _heartbeat_wait(self) -> float:
        """How long to wait before the next heartbeat, as the Go worker
        does: a third of the lease TTL the last claim reply announced, but
        at most a second while a failed claim waits to be named (the jobs
        it may have leased go back only then)."""
        d = self._lease_ttl / 3
        with self._cond:
            if self._claim_lost:
                d = min(d, 1.0)
        return d

    def _heartbeat_loop(self) -> None:
        """Heartbeats every third of the lease TTL while the worker holds
        attempts (or a failed claim may have leased some); a failed
        heartbeat is tried again within a second."""
        next_at = time.monotonic() + self._heartbeat_wait()
        while not self._quit.is_set():
            if self._kick.wait(max(next_at - time.monotonic(), 0)):
                self._kick.clear()  # jobs started, a claim failed, or the TTL changed
                next_at = min(next_at, time.monotonic() + self._heartbeat_wait())
                continue
            next_at = time.monotonic() + self._heartbeat_wait()
            with self._cond:
                idle = not self._running and not self._reports and not self._sending and not self._claim_lost
            if idle:
                continue
            try:
                self._heartbeat_once()
            except WorkronError as e:
                self.log.warning("heartbeat failed: %s", e)
                next_at = time.monotonic() + min(self._lease_ttl / 3, 1.0)

    def _heartbeat_once(self) -> None:
        with self._cond:
            lost, claims_to = self._claim_lost, self._claims_ended
            # Jobs of the claims up to claims_to are in one of these now.
            leases = self._held() + [k for k in self._sending if k not in self._running]
            leases += [(r["job_id"], r["lease"]) for r in self._reports]
        try:
            reply = self._send_heartbeat(sorted(set(leases)), claims_to)
        except WorkronError as e:
            if e.status == 404:  # the cluster forgot this worker
                self._register()
                return
            raise
        with self._cond:
            if lost and claims_to >= lost and self._claim_lost == lost:
                self._claim_lost = 0
        for a in reply.get("actions") or []:
            self._act(a)

    def _held(self) -> List[Key]:
        """The attempts running whose leases the heartbeats renew: not those
        whose lease is lost (a command still stopping), which the cluster
        lets expire. Called with the lock held."""
        return [k for k, t in self._running.items() if not t.ctx.lease_lost.is_set()]

    def _act(self, a: Dict[str, Any]) -> bool:
        """Carries out one action of a heartbeat's (or the actions
        long-poll's) reply; False when it names no job running here."""
        with self._cond:
            task = self._running.get((a.get("job_id"), a.get("lease")))
        if task is None:
            return False
        action = a.get("action")
        if action == "cancel":
            self._stop_task(task, "cancelled", retry=False)
        elif action == "preempt" and a.get("preemption_epoch"):
            self._preempt(task, int(a["preemption_epoch"]))
        elif action == "preempt":
            self._stop_task(task, "preempted")
        else:
            self.log.warning("unknown heartbeat action %r for job %s ignored", action, task.ctx.id)
            return False
        return True

    def _send_heartbeat(self, leases: List[Key], claims_to: int) -> Dict[str, Any]:
        """Sends one heartbeat (_beat) and moves the lease end of each
        attempt it names to its reply's arrival plus the lease TTL, but
        stops those the reply names lost; refused with stale_lease or
        not_running, it stops all those attempts: their leases are lost.
        The stopped ones are left out of later heartbeats (_held)."""
        try:
            reply = self._beat(leases, claims_to)
        except WorkronError as e:
            if refused(e):
                for k in leases:
                    self._lose_lease(k, f"the cluster refused a heartbeat: {e}")
            raise
        got = time.monotonic()
        lost = named_lost(reply, leases)
        for k, reason in lost:
            self._lose_lease(k, f"the cluster did not renew it ({reason})")
        gone = {k for k, _ in lost}
        self._leases.renew([k for k in leases if k not in gone], got + self._lease_ttl)
        return reply

    def _beat(self, leases: List[Key], claims_to: int) -> Dict[str, Any]:
        """Sends one heartbeat with the progress of the running jobs that no
        heartbeat has carried yet; refused for it (a member runs an older
        release), it is sent again without, and none for a while."""
        progress: Dict[Tuple[str, int], Tuple[int, str]] = {}
        delivered: List[Tuple[JobContext, int]] = []
        if time.monotonic() >= self._progress_off_until:
            with self._cond:
                tasks = [t for k, t in self._running.items() if k in set(leases)]
            for t in tasks:
                pending = t.ctx._pending_progress()
                if pending is not None:
                    progress[(t.ctx.id, t.ctx.lease)] = pending[0]
                    delivered.append((t.ctx, pending[1]))
        try:
            reply = self.client.heartbeat_worker(self.id, leases, claims_from=self._claims_from,
                                                 claims_to=claims_to, progress=progress)
        except WorkronError as e:
            if not progress or e.code != "upgrade_in_progress":
                raise
            self.log.warning("the cluster does not take progress yet (a member runs an older release)")
            self._progress_off_until = time.monotonic() + _PROGRESS_OFF_FOR
            return self.client.heartbeat_worker(self.id, leases, claims_from=self._claims_from, claims_to=claims_to)
        for ctx, seq in delivered:
            ctx._delivered(seq)
        return reply

    def _progress_loop(self) -> None:
        """Sends the progress jobs make between heartbeats: at once, or
        progress_interval after the last send."""
        last = -self.progress_interval
        while True:
            self._progressed.wait()
            if self._quit.is_set():
                return
            if self._quit.wait(max(last + self.progress_interval - time.monotonic(), 0)):
                return
            self._progressed.clear()
            last = time.monotonic()
            try:
                self._send_progress()
            except WorkronError as e:
                self.log.warning("progress not sent: %s", e)

    def _send_progress(self) -> None:
        """Sends, in a heartbeat of its own, the new progress of the running
        jobs that have some: it lists only them and names no claims, so the
        cluster gives nothing back for the jobs it leaves out."""
        if time.monotonic() < self._progress_off_until:
            return
        with self._cond:
            tasks = [self._running[k] for k in self._held()]
        leases = sorted(t.key for t in tasks if t.ctx._pending_progress() is not None)
        if not leases:
            return
        reply = self._send_heartbeat(leases, 0)
        for a in reply.get("actions") or []:
            self._act(a)

    # ---- actions

    def _actions_loop(self) -> None:
        """Holds the actions long-poll while jobs run, and acts on what it
        answers as on a heartbeat's reply. A refused or failed poll (a node
        of an older release) leaves cancels to the heartbeats, and is tried
        again after a backoff of 1s doubling to a minute."""
        delay = 1.0
        unknown: Dict[Tuple[str, int], float] = {}  # told, not run here: until when to name it known
        while not self._quit.is_set():
            with self._cond:
                busy = bool(self._running)
                known = [k for k, t in self._running.items() if t.settled or t.cause]
            if not busy:
                self._jobs_began.wait()
                self._jobs_began.clear()
                continue
            now = time.monotonic()
            for k in [k for k, until in unknown.items() if until < now]:
                del unknown[k]
            began = time.monotonic()
            try:
                actions = self.client.worker_actions(self.id, sorted(set(known) | set(unknown)),
                                                     wait=max(self.poll_wait, 1.0), abort=self._actions_abort)
            except WorkronError as e:
                if self._quit.is_set():
                    return
                self.log.debug("actions long-poll failed: cancels arrive with heartbeats meanwhile: %s", e)
                self._quit.wait(delay)
                delay = min(delay * 2, 60.0)
                continue
            # An empty answer after the wait is no spin; one at once is.
            stopped = not actions and time.monotonic() - began >= max(self.poll_wait, 1.0) / 2
            for a in actions:
                if self._act(a):
                    stopped = True
                elif len(unknown) < _MAX_UNKNOWN_ACTIONS:
                    unknown[(a.get("job_id"), a.get("lease"))] = time.monotonic() + self._lease_ttl
            if stopped:
                delay = 1.0
            else:  # answered at once, with nothing it could stop
                self._quit.wait(delay)
                delay = min(delay * 2, 60.0)

    def _final_heartbeat(self) -> None:
        with self._cond:
            if not self._claims_ended:
                return
        try:
            self._heartbeat_once()
        except WorkronError as e:
            self.log.warning("last heartbeat failed: %s", e)

    # ---- shutdown
