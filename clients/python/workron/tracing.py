"""A job's trace (W3C Trace Context) in the Python worker.

Workron keeps each job's trace: the ``traceparent`` a job was submitted with
(``Client.submit(traceparent=...)``), or the node's span of the submit when
the node exports traces. The claim hands it to the worker as
``Job.traceparent``. This package records no span of its own (that needs an
OpenTelemetry SDK, and it uses the standard library only); it propagates:

- ``JobContext.traceparent`` is the trace the attempt runs in, and
  ``JobContext.environ()`` an environment for the handler's processes with
  ``TRACEPARENT`` set to it;
- a ``trace_hook`` given to the Worker wraps every handler: a function of
  the JobContext returning a context manager, for example one that starts an
  OpenTelemetry span as the child of ``job.traceparent``. What it yields, a
  traceparent (its span's), becomes the attempt's: the handler and its
  processes see it, and the report names it, so the node's span of the report
  is its child.
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterator, Optional

if TYPE_CHECKING:
    from .worker import JobContext

TraceHook = Callable[["JobContext"], ContextManager[Optional[str]]]

_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")


def valid_traceparent(tp: Any) -> bool:
    """Whether tp is a W3C traceparent this worker hands on: version 00 (or
    a later one, whose extra fields are kept), a trace id and a span id
    that are not all zeros."""
    m = _TRACEPARENT.match(tp) if isinstance(tp, str) else None
    if m is None or m.group(1) == "ff" or (m.group(1) == "00" and m.group(5)):
        return False
    return m.group(2) != "0" * 32 and m.group(3) != "0" * 16


@contextlib.contextmanager
def traced(hook: Optional[TraceHook], ctx: "JobContext") -> Iterator[None]:
    """Runs the body inside hook(ctx), when there is a hook; a valid
    traceparent it yields becomes ctx.traceparent."""
    if hook is None:
        yield
        return
    with hook(ctx) as tp:
        if valid_traceparent(tp):
            ctx.traceparent = tp
        yield
