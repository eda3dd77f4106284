"""Workron's Python client and worker: standard library only, Python 3.9+.

``Client`` submits, reads, cancels and retries jobs and manages schedules and
queues; ``Worker`` runs typed handlers for jobs claimed from the cluster.
"""

from .client import (
    Backoff,
    Client,
    Job,
    JobList,
    JobSpec,
    Progress,
    Queue,
    Resources,
    Schedule,
    WorkronError,
)
from .worker import JobContext, NoRetry, RateLimited, Snooze, Worker

__all__ = [
    "Backoff",
    "Client",
    "Job",
    "JobContext",
    "JobList",
    "JobSpec",
    "NoRetry",
    "Progress",
    "Queue",
    "RateLimited",
    "Resources",
    "Schedule",
    "Snooze",
    "Worker",
    "WorkronError",
]
