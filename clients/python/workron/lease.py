"""Lost leases (docs/workers.md, "Lost leases"): when each attempt a worker
runs loses its lease by the worker's own clock, and what a handler's calls
raise once it has.

An attempt's lease ends one lease TTL (the claim reply's lease_ttl_ms)
after its claim's reply arrived; each heartbeat naming it whose reply
arrives moves the end to that arrival plus the TTL. The cluster renewed the
lease when it applied the heartbeat, before it answered, so this end is the
cluster's or later, by the reply's transit: the worker stops late, never
early. Not the send time: the client may retry a request for longer than
the TTL, and the lease dates from the try that got through. This is the Go
worker's rule (worker/heartbeat.go, watchLease).

LeaseClock keeps those ends and calls the worker back for an attempt whose
end has passed; it sends nothing and stops nothing itself. The worker then
stops the attempt and reports nothing for it: the cluster expires such a
lease and may give the job to another worker, and a report under it would
be refused as stale. So it does at once for the attempts a heartbeat's
reply names lost (named_lost): the cluster did not renew those.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from .client import WorkronError

Key = Tuple[str, int]  # (job id, lease): one attempt

# The codes of a heartbeat's refusal that end the leases it named: the
# attempts are no longer the jobs' current ones.
REFUSED_CODES = ("stale_lease", "not_running")


class LeaseLost(BaseException):
    """Raised by every call of a job's SDK (``step``, ``sleep``,
    ``wait_for_event``, ``invoke``, ``progress``, ``save_checkpoint``...)
    once the worker lost the attempt's lease: no heartbeat renewed it for
    the lease TTL, or the cluster answered that the attempt is no longer
    the job's current one. The cluster may run the job on another worker
    meanwhile, so the handler must stop; nothing it does after is reported.
    Like Parked it is a BaseException, so that an ``except Exception``
    does not swallow it."""

    def __init__(self, job_id: str, lease: int) -> None:
        super().__init__(f"job {job_id}: lease {lease} lost: another worker may run the job; this attempt is not "
                         "reported")
        self.job_id = job_id
        self.lease = lease


def check(lost: Optional[threading.Event], job_id: str, lease: int) -> None:
    """Raises LeaseLost when lost is set."""
    if lost is not None and lost.is_set():
        raise LeaseLost(job_id, lease)


def refused(err: WorkronError) -> bool:
    """Whether a heartbeat's error says that the leases it named are gone."""
    return err.code in REFUSED_CODES


def named_lost(reply: Mapping[str, Any], listed: Iterable[Key]) -> List[Tuple[Key, str]]:
    """The attempts of listed that a heartbeat's reply names lost (its
    "lost": the cluster did not renew them), each with the reason the
    cluster gave (stale_lease, not_running, not_found); none from a
    cluster that names none. An entry for an attempt the heartbeat did not
    list is ignored."""
    keys = set(listed)
    out: List[Tuple[Key, str]] = []
    for e in reply.get("lost") or []:
        k = (e.get("job_id"), e.get("lease"))
        if k in keys:
            out.append((k, str(e.get("reason") or "")))
    return out


class LeaseClock:
    """The lease end of each attempt a worker runs (time.monotonic), and
    the loop (run) that calls expire(key) once for an attempt whose end
    passed before it was renewed or ended. Safe for concurrent use."""

    def __init__(self, expire: Callable[[Key], None]) -> None:
        self._expire = expire
        self._cond = threading.Condition()
        self._ends: Dict[Key, float] = {}
        self._closed = False

    def begin(self, key: Key, end: float) -> None:
        """Watches attempt key, whose lease ends at end."""
        with self._cond:
            self._ends[key] = end
            self._cond.notify_all()

    def renew(self, keys: Iterable[Key], end: float) -> None:
        """Moves the lease end of the watched attempts of keys to end,
        unless it is later already; an attempt not watched (ended, or its
        lease lost) stays so."""
        with self._cond:
            for k in keys:
                if self._ends.get(k, end) < end:
                    self._ends[k] = end

    def end(self, key: Key) -> None:
        """Stops watching attempt key: its run ended (reported, parked,
        preempted) or it was stopped."""
        with self._cond:
            self._ends.pop(key, None)

    def close(self) -> None:
        """Ends run(); safe to call twice."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def run(self) -> None:
        """Calls expire for each attempt whose lease end passed, once, in
        this thread, until close(). Its waits are its own: a heartbeat
        whose request hangs does not hold a stop back."""
        while True:
            with self._cond:
                due = self._due()
                while not due and not self._closed:
                    now = time.monotonic()
                    self._cond.wait(min(self._ends.values()) - now if self._ends else None)
                    due = self._due()
                if self._closed:
                    return
            for k in due:
                self._expire(k)

    def _due(self) -> Tuple[Key, ...]:
        """Takes out the attempts whose end passed; called with the lock."""
        now = time.monotonic()
        due = tuple(k for k, e in self._ends.items() if e <= now)
        for k in due:
            del self._ends[k]
        return due

    def __len__(self) -> int:
        with self._cond:
            return len(self._ends)
