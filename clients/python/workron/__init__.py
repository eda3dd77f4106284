"""Workron's Python client and worker: standard library only, Python 3.9+.

``Client`` submits, finds, counts, cancels and retries jobs (one at a
time or in bulk actions) and manages schedules and
queues; ``Worker`` runs typed handlers (and, with shell=True, shell commands)
for jobs claimed from the cluster, gang tasks included (``Gang``).
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
from .gang import Gang
from .tracing import TraceHook, valid_traceparent
from .worker import JobContext, NoRetry, RateLimited, Snooze, StepFailed, Worker

__all__ = [
    "Backoff",
    "Bulk",
    "BulkCount",
    "Client",
    "Gang",
    "Job",
    "JobContext",
    "JobCount",
    "JobList",
    "JobSpec",
    "NoRetry",
    "Progress",
    "Queue",
    "RateLimited",
    "Resources",
    "Schedule",
    "Snooze",
    "StepFailed",
    "TraceHook",
    "Worker",
    "WorkronError",
    "WorkronWarning",
    "valid_traceparent",
]
