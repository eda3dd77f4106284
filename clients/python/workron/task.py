"""The worker's record of one running attempt (_Task): its JobContext,
its timers, its command's process, and whether its end is decided. It
holds state only; worker.py and its parts act on it.
"""

from __future__ import annotations

import subprocess
import threading
from dataclasses import dataclass, field
from typing import Optional, Tuple

from .context import JobContext


@dataclass
class _Task:
    ctx: JobContext
    settled: bool = False  # its end is decided: reported, or preempted
    timer: Optional[threading.Timer] = None
    # A command stopped (timeout, cancel, shutdown): the report's error.
    cause: str = ""
    retry: bool = True
    preempt_epoch: int = 0  # the drain that preempted it (0: none)
    proc: Optional[subprocess.Popen] = None  # a command's, once it runs
    signalled: bool = False
    kill_timer: Optional[threading.Timer] = None
    ended: threading.Event = field(default_factory=threading.Event)  # its handler or command returned

    @property
    def command(self) -> bool:
        return bool(self.ctx.job.command)

    @property
    def key(self) -> Tuple[str, int]:
        return self.ctx.job.id, self.ctx.job.lease
