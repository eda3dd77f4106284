"""Gang tasks on the worker: the gang's env, the checkpoint file, and the
drain's upload and acknowledgement (docs/scheduling.md, "Resources and gangs").

A claimed gang task's env holds GANG_ID, GANG_SIZE, GANG_INDEX, GANG_PEERS
and, when its previous attempt left one, CHECKPOINT_DATA (base64). As the Go
worker does, the worker gives every gang task a checkpoint file: its path is
WORKRON_CHECKPOINT, it starts with that checkpoint, and when the gang drains
the worker uploads what the task left there. This module reads no clock and
sends nothing itself: the worker calls it.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Optional

# The server's cap on one checkpoint; a larger one is not uploaded.
MAX_CHECKPOINT_BYTES = 1 << 20
# The longest CHECKPOINT_DATA passed on in a command's environment (Linux
# refuses to exec with one variable much over 128 KiB); a longer one reaches
# the command through the $WORKRON_CHECKPOINT file only.
MAX_ENV_CHECKPOINT = 64 << 10

CHECKPOINT_ENV = "WORKRON_CHECKPOINT"


@dataclass
class Gang:
    """The gang a task belongs to: its id, size, this task's index (0 to
    size-1) and its peers, the other tasks' workers' exec_addr (their id
    when they registered none) in index order."""

    id: str
    size: int
    index: int
    peers: List[str] = field(default_factory=list)

    @classmethod
    def from_env(cls, env: Dict[str, str]) -> Optional["Gang"]:
        """The gang of a claimed job's env, or None for a job of no gang."""
        gid = env.get("GANG_ID", "")
        if not gid:
            return None
        peers = [p for p in env.get("GANG_PEERS", "").split(",") if p]
        return cls(id=gid, size=_int(env.get("GANG_SIZE")), index=_int(env.get("GANG_INDEX")), peers=peers)


def _int(s: Optional[str]) -> int:
    try:
        return int(s or 0)
    except ValueError:
        return 0


class CheckpointFile:
    """A gang task's checkpoint file, in a directory of its own that only
    the worker's user can list. ``restored`` is the checkpoint the task's
    previous attempt left (None: none)."""

    def __init__(self, env: Dict[str, str], log: logging.Logger) -> None:
        self.dir = tempfile.mkdtemp(prefix="workron-checkpoint-")
        self.path = os.path.join(self.dir, "checkpoint")
        self.restored: Optional[bytes] = None
        data = env.get("CHECKPOINT_DATA", "")
        if data:
            try:
                self.restored = base64.b64decode(data, validate=True)
            except (binascii.Error, ValueError) as e:
                log.warning("CHECKPOINT_DATA is not base64; not restored to the file: %s", e)
            else:
                self.write(self.restored)

    def env(self, job_env: Dict[str, str]) -> Dict[str, str]:
        """The job's env with WORKRON_CHECKPOINT set, and without a
        CHECKPOINT_DATA too long for an environment variable."""
        env = dict(job_env)
        env[CHECKPOINT_ENV] = self.path
        if len(env.get("CHECKPOINT_DATA", "")) > MAX_ENV_CHECKPOINT:
            del env["CHECKPOINT_DATA"]
        return env

    def write(self, data: bytes) -> None:
        """Replaces the checkpoint with data (at most MAX_CHECKPOINT_BYTES;
        ValueError beyond), atomically: a drain never uploads half of it."""
        data = bytes(data)
        if len(data) > MAX_CHECKPOINT_BYTES:
            raise ValueError(f"a checkpoint is at most {MAX_CHECKPOINT_BYTES} bytes, got {len(data)}")
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".checkpoint-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise

    def read(self, log: logging.Logger) -> Optional[bytes]:
        """What the task left to upload: None when nothing (or too much, or
        not a regular file: the command may have put a link or a FIFO
        there, which the worker neither follows nor blocks on)."""
        try:
            data = read_regular(self.path, MAX_CHECKPOINT_BYTES)
        except FileNotFoundError:
            return None
        except OSError as e:
            log.warning("read checkpoint file: %s", e)
            return None
        if data is None:
            log.warning("checkpoint not uploaded: larger than the server keeps (%d bytes)", MAX_CHECKPOINT_BYTES)
        return data or None

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def read_regular(path: str, limit: int) -> Optional[bytes]:
    """The regular file at path, None when over limit bytes; it does not
    follow a symbolic link and does not block on a FIFO. OSError otherwise."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(f"{path} is not a regular file")
        data = f.read(limit + 1)
    return None if len(data) > limit else data
