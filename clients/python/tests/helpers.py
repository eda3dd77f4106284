"""What the tests share: the node python_test.go started, and helpers."""

from __future__ import annotations

import os
import sys
import threading
import time
import unittest
import uuid
from typing import Callable, List, Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from workron import Client, Worker  # noqa: E402

URL = os.environ.get("WORKRON_TEST_URL", "")
CA = os.environ.get("WORKRON_TEST_CA") or None
ADMIN = os.environ.get("WORKRON_TEST_ADMIN_TOKEN") or None
CLIENT = os.environ.get("WORKRON_TEST_CLIENT_TOKEN") or None
WORKER = os.environ.get("WORKRON_TEST_WORKER_TOKEN") or None
# A token of client and worker: a durable job's invoke submits a job.
DURABLE = os.environ.get("WORKRON_TEST_DURABLE_TOKEN") or None
LEASE_TTL = float(os.environ.get("WORKRON_TEST_LEASE_TTL", "2s").rstrip("s"))


def needs_node(cls):
    """Skips the class when no node is given (run through go test)."""
    return unittest.skipUnless(URL, "WORKRON_TEST_URL not set: run `go test ./clients/python`")(cls)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def client(token: Optional[str] = CLIENT) -> Client:
    return Client(URL, token=token, tls_ca=CA)


def eventually(cond: Callable[[], bool], timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what}: not true within {timeout}s")


class RunningWorker:
    """A Worker served from a thread until stop()."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.thread = threading.Thread(target=lambda: worker.run(install_signals=False), daemon=True)
        self.thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self.worker.stop()
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError("worker did not stop")


def new_worker(queue: str, **kw) -> Worker:
    kw.setdefault("poll_wait", 2.0)
    kw.setdefault("grace", 5.0)
    kw.setdefault("token", WORKER)
    return Worker(URL, queues=[queue], tls_ca=CA, id=unique("pyw"), **kw)


def statuses(jobs: List) -> List[str]:
    return [j.status for j in jobs]


# A second node whose leases last 90s: its workers heartbeat every 30s.
LONG_LEASE_URL = os.environ.get("WORKRON_TEST_LONG_LEASE_URL", "")
