"""What a handler raises to say how its attempt ends, shared by the worker
(worker.py) and durable steps (durable.py)."""

from __future__ import annotations


class NoRetry(Exception):
    """Raised by a handler: the attempt fails and the job gets no more
    attempts."""
