"""Workron's Python client and worker: standard library only, Python 3.9+.

``Client`` submits, finds, counts, cancels and retries jobs (one at a
time or in bulk actions) and manages schedules and
queues; ``Worker`` runs typed handlers (and, with shell=True, shell commands)
for jobs claimed from the cluster, gang tasks included (``Gang``), with
durable steps, sleeps, waits for events and child jobs (``JobContext.step``,
``sleep``, ``wait_for_event``, ``invoke``; durable.py); an attempt whose
lease the worker lost is stopped and not reported (``LeaseLost``; lease.py).
"""

from .client import (
    Backoff,
    Bulk,
    BulkCount,
    Client,
    Job,
    JobCount,
    JobList,
    JobSpec,
    Progress,
    Queue,
    Resources,
    Schedule,
    WorkronError,
    WorkronWarning,
)
from .durable import ChildFailed, Parked, StepFailed, StepLimitExceeded, StepTimeout
from .errors import NoRetry
from .gang import Gang
from .lease import LeaseLost
from .tracing import TraceHook, valid_traceparent
from .worker import JobContext, RateLimited, Snooze, Worker

__all__ = [
    "Backoff",
    "Bulk",
    "BulkCount",
    "ChildFailed",
    "Client",
    "Gang",
    "Job",
    "JobContext",
    "JobCount",
    "JobList",
    "JobSpec",
    "LeaseLost",
    "NoRetry",
    "Parked",
    "Progress",
    "Queue",
    "RateLimited",
    "Resources",
    "Schedule",
    "Snooze",
    "StepFailed",
    "StepLimitExceeded",
    "StepTimeout",
    "TraceHook",
    "Worker",
    "WorkronError",
    "WorkronWarning",
    "valid_traceparent",
]
