"""The HTTP client: jobs, schedules, queues, and the worker protocol's calls.

It speaks the JSON API of docs/api.md (and api/openapi.json) over
http.client, one connection per request. Errors from the server raise
WorkronError with its status and code. A node that refuses the connection,
or answers 503 (no leader, removed, stopping: nothing was done), is retried
on the next node of ``servers``; any other failure is raised at once, since
a write whose answer was lost may have taken effect.
"""

from __future__ import annotations

import datetime as _dt
import http.client
import json
import math
import os
import socket
import ssl
import threading
import time
import urllib.parse
import warnings
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

Duration = Union[str, float, int, _dt.timedelta]


class WorkronError(Exception):
    """An error answer: ``status`` (HTTP), ``code`` (docs/api.md's table, e.g.
    "stale_lease", "not_found") and the server's sentence. ``status`` is 0
    when no node answered."""

    def __init__(self, status: int, code: str, message: str, reply: Any = None) -> None:
        super().__init__(f"{status} {code}: {message}" if status else message)
        self.status = status
        self.code = code
        self.message = message
        self.reply = reply  # the decoded error reply (a 409 step_recorded carries its step)


class WorkronWarning(UserWarning):
    """What the server ignored in a request it accepted: a submit's or a
    schedule's unknown fields (``unknown field "priorty"``, in a batch
    ``unknown field "jobs[1].priorty"``), which it takes for compatibility
    but names in the reply's ``warnings``. The client issues one with
    ``warnings.warn`` per reply that names any (all of them, one a line);
    ``warnings.simplefilter("error", WorkronWarning)`` makes a typo raise
    (after the server accepted the request)."""


def _warn(reply: Any) -> None:
    """Issues one WorkronWarning for the warnings of a reply, if any, at
    the caller of the Client method that received it."""
    ws = reply.get("warnings") if isinstance(reply, dict) else None
    if ws:
        warnings.warn(WorkronWarning("the server ignored: " + "; ".join(str(w) for w in ws)), stacklevel=3)


def go_duration(d: Optional[Duration]) -> Optional[str]:
    """Returns d as a Go duration ("90s"): a string passes through, numbers
    are seconds."""
    if d is None or isinstance(d, str):
        return d
    if isinstance(d, _dt.timedelta):
        d = d.total_seconds()
    ms = int(round(float(d) * 1000))
    return f"{ms}ms"


def parse_go_duration(s: Optional[str]) -> Optional[float]:
    """Returns the seconds of a Go duration like "1h2m3.5s", or None."""
    if not s:
        return None
    units = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    total, num, i = 0.0, "", 0
    while i < len(s):
        c = s[i]
        if c.isdigit() or c == ".":
            num += c
            i += 1
            continue
        unit = c
        i += 1
        while i < len(s) and not (s[i].isdigit() or s[i] == "."):
            unit += s[i]
            i += 1
        if unit not in units or not num:
            raise ValueError(f"{s!r} is not a Go duration")
        total += float(num) * units[unit]
        num = ""
    if num and float(num) != 0:
        raise ValueError(f"{s!r} is not a Go duration")
    return total


def _parse_time(v: Any) -> Optional[_dt.datetime]:
    """Parses the server's RFC 3339 times (nanoseconds, "Z") on Python 3.9."""
    if not v:
        return None
    s = str(v).replace("Z", "+00:00")
    date, sep, rest = s.partition(".")
    if sep:
        frac = ""
        while rest and rest[0].isdigit():
            frac, rest = frac + rest[0], rest[1:]
        s = date + "." + (frac + "000000")[:6] + rest
    return _dt.datetime.fromisoformat(s)


def _format_time(t: Union[str, _dt.datetime, None]) -> Optional[str]:
    if t is None or isinstance(t, str):
        return t
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.timezone.utc)
    return t.isoformat()


def _read_bounded(resp: http.client.HTTPResponse, limit: int) -> bytes:
    """Reads a reply's body, but no more than limit + 1 bytes (one more
    says it is too long)."""
    buf = bytearray()
    while len(buf) <= limit:
        chunk = resp.read(min(1 << 20, limit + 1 - len(buf)))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def _drop_none(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def _nested(v: Any) -> Any:
    """A Backoff or Resources as JSON; a dict (or None) as it is."""
    return v.to_dict() if hasattr(v, "to_dict") else v


@dataclass
class Resources:
    """What a worker offers or a job needs."""

    vram_mb: int = 0
    memory_mb: int = 0
    cpu_millis: int = 0
    slots: int = 0

    def to_dict(self) -> Dict[str, Any]:
        return {"vram_mb": self.vram_mb, "memory_mb": self.memory_mb,
                "cpu_millis": self.cpu_millis, "slots": self.slots}

    @classmethod
    def from_dict(cls, d: Optional[Dict[str, Any]]) -> Optional["Resources"]:
        if d is None:
            return None
        return cls(**{f.name: int(d.get(f.name, 0)) for f in fields(cls)})


@dataclass
class Backoff:
    """The delay before a retry: min(base*2^(n-1), max) plus up to jitter
    times that."""

    base: Optional[Duration] = None
    max: Optional[Duration] = None
    jitter: Optional[float] = None

    def to_dict(self) -> Dict[str, Any]:
        return _drop_none({"base": go_duration(self.base), "max": go_duration(self.max), "jitter": self.jitter})


@dataclass
class JobSpec:
    """Every field of a submit (docs/api.md, "Submit fields"). Durations are Go
    duration strings or seconds; run_at a datetime (UTC if naive) or an RFC
    3339 string; payload any JSON value."""

    command: Optional[str] = None
    type: Optional[str] = None
    payload: Any = None
    env: Optional[Dict[str, str]] = None
    depends_on: Optional[List[str]] = None
    max_attempts: Optional[int] = None
    queue: Optional[str] = None
    priority: Optional[int] = None
    idempotency_key: Optional[str] = None
    timeout: Optional[Duration] = None
    run_at: Union[str, _dt.datetime, None] = None
    delay: Optional[Duration] = None
    backoff: Union[Backoff, Dict[str, Any], None] = None
    metadata: Optional[Dict[str, str]] = None
    retention: Optional[Duration] = None
    unique_for: Optional[Duration] = None
    resources: Union[Resources, Dict[str, Any], None] = None
    tags: Optional[List[str]] = None
    gang_size: Optional[int] = None
    concurrency_key: Optional[str] = None

    def to_dict(self) -> Dict[str, Any]:
        return _drop_none({
            "command": self.command,
            "type": self.type,
            "payload": self.payload,
            "env": self.env,
            "depends_on": self.depends_on,
            "max_attempts": self.max_attempts,
            "queue": self.queue,
            "priority": self.priority,
            "idempotency_key": self.idempotency_key,
            "timeout": go_duration(self.timeout),
            "run_at": _format_time(self.run_at),
            "delay": go_duration(self.delay),
            "backoff": _nested(self.backoff),
            "metadata": self.metadata,
            "retention": go_duration(self.retention),
            "unique_for": go_duration(self.unique_for),
            "resources": _nested(self.resources),
            "tags": self.tags,
            "gang_size": self.gang_size,
            "concurrency_key": self.concurrency_key,
        })


# A job to submit: a JobSpec, or a plain dict of the same fields as the API's
# JSON names them (docs/api.md, "Submit fields").
Spec = Union[JobSpec, Mapping[str, Any]]

_SPEC_FIELDS = frozenset(f.name for f in fields(JobSpec))


def job_body(spec: Spec) -> Dict[str, Any]:
    """Returns the JSON body of one job to submit. A JobSpec gives its
    to_dict(); a plain dict is read as a JobSpec's fields (durations in
    seconds, run_at a datetime, backoff and resources as objects or
    dicts), and any key a JobSpec does not name (max_retries, a field of a
    newer server) is sent as it is, for the server to judge."""
    if isinstance(spec, JobSpec):
        return spec.to_dict()
    if not isinstance(spec, Mapping):
        raise TypeError(f"a job is a JobSpec or a dict of its fields, not {type(spec).__name__}")
    body = {k: v for k, v in spec.items() if k not in _SPEC_FIELDS}
    body.update(JobSpec(**{k: v for k, v in spec.items() if k in _SPEC_FIELDS}).to_dict())
    return body


@dataclass
class Attempt:
    """How one finished attempt of a job ended."""

    attempt: int
    status: str
    lease: int = 0
    worker_id: str = ""
    exit_code: Optional[int] = None
    error: str = ""
    started_at: Optional[_dt.datetime] = None
    ended_at: Optional[_dt.datetime] = None
    expired: bool = False

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Attempt":
        return cls(attempt=d.get("attempt", 0), status=d.get("status", ""), lease=d.get("lease", 0),
                   worker_id=d.get("worker_id", ""), exit_code=d.get("exit_code"), error=d.get("error", ""),
                   started_at=_parse_time(d.get("started_at")), ended_at=_parse_time(d.get("ended_at")),
                   expired=bool(d.get("expired", False)))


FINISHED = ("done", "failed", "cancelled")

# Limits of progress and results (docs/scheduling.md, "Progress and results").
MAX_PROGRESS_MESSAGE = 200
MAX_RESULT_BYTES = 64 << 10
# The most bytes of a reply the client reads (the server bounds its replies
# well below this; a longer one raises WorkronError "reply_too_large").
MAX_REPLY_BYTES = 64 << 20


@dataclass
class Progress:
    """How far a job's running (or last) attempt said it was: percent from 0
    to 100, a short message, and when the cluster recorded it."""

    percent: int
    message: str = ""
    at: Optional[_dt.datetime] = None

    @classmethod
    def from_dict(cls, d: Optional[Dict[str, Any]]) -> Optional["Progress"]:
        if not d:
            return None
        return cls(percent=int(d.get("percent", 0)), message=d.get("message", ""), at=_parse_time(d.get("at")))


def trace_headers(traceparent: Optional[str]) -> Optional[Dict[str, str]]:
    """The traceparent header for a W3C trace context (None: none)."""
    return {"traceparent": traceparent} if traceparent else None


@dataclass
class Job:
    """A job as the API shows it; ``raw`` holds the whole JSON object,
    including fields this version does not name."""

    id: str
    status: str
    queue: str = "default"
    priority: int = 0
    attempts: int = 0
    max_attempts: int = 0
    command: str = ""
    type: str = ""
    payload: Any = None
    env: Dict[str, str] = field(default_factory=dict)
    metadata: Dict[str, str] = field(default_factory=dict)
    depends_on: List[str] = field(default_factory=list)
    tags: List[str] = field(default_factory=list)
    resources: Optional[Resources] = None
    idempotency_key: str = ""
    timeout: str = ""
    created_at: Optional[_dt.datetime] = None
    run_at: Optional[_dt.datetime] = None
    started_at: Optional[_dt.datetime] = None
    done_at: Optional[_dt.datetime] = None
    worker_id: str = ""
    lease: int = 0
    lease_expires_at: Optional[_dt.datetime] = None
    exit_code: Optional[int] = None
    output: str = ""
    last_error: str = ""
    attempt_history: List[Attempt] = field(default_factory=list)
    schedule: str = ""
    gang_id: str = ""
    unschedulable: str = ""
    traceparent: str = ""
    progress: Optional[Progress] = None
    result: Any = None  # the JSON the job returned, None when none
    parent_results: Dict[str, Any] = field(default_factory=dict)  # in a claim reply only
    # In a claim reply only: parent_results may lack some parents' results
    # (a claim carries a bounded amount); Client.fetch_parent_results reads
    # the rest from parent_results_cursor.
    parent_results_truncated: bool = False
    parent_results_cursor: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def finished(self) -> bool:
        """True once the job is done, failed or cancelled."""
        return self.status in FINISHED

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Job":
        return cls(
            id=d["id"], status=d.get("status", ""), queue=d.get("queue", ""), priority=d.get("priority", 0),
            attempts=d.get("attempts", 0), max_attempts=d.get("max_attempts", 0), command=d.get("command", ""),
            type=d.get("type", ""), payload=d.get("payload"), env=d.get("env") or {},
            metadata=d.get("metadata") or {}, depends_on=d.get("depends_on") or [], tags=d.get("tags") or [],
            resources=Resources.from_dict(d.get("resources")), idempotency_key=d.get("idempotency_key", ""),
            timeout=d.get("timeout", ""), created_at=_parse_time(d.get("created_at")),
            run_at=_parse_time(d.get("run_at")), started_at=_parse_time(d.get("started_at")),
            done_at=_parse_time(d.get("done_at")), worker_id=d.get("worker_id", ""), lease=d.get("lease", 0),
            lease_expires_at=_parse_time(d.get("lease_expires_at")), exit_code=d.get("exit_code"),
            output=d.get("output", ""), last_error=d.get("last_error", ""),
            attempt_history=[Attempt.from_dict(a) for a in d.get("attempt_history") or []],
            schedule=d.get("schedule", ""), gang_id=d.get("gang_id", ""), unschedulable=d.get("unschedulable", ""),
            progress=Progress.from_dict(d.get("progress")), result=d.get("result"),
            parent_results=d.get("parent_results") or {},
            parent_results_truncated=bool(d.get("parent_results_truncated", False)),
            parent_results_cursor=d.get("parent_results_cursor", ""), traceparent=d.get("traceparent", ""), raw=d,
        )


@dataclass
class JobList:
    """One page of GET /jobs, newest first; pass next_cursor back as cursor
    (empty on the last page). ``partial`` says the page ended before it was
    full because the server's scan budget ran out (a filter with no indexed
    term), not because the jobs did: more may match from next_cursor on.
    ``scanned`` is how many jobs the server examined for the page."""

    jobs: List[Job]
    next_cursor: str = ""
    scanned: int = 0
    partial: bool = False


@dataclass
class JobCount:
    """The reply of GET /jobs/count: how many jobs the conditions keep, by
    the status the API shows. When ``exact`` is False the count ran out of
    its budget at ``next_cursor``: count again from there and add up
    (``Client.count_all`` does)."""

    count: int
    by_status: Dict[str, int] = field(default_factory=dict)
    exact: bool = True
    scanned: int = 0
    next_cursor: str = ""

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "JobCount":
        return cls(count=int(d.get("count", 0)), by_status=dict(d.get("by_status") or {}),
                   exact=bool(d.get("exact", False)), scanned=int(d.get("scanned", 0)),
                   next_cursor=d.get("next_cursor", ""))


@dataclass
class Bulk:
    """A bulk action (docs/api.md, "Bulk actions"): ``action`` (cancel, retry,
    delete or priority) for every job its filters (``selector``) matched.
    ``state`` is running until its walk ends (done) or it is stopped.
    ``matched`` counts the jobs the walk chose so far; each is then ``done``
    (the action applied), ``skipped`` (it no longer qualified) or
    ``failed`` (``last_error`` says the last refusal)."""

    id: str
    action: str
    state: str
    selector: str = ""
    priority: Optional[int] = None
    matched: int = 0
    done: int = 0
    failed: int = 0
    skipped: int = 0
    last_error: str = ""
    created_at: Optional[_dt.datetime] = None
    updated_at: Optional[_dt.datetime] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def running(self) -> bool:
        return self.state == "running"

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Bulk":
        return cls(id=d.get("id", ""), action=d.get("action", ""), state=d.get("state", ""),
                   selector=d.get("selector", ""), priority=d.get("priority"), matched=int(d.get("matched", 0)),
                   done=int(d.get("done", 0)), failed=int(d.get("failed", 0)), skipped=int(d.get("skipped", 0)),
                   last_error=d.get("last_error", ""), created_at=_parse_time(d.get("created_at")),
                   updated_at=_parse_time(d.get("updated_at")), raw=d)


@dataclass
class BulkCount:
    """The reply of a bulk dry run: how many jobs the filters match now;
    ``exact`` is False when counting stopped at its budget (``matched`` at
    least)."""

    matched: int
    exact: bool = True


@dataclass
class Queue:
    """A queue's counts by status, paused flag and how long its oldest
    runnable job has waited."""

    name: str
    paused: bool = False
    counts: Dict[str, int] = field(default_factory=dict)
    oldest_pending_seconds: float = 0.0

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Queue":
        return cls(name=d.get("name", ""), paused=bool(d.get("paused", False)), counts=d.get("counts") or {},
                   oldest_pending_seconds=float(d.get("oldest_pending_seconds", 0.0)))


@dataclass
class Schedule:
    """A cron schedule (docs/scheduling.md, "Schedules"); ``job`` is its job template as
    the server returned it."""

    name: str
    cron: str
    timezone: str = ""
    job: Dict[str, Any] = field(default_factory=dict)
    overlap: str = ""
    catchup: str = ""
    paused: bool = False
    next_run: Optional[_dt.datetime] = None
    last_run: Optional[_dt.datetime] = None
    last_job_id: str = ""
    last_job_status: str = ""
    last_error: str = ""
    runs: int = 0
    skipped: int = 0
    missed: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Schedule":
        return cls(name=d.get("name", ""), cron=d.get("cron", ""), timezone=d.get("timezone", ""),
                   job=d.get("job") or {}, overlap=d.get("overlap", ""), catchup=d.get("catchup", ""),
                   paused=bool(d.get("paused", False)), next_run=_parse_time(d.get("next_run")),
                   last_run=_parse_time(d.get("last_run")), last_job_id=d.get("last_job_id", ""),
                   last_job_status=d.get("last_job_status", ""), last_error=d.get("last_error", ""),
                   runs=d.get("runs", 0), skipped=d.get("skipped", 0), missed=d.get("missed", 0), raw=d)


class Abort:
    """Lets another thread cut a request short (the worker's long-poll at
    shutdown): abort() closes its connection, and the request raises."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conn: Optional[http.client.HTTPConnection] = None
        self.aborted = False

    def _attach(self, conn: Optional[http.client.HTTPConnection]) -> None:
        with self._lock:
            if self.aborted and conn is not None:
                raise WorkronError(0, "aborted", "request aborted")
            self._conn = conn

    def abort(self) -> None:
        with self._lock:
            self.aborted = True
            conn = self._conn
        if conn is not None and conn.sock is not None:
            try:
                conn.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


# DEFAULT_SERVERS are the nodes a Client or Worker given no servers (and no
# WORKRON_SERVER) tries, in order, as the CLI does: the dev node (`workron
# dev`), then the three nodes of `scripts/cluster.sh up`, so both quick
# starts work without configuration. A node that refuses the connection is
# skipped at once. python_test.go checks the list is the CLI's.
DEFAULT_SERVERS = ("http://127.0.0.1:7070", "http://127.0.0.1:7001", "http://127.0.0.1:7002",
                   "http://127.0.0.1:7003")


def default_servers() -> List[str]:
    """The nodes to try when none are given: WORKRON_SERVER (comma-separated
    URLs) when set, else DEFAULT_SERVERS."""
    env = os.environ.get("WORKRON_SERVER", "")
    return [s for s in env.split(",") if s] or list(DEFAULT_SERVERS)


class Client:
    """A client of a Workron cluster.

    ``servers`` is one URL or several ("http://127.0.0.1:7001"), by default
    ``default_servers()``: WORKRON_SERVER, else the quick starts' nodes, as
    for the CLI; ``token``
    the bearer token (with --auth-token-file), or ``token_file`` a file
    holding it, by default the environment's WORKRON_TOKEN; ``tls_ca`` a PEM
    file trusted for https:// besides the system's CAs, by default
    WORKRON_TLS_CA; ``timeout`` the seconds one request may take.
    ``stale_reads`` makes every read (GET of jobs, gangs, workers, queues,
    pauses and schedules) ask for the answering node's state as it is
    (``?stale=1``): it answers during an election and costs the leader
    nothing, but may miss the latest writes. By default reads are
    consistent: they see every write acknowledged before them (docs/api.md,
    Reads on any node).
    """

    def __init__(self, servers: Union[str, Sequence[str], None] = None, *, token: Optional[str] = None,
                 token_file: Optional[str] = None, tls_ca: Optional[str] = None,
                 timeout: float = 30.0, stale_reads: bool = False) -> None:
        if token is None and token_file:
            with open(token_file) as f:
                token = f.read().strip()
        if token is None:
            token = os.environ.get("WORKRON_TOKEN") or None
        if tls_ca is None:
            tls_ca = os.environ.get("WORKRON_TLS_CA") or None
        if servers is None:
            servers = default_servers()
        elif isinstance(servers, str):
            servers = [s for s in servers.split(",") if s]
        if not servers:
            raise ValueError("servers: give at least one URL")
        self._servers = [s.rstrip("/") for s in servers]
        for s in self._servers:
            if urllib.parse.urlsplit(s).scheme not in ("http", "https"):
                raise ValueError(f"servers: {s!r} is not an http:// or https:// URL")
        self._token = token
        self._timeout = timeout
        self._ssl = ssl.create_default_context()
        if tls_ca:
            self._ssl.load_verify_locations(cafile=tls_ca)
        self._stale_reads = stale_reads
        self._current = 0
        self._lock = threading.Lock()

    # ---- transport

    def request(self, method: str, path: str, body: Any = None, *, query: Optional[Dict[str, Any]] = None,
                timeout: Optional[float] = None, abort: Optional[Abort] = None,
                headers: Optional[Dict[str, str]] = None) -> Tuple[int, Any]:
        """Sends one request (body JSON-encoded unless None, or sent as it is
        when bytes, with the extra headers) and returns the status and the
        decoded JSON reply (None when empty). Raises WorkronError for a
        status of 400 or more."""
        extra = headers
        if self._stale_reads and method == "GET" and _is_read(path) and "stale" not in (query or {}):
            query = dict(query or {}, stale=1)
        if query:
            q = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in query.items() if v is not None]
            if q:
                path += "?" + urllib.parse.urlencode(q)
        raw = isinstance(body, (bytes, bytearray))
        data = None if body is None else bytes(body) if raw else json.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/octet-stream" if raw else "application/json"
        if self._token:
            headers["Authorization"] = "Bearer " + self._token
        headers.update(extra or {})
        tries = 3 * len(self._servers)
        last: Optional[WorkronError] = None
        for i in range(tries):
            with self._lock:
                idx = self._current
            try:
                return self._send(self._servers[idx], method, path, data, headers, timeout or self._timeout, abort)
            except _Retryable as e:
                last = e.err
                with self._lock:
                    if self._current == idx:
                        self._current = (idx + 1) % len(self._servers)
                if abort is not None and abort.aborted:
                    break
                if i + 1 < tries and (i + 1) % len(self._servers) == 0:
                    time.sleep(min(e.retry_after, 2.0))
        assert last is not None
        raise last

    def _send(self, server: str, method: str, path: str, data: Optional[bytes], headers: Dict[str, str],
              timeout: float, abort: Optional[Abort]) -> Tuple[int, Any]:
        u = urllib.parse.urlsplit(server)
        conn: http.client.HTTPConnection
        if u.scheme == "https":
            conn = http.client.HTTPSConnection(u.hostname or "", u.port, timeout=timeout, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=timeout)
        try:
            try:
                conn.connect()
            except OSError as e:  # nothing was sent: another node may serve it
                raise _Retryable(WorkronError(0, "unreachable", f"{server}: {e}"), 0.1) from e
            if abort is not None:
                abort._attach(conn)
            try:
                conn.request(method, (u.path or "") + path, body=data, headers=headers)
                resp = conn.getresponse()
                raw = _read_bounded(resp, MAX_REPLY_BYTES)
            except (OSError, http.client.HTTPException) as e:
                raise WorkronError(0, "outcome_unknown", f"{method} {server}{path}: no whole reply: {e!r}") from e
            finally:
                if abort is not None:
                    abort._attach(None)
        finally:
            conn.close()
        if len(raw) > MAX_REPLY_BYTES:
            raise WorkronError(resp.status, "reply_too_large",
                               f"{method} {server}{path}: the reply is over {MAX_REPLY_BYTES} bytes")
        reply: Any = None
        if raw:
            try:
                reply = json.loads(raw)
            except ValueError:
                reply = raw.decode("utf-8", "replace")
        if resp.status >= 400:
            code, msg = "", str(reply)
            if isinstance(reply, dict):
                code, msg = reply.get("code", ""), reply.get("error", "")
            err = WorkronError(resp.status, code, msg, reply)
            if resp.status == 503:
                try:
                    ra = float(resp.getheader("Retry-After") or 1)
                except ValueError:
                    ra = 1.0
                raise _Retryable(err, ra)
            raise err
        return resp.status, reply

    # ---- jobs

    def submit(self, spec: Optional[Spec] = None, *, traceparent: Optional[str] = None, **fields_: Any) -> Job:
        """Submits one job: a JobSpec, a dict of its fields, or its fields as
        keywords (``submit(command="echo hi", queue="q")``). Returns the job (the
        existing one when its idempotency_key matched). For a gang_size,
        use submit_gang. traceparent (a W3C trace context, e.g. a job's
        own TRACEPARENT) makes the job's trace a part of that trace."""
        body = job_body(spec if spec is not None else fields_)
        _, reply = self.request("POST", "/jobs", body, headers=trace_headers(traceparent))
        _warn(reply)
        return Job.from_dict(reply)

    def submit_gang(self, spec: Spec) -> Tuple[str, List[str]]:
        """Submits a gang (spec.gang_size tasks); returns its id and its
        tasks' job ids by index."""
        _, reply = self.request("POST", "/jobs", job_body(spec))
        _warn(reply)
        return reply["gang_id"], list(reply["tasks"])

    def batch(self, specs: Sequence[Spec], *, traceparent: Optional[str] = None) -> List[Job]:
        """Submits up to 1,000 jobs (JobSpecs or dicts of their fields) at
        once, all or nothing; depends_on may
        name earlier members as "$0", "$1"... Returns them in order.
        traceparent is as for submit."""
        _, reply = self.request("POST", "/jobs/batch", {"jobs": [job_body(s) for s in specs]},
                                headers=trace_headers(traceparent))
        _warn(reply)
        return [Job.from_dict(j) for j in reply["jobs"]]

    def batch_ids(self, specs: Sequence[Spec], *, traceparent: Optional[str] = None) -> List[str]:
        """batch that returns only the jobs' ids, in order: it asks for the
        server's minimal reply (Prefer: return=minimal), about a dozen
        bytes a job to read instead of a few hundred. Where an idempotency_key matched
        a retained job, the id is that job's, as batch would return it. From
        a server that answers the jobs anyway (an older release), it returns
        their ids."""
        headers = dict(trace_headers(traceparent) or {})
        headers["Prefer"] = "return=minimal"
        _, reply = self.request("POST", "/jobs/batch", {"jobs": [job_body(s) for s in specs]}, headers=headers)
        _warn(reply)
        if "ids" in reply:
            return list(reply["ids"])
        return [j["id"] for j in reply["jobs"]]

    def get(self, job_id: str) -> Job:
        """Returns the job; WorkronError 404 when there is none."""
        _, reply = self.request("GET", "/jobs/" + urllib.parse.quote(job_id, safe=""))
        return Job.from_dict(reply)

    def list(self, *, filter: Optional[str] = None, status: Optional[str] = None,  # noqa: A002
             queue: Optional[str] = None, metadata: Optional[Dict[str, str]] = None,
             limit: Optional[int] = None, cursor: Optional[str] = None) -> JobList:
        """Returns one page of jobs, newest first, kept by every condition
        given: ``filter`` (an expression of the filter language, docs/api.md
        "Filters", e.g. ``'status == "failed" and metadata["tenant"] ==
        "acme"'``; a bad one raises WorkronError 400 naming its column),
        status, queue and metadata (every pair must match). A page may
        hold fewer than ``limit`` jobs with a next_cursor when the server's
        scan budget ran out first (``partial``): ask again from next_cursor
        (iter_jobs does)."""
        _, reply = self.request("GET", "/jobs", query=_job_query(filter, status, queue, metadata, cursor, limit))
        return JobList([Job.from_dict(j) for j in reply.get("jobs") or []], reply.get("next_cursor", ""),
                       int(reply.get("scanned", 0)), bool(reply.get("partial", False)))

    def count(self, *, filter: Optional[str] = None, status: Optional[str] = None,  # noqa: A002
              queue: Optional[str] = None, metadata: Optional[Dict[str, str]] = None,
              cursor: Optional[str] = None) -> JobCount:
        """Counts the jobs the conditions of list keep, by status (GET
        /jobs/count), in one request: a count that is not ``exact`` covers
        the jobs up to its next_cursor. count_all adds up the rest."""
        _, reply = self.request("GET", "/jobs/count", query=_job_query(filter, status, queue, metadata, cursor, None))
        return JobCount.from_dict(reply)

    def count_all(self, *, filter: Optional[str] = None, status: Optional[str] = None,  # noqa: A002
                  queue: Optional[str] = None, metadata: Optional[Dict[str, str]] = None) -> JobCount:
        """count, asked again from each next_cursor until exact, the counts
        added up (as ``workron jobs count`` does): an exact count of every
        job the conditions keep."""
        total = JobCount(count=0, exact=False)
        cursor: Optional[str] = None
        while True:
            c = self.count(filter=filter, status=status, queue=queue, metadata=metadata, cursor=cursor)
            total.count += c.count
            total.scanned += c.scanned
            for k, v in c.by_status.items():
                total.by_status[k] = total.by_status.get(k, 0) + v
            if c.exact or not c.next_cursor:
                total.exact = True
                return total
            cursor = c.next_cursor

    def iter_jobs(self, **filters: Any) -> Iterator[Job]:
        """Yields every job matching the filters of list, page after page."""
        cursor = filters.pop("cursor", None)
        while True:
            page = self.list(cursor=cursor, **filters)
            yield from page.jobs
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def wait(self, job_id: str, *, timeout: Optional[float] = None, poll: float = 0.5,
             on_progress: Optional[Callable[[Job], None]] = None) -> Job:
        """Polls the job until it is done, failed or cancelled and returns
        it. on_progress is called with the job whenever its status, attempt
        count or progress (job.progress) changes. Raises TimeoutError after
        timeout seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        seen: Optional[Tuple[str, int, Any]] = None
        while True:
            job = self.get(job_id)
            p = job.progress
            now = (job.status, job.attempts, (p.percent, p.message) if p else None)
            if on_progress is not None and now != seen:
                seen = now
                on_progress(job)
            if job.finished:
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} still {job.status} after {timeout}s")
            time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic())))

    def cancel(self, job_id: str, *, cascade: bool = True) -> Job:
        """Cancels a pending or blocked job (its dependents too unless
        cascade is False); a running one becomes cancelling. 409 when
        finished."""
        return self._job_action(job_id, "cancel", cascade)

    def retry(self, job_id: str, *, cascade: bool = True) -> Job:
        """Sends a failed or cancelled job back to pending with a fresh
        attempt budget (and its dependents back to blocked unless cascade is
        False)."""
        return self._job_action(job_id, "retry", cascade)

    def _job_action(self, job_id: str, action: str, cascade: bool) -> Job:
        q = None if cascade else {"cascade": "false"}
        _, reply = self.request("POST", f"/jobs/{urllib.parse.quote(job_id, safe='')}/{action}", query=q)
        return Job.from_dict(reply)

    # ---- bulk actions

    def count_bulk(self, action: str, *, filter: Optional[str] = None,  # noqa: A002
                   status: Optional[str] = None, queue: Optional[str] = None,
                   metadata: Optional[Dict[str, str]] = None, priority: Optional[int] = None) -> BulkCount:
        """Counts the jobs a bulk action with these filters would act on now
        (POST /bulk with dry_run) and starts nothing: the count to confirm
        before start_bulk."""
        body = _bulk_body(action, filter, status, queue, metadata, priority)
        body["dry_run"] = True
        _, reply = self.request("POST", "/bulk", body)
        return BulkCount(matched=int(reply.get("matched", 0)), exact=bool(reply.get("exact", False)))

    def start_bulk(self, action: str, *, filter: Optional[str] = None,  # noqa: A002
                   status: Optional[str] = None, queue: Optional[str] = None,
                   metadata: Optional[Dict[str, str]] = None, priority: Optional[int] = None) -> Bulk:
        """Starts a bulk action (POST /bulk): ``action`` ("cancel", "retry",
        "delete" or "priority", which needs ``priority``) for every job the
        filters match (the conditions of list, all must hold, at least one
        given), applied by the leader in chunks from the newest job down,
        across leader changes. Returns the action; get_bulk shows its
        progress. A bad field raises WorkronError 400 naming it, a fifth
        running action 409. Like every write, it is not resent once it may
        have reached a node."""
        _, reply = self.request("POST", "/bulk", _bulk_body(action, filter, status, queue, metadata, priority))
        return Bulk.from_dict(reply)

    def get_bulk(self, bulk_id: str) -> Bulk:
        """Returns a bulk action with its progress; WorkronError 404 when
        there is none (or it is no longer kept)."""
        _, reply = self.request("GET", "/bulk/" + urllib.parse.quote(bulk_id, safe=""))
        return Bulk.from_dict(reply)

    def bulks(self) -> List[Bulk]:
        """Returns the bulk actions the cluster keeps (the last 100), newest
        first."""
        _, reply = self.request("GET", "/bulk")
        return [Bulk.from_dict(b) for b in reply.get("bulks") or []]

    def stop_bulk(self, bulk_id: str) -> Bulk:
        """Stops a running bulk action before its next chunk (POST
        /bulk/{id}/stop) and returns it; stopping one that ended changes
        nothing."""
        _, reply = self.request("POST", "/bulk/" + urllib.parse.quote(bulk_id, safe="") + "/stop", {})
        return Bulk.from_dict(reply)

    def wait_bulk(self, bulk_id: str, *, timeout: Optional[float] = None, poll: float = 0.5) -> Bulk:
        """Polls a bulk action until it is no longer running and returns it.
        Raises TimeoutError after timeout seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            b = self.get_bulk(bulk_id)
            if not b.running:
                return b
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"bulk action {bulk_id} still running after {timeout}s ({b.matched} matched)")
            time.sleep(poll if deadline is None else max(0.0, min(poll, deadline - time.monotonic())))

    # ---- queues and workers

    def queues(self) -> List[Queue]:
        """Returns every queue with its counts, following GET /queues' pages."""
        return self._follow_pages(self.queues_page)

    def queues_page(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> Tuple[List[Queue], str]:
        """Returns one page of queues by name (limit: the server's default,
        100, up to 1000) after cursor, and the cursor of the next page (""
        after the last)."""
        reply = self._page("/queues", limit, cursor)
        return [Queue.from_dict(q) for q in reply.get("queues") or []], reply.get("next_cursor", "")

    def pause_queue(self, name: str) -> None:
        """Stops claims from the queue (admin role)."""
        self.request("POST", f"/queues/{urllib.parse.quote(name, safe='')}/pause")

    def resume_queue(self, name: str) -> None:
        """Restarts claims from the queue (admin role)."""
        self.request("POST", f"/queues/{urllib.parse.quote(name, safe='')}/resume")

    def workers(self) -> List[Dict[str, Any]]:
        """Returns every worker the cluster knows, as JSON objects, following
        GET /workers' pages."""
        return self._follow_pages(self.workers_page)

    def workers_page(self, *, limit: Optional[int] = None,
                     cursor: Optional[str] = None) -> Tuple[List[Dict[str, Any]], str]:
        """Returns one page of workers by id (limit: the server's default,
        100, up to 1000) after cursor, and the cursor of the next page (""
        after the last)."""
        reply = self._page("/workers", limit, cursor)
        return list(reply.get("workers") or []), reply.get("next_cursor", "")

    def _page(self, path: str, limit: Optional[int], cursor: Optional[str]) -> Dict[str, Any]:
        _, reply = self.request("GET", path, query=_drop_none({"limit": limit, "cursor": cursor or None}))
        return reply

    @staticmethod
    def _follow_pages(page: Callable[..., Tuple[List[Any], str]]) -> List[Any]:
        """Reads pages of 1000 from the first to the last; a cursor answered
        twice ends the walk rather than loop."""
        out: List[Any] = []
        cursor = ""
        while True:
            items, nxt = page(limit=1000, cursor=cursor or None)
            out.extend(items)
            if not nxt or nxt == cursor:
                return out
            cursor = nxt

    # ---- schedules

    def create_schedule(self, name: str, cron: str, job: Spec, *, timezone: Optional[str] = None,
                        overlap: Optional[str] = None, catchup: Optional[str] = None,
                        paused: bool = False) -> Schedule:
        """Creates a schedule (409 if the name is taken)."""
        body = _drop_none({"name": name, "cron": cron, "job": job_body(job), "timezone": timezone,
                           "overlap": overlap, "catchup": catchup, "paused": paused or None})
        _, reply = self.request("POST", "/schedules", body)
        _warn(reply)
        return Schedule.from_dict(reply)

    def update_schedule(self, name: str, cron: str, job: Spec, *, timezone: Optional[str] = None,
                        overlap: Optional[str] = None, catchup: Optional[str] = None,
                        paused: bool = False) -> Schedule:
        """Replaces a schedule's definition."""
        body = _drop_none({"name": name, "cron": cron, "job": job_body(job), "timezone": timezone,
                           "overlap": overlap, "catchup": catchup, "paused": paused or None})
        _, reply = self.request("PUT", self._schedule_path(name), body)
        _warn(reply)
        return Schedule.from_dict(reply)

    def get_schedule(self, name: str) -> Schedule:
        _, reply = self.request("GET", self._schedule_path(name))
        return Schedule.from_dict(reply)

    def schedules(self) -> List[Schedule]:
        """Returns every schedule, following GET /schedules' pages."""
        return self._follow_pages(self.schedules_page)

    def schedules_page(self, *, limit: Optional[int] = None,
                       cursor: Optional[str] = None) -> Tuple[List[Schedule], str]:
        """Returns one page of schedules by name (limit: the server's
        default, 100, up to 1000) after cursor, and the cursor of the next
        page ("" after the last)."""
        reply = self._page("/schedules", limit, cursor)
        return [Schedule.from_dict(s) for s in reply.get("schedules") or []], reply.get("next_cursor", "")

    def delete_schedule(self, name: str) -> None:
        self.request("DELETE", self._schedule_path(name))

    def pause_schedule(self, name: str) -> Schedule:
        _, reply = self.request("POST", self._schedule_path(name) + "/pause")
        return Schedule.from_dict(reply)

    def resume_schedule(self, name: str) -> Schedule:
        _, reply = self.request("POST", self._schedule_path(name) + "/resume")
        return Schedule.from_dict(reply)

    def trigger_schedule(self, name: str) -> Job:
        """Runs the schedule's job now, outside its cron; returns the job."""
        _, reply = self.request("POST", self._schedule_path(name) + "/trigger")
        return Job.from_dict(reply)

    @staticmethod
    def _schedule_path(name: str) -> str:
        return "/schedules/" + urllib.parse.quote(name, safe="")

    # ---- the worker protocol (used by Worker; see docs/workers.md)

    def register(self, worker_id: str, *, queues: Sequence[str] = (), tags: Sequence[str] = (),
                 resources: Optional[Resources] = None, exec_addr: str = "") -> None:
        """Registers (again) a worker with what it offers; exec_addr is where
        its gang peers reach it (their GANG_PEERS)."""
        body: Dict[str, Any] = {"id": worker_id, "resources": (resources or Resources()).to_dict()}
        if exec_addr:
            body["exec_addr"] = exec_addr
        if queues:
            body["queues"] = list(queues)
        if tags:
            body["tags"] = list(tags)
        self.request("POST", "/workers/register", body)

    def claim(self, worker_id: str, *, types: Sequence[str], shell: bool = False, queues: Sequence[str] = (),
              max: int = 1, wait: Optional[Duration] = None, claim_seq: int = 0,
              reports: Optional[List[Dict[str, Any]]] = None,
              abort: Optional[Abort] = None) -> Tuple[List[Job], int, List[Dict[str, Any]]]:
        """Claims up to max jobs of the types, and shell-command jobs with
        shell (long-polling up to wait); reports (as for reports()) end
        attempts in the same round trip. Returns the jobs, the lease TTL in
        milliseconds and the reports' answers."""
        body = _drop_none({"worker_id": worker_id, "queues": list(queues) or None, "types": list(types),
                           "shell": shell or None, "max": max, "wait": go_duration(wait),
                           "claim_seq": claim_seq or None, "reports": reports or None})
        secs = parse_go_duration(body.get("wait")) or 0.0
        _, reply = self.request("POST", "/jobs/claim", body, timeout=self._timeout + secs, abort=abort)
        return ([Job.from_dict(j) for j in reply.get("jobs") or []], int(reply.get("lease_ttl_ms", 0)),
                list(reply.get("reports") or []))

    def parent_results(self, job_id: str, cursor: str = "", *,
                       limit: Optional[int] = None) -> Tuple[Dict[str, Any], str]:
        """Returns one page of a job's parent results (GET
        /jobs/{id}/parent_results) from cursor on (a claimed job's
        parent_results_cursor, or the cursor of the page before; "" is the
        first parent), at most limit results and a bounded number of bytes,
        and the cursor of the next page ("" after the last)."""
        q = {"cursor": cursor or None, "limit": limit}
        _, reply = self.request("GET", f"/jobs/{urllib.parse.quote(job_id, safe='')}/parent_results", query=q)
        return dict(reply.get("parent_results") or {}), reply.get("next_cursor", "")

    def fetch_parent_results(self, job: Job) -> None:
        """Completes the parent results of a job a claim reply cut short
        (job.parent_results_truncated): reads the rest page by page, then
        sets job.parent_results to a new dict of them all and clears the
        flag and the cursor. A job not cut short costs no request. On an
        error the job is left as it was."""
        if not job.parent_results_truncated:
            return
        results = dict(job.parent_results)
        cursor = job.parent_results_cursor
        # Each page but the last holds a result: a cursor that does not
        # move is stopped.
        for _ in range(len(job.depends_on) + 1):
            page, cursor = self.parent_results(job.id, cursor)
            results.update(page)
            if not cursor:
                break
        else:
            raise WorkronError(0, "invalid_reply", f"parent results of job {job.id}: more pages than parents")
        job.parent_results, job.parent_results_truncated, job.parent_results_cursor = results, False, ""

    def heartbeat_worker(self, worker_id: str, jobs: Sequence[Tuple[str, int]], *, claims_from: int = 0,
                         claims_to: int = 0,
                         progress: Optional[Dict[Tuple[str, int], Tuple[int, str]]] = None) -> Dict[str, Any]:
        """Renews the leases of the (job id, lease) pairs listed; a job a
        claim numbered claims_from..claims_to leased to the worker and not
        listed goes back to pending, its attempt not counted. progress maps
        a listed pair to its attempt's (percent, message), which the cluster
        keeps with the job. Returns the reply ({"renewed", "actions"}, and
        "lost": the listed leases not renewed, each with job_id, lease and
        reason; absent when none)."""
        body: Dict[str, Any] = {"jobs": [_lease_entry(j, lease, (progress or {}).get((j, lease)))
                                         for j, lease in jobs]}
        if claims_to:
            body["claims_from"], body["claims_to"] = claims_from, claims_to
        _, reply = self.request("POST", f"/workers/{urllib.parse.quote(worker_id, safe='')}/heartbeat", body)
        return reply or {}

    def worker_actions(self, worker_id: str, known: Sequence[Tuple[str, int]] = (), *,
                       wait: Optional[Duration] = None, abort: Optional[Abort] = None) -> List[Dict[str, Any]]:
        """Waits up to wait for what the worker must do with its attempts
        (POST /workers/{id}/actions): the cancels and preemptions of the
        attempts it holds other than the (job id, lease) pairs of known,
        returned as soon as there is one ([] when the wait ends first). It
        renews no lease."""
        body = _drop_none({"known": [{"job_id": j, "lease": lease} for j, lease in known] or None,
                           "wait": go_duration(wait)})
        secs = parse_go_duration(body.get("wait")) or 0.0
        _, reply = self.request("POST", f"/workers/{urllib.parse.quote(worker_id, safe='')}/actions", body,
                                timeout=self._timeout + secs, abort=abort)
        return list((reply or {}).get("actions") or [])

    def heartbeat_job(self, job_id: str, lease: int, *,
                      progress: Optional[Tuple[int, str]] = None) -> Dict[str, Any]:
        """Renews one attempt's lease (POST /jobs/{id}/heartbeat), with the
        attempt's (percent, message) progress if given, which the cluster
        keeps with the job. Returns the reply ({"action", "lease_expires_at",
        ...}): action "cancel" when the job was cancelled while running.
        409 stale_lease when the job moved on to another attempt; 400 for a
        bad progress (nothing renewed)."""
        body: Dict[str, Any] = {"lease": lease}
        if progress is not None:
            body["progress"] = _progress_body(progress)
        _, reply = self.request("POST", f"/jobs/{urllib.parse.quote(job_id, safe='')}/heartbeat", body)
        return reply or {}

    def reports(self, reports: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Ends several attempts: each {"job_id", "status": "done"|"failed",
        "lease", "output", "error", "retry", "result"}. Returns one answer per report,
        in order ({"job_id","status"} or {"job_id","error","code"})."""
        _, reply = self.request("POST", "/jobs/reports", {"reports": reports})
        return list(reply.get("results") or [])

    def done(self, job_id: str, lease: int, *, output: str = "", result: Any = None) -> Job:
        """Reports the attempt with this lease done, with its result (any
        JSON value, at most MAX_RESULT_BYTES; None: none); 409 stale_lease
        when the job moved on to another attempt."""
        return self._report(job_id, "done", _drop_none({"lease": lease, "output": output or None, "result": result}))

    def fail(self, job_id: str, lease: int, *, error: str = "", output: str = "", retry: bool = True) -> Job:
        """Reports the attempt with this lease failed (retry False: no more
        attempts); 409 stale_lease when the job moved on."""
        body = _drop_none({"lease": lease, "error": error or None, "output": output or None,
                           "retry": None if retry else False})
        return self._report(job_id, "fail", body)

    def checkpoint(self, job_id: str, epoch: int, data: bytes) -> None:
        """Uploads a preempted gang task's checkpoint for the drain of epoch
        (raw bytes, at most 1 MiB: 413 beyond); it replaces any older one of
        the task, and the task's next attempt gets it as CHECKPOINT_DATA.
        409 stale_epoch when that drain is over. Resending is safe."""
        self.request("POST", f"/jobs/{urllib.parse.quote(job_id, safe='')}/checkpoint", bytes(data),
                     query={"epoch": epoch})

    def preempted(self, job_id: str, epoch: int) -> Job:
        """Acknowledges that a gang task stopped for the drain of epoch; its
        attempt is given back. 409 stale_epoch when that drain is over (or
        this was acknowledged already)."""
        _, reply = self.request("POST", f"/jobs/{urllib.parse.quote(job_id, safe='')}/preempted",
                                query={"epoch": epoch})
        return Job.from_dict(reply)

    def record_step(self, job_id: str, key: str, lease: int, *, result: Any = None, failed: bool = False,
                    attempts: int = 1, duration_ms: int = 0) -> Tuple[Dict[str, Any], bool]:
        """Records step key of the running attempt with this lease (PUT
        /jobs/{id}/steps/{key}; committed before it returns) and returns the
        step as the journal keeps it, and True; or, when the step was
        recorded before, that record (with its result), which the caller
        must use instead, and False. 409 stale_lease when the attempt moved
        on; 409 journal_full at a journal's bound; 413 for a result over
        256 KiB. Resending is safe."""
        body = _drop_none({"lease": lease, "status": "failed" if failed else None, "result": result,
                           "attempts": attempts, "duration_ms": duration_ms or None})
        try:
            _, reply = self.request("PUT", _step_path(job_id, key), body)
        except WorkronError as e:
            if e.code != "step_recorded":
                raise
            return self.step(job_id, key), False
        return dict(reply or {}), True

    def step(self, job_id: str, key: str) -> Dict[str, Any]:
        """Returns one recorded step with its result (GET
        /jobs/{id}/steps/{key}); 404 not_found when it is not recorded."""
        _, reply = self.request("GET", _step_path(job_id, key))
        return dict(reply or {})

    def steps(self, job_id: str, cursor: str = "", *, limit: Optional[int] = None,
              results: bool = False) -> Tuple[List[Dict[str, Any]], str]:
        """Returns one page of a job's journal (GET /jobs/{id}/steps) in key
        order, without results (with results=True, each step with its
        result: the server then also ends a page before 4 MiB of results,
        at least one step), and the cursor of the next page ("" after the
        last)."""
        _, reply = self.request("GET", f"/jobs/{urllib.parse.quote(job_id, safe='')}/steps",
                                query={"cursor": cursor or None, "limit": limit, "results": 1 if results else None})
        return list(reply.get("steps") or []), reply.get("next_cursor", "")

    def sleep_step(self, job_id: str, key: str, lease: int, *, duration: Optional[Duration] = None,
                   until: Union[str, _dt.datetime, None] = None) -> Tuple[Dict[str, Any], bool]:
        """Parks the attempt with this lease on sleep step key (POST
        /jobs/{id}/steps/{key}/sleep): for duration (seconds, a timedelta
        or a Go duration) or until a time (a datetime, UTC if naive, or RFC
        3339), exactly one of them, at most 365 days. Returns the step and
        whether the attempt is parked (ended, uncharged: report nothing; the
        job runs again at the step's wake_at) or, False, the sleep is over
        already. A step recorded before comes back as it is, not parked."""
        if (duration is None) == (until is None):
            raise ValueError("sleep_step: give exactly one of duration and until")
        body: Dict[str, Any] = {"lease": lease}
        if until is not None:
            body["until"] = _format_time(until)
        else:
            body["duration_ms"] = _millis("duration", duration, least=1)
        return self._park_step(job_id, key, "sleep", body)

    def wait_step(self, job_id: str, key: str, lease: int, *, event: Optional[str] = None,
                  event_key: Optional[str] = None, signal: Optional[str] = None,
                  timeout: Optional[Duration] = None) -> Tuple[Dict[str, Any], bool]:
        """Parks the attempt with this lease on wait step key (POST
        /jobs/{id}/steps/{key}/wait) until an event (event and event_key,
        see send_event) or a signal to this job (signal, see signal()) comes,
        or timeout passes (seconds, a timedelta or a Go duration; None or 0:
        no timeout; at most 365 days). An event sent before the wait, within
        the server's look-back window, matches too. Returns the step and
        whether the attempt is parked; not parked, the step is complete:
        status "ok" with the payload as its result, or "timeout"."""
        if (event is None) == (signal is None):
            raise ValueError("wait_step: give exactly one of event (with event_key) and signal")
        body: Dict[str, Any] = {"lease": lease, "timeout_ms": _millis("timeout", timeout) if timeout else 0}
        if event is not None:
            body["event"], body["key"] = event, event_key or ""
        else:
            body["signal"] = signal
        return self._park_step(job_id, key, "wait", body)

    def invoke_step(self, job_id: str, key: str, lease: int, job: Spec) -> Tuple[Dict[str, Any], bool]:
        """Submits job (one job, as for submit) as the child of invoke step
        key, once: its id is fixed by the parent's id and the key, so a
        resend finds the same child (POST /jobs/{id}/steps/{key}/invoke).
        Returns the step (its child_id names the child) and whether the
        attempt is parked until the child ends; not parked, the step is
        complete: status "ok" with the child's result, or "failed" with
        {"status", "error"}."""
        return self._park_step(job_id, key, "invoke", {"lease": lease, "job": job_body(job)})

    def _park_step(self, job_id: str, key: str, kind: str, body: Dict[str, Any]) -> Tuple[Dict[str, Any], bool]:
        """Sends a parking request; a 409 step_recorded gives the step
        recorded before (with its result), not parked."""
        try:
            _, reply = self.request("POST", _step_path(job_id, key) + "/" + kind, body)
        except WorkronError as e:
            step = e.reply.get("step") if e.code == "step_recorded" and isinstance(e.reply, dict) else None
            if not isinstance(step, dict):
                raise
            return dict(step), False
        reply = reply or {}
        return dict(reply.get("step") or {}), bool(reply.get("parked"))

    def send_event(self, name: str, key: str = "", payload: Any = None) -> Dict[str, Any]:
        """Sends an event (POST /events; the submit role): it wakes every job
        waiting for this name and key (wait_step, JobContext.wait_for_event),
        and is kept for the server's look-back window (1 hour by default) for
        waits registered after it. payload is any JSON value, at most 64
        KiB. Returns {"seq", "woke"}: woke is how many waits it satisfied."""
        _, reply = self.request("POST", "/events", {"name": name, "key": key, "payload": payload})
        return dict(reply or {})

    def signal(self, job_id: str, name: str, payload: Any = None) -> Dict[str, Any]:
        """Sends signal name to one job (POST /jobs/{id}/signals/{name}):
        it satisfies the job's wait_for_signal of that name, now or, within
        the look-back window, later. 404 not_found for an unknown job.
        Returns {"seq", "woke"} (woke 0 or 1)."""
        _, reply = self.request("POST", f"/jobs/{urllib.parse.quote(job_id, safe='')}/signals/"
                                        f"{urllib.parse.quote(name, safe='')}", {"payload": payload})
        return dict(reply or {})

    def _report(self, job_id: str, action: str, body: Dict[str, Any]) -> Job:
        _, reply = self.request("POST", f"/jobs/{urllib.parse.quote(job_id, safe='')}/{action}", body)
        return Job.from_dict(reply)


def _job_query(filter_: Optional[str], status: Optional[str], queue: Optional[str],
               metadata: Optional[Dict[str, str]], cursor: Optional[str], limit: Optional[int]) -> Dict[str, Any]:
    """The query of GET /jobs and GET /jobs/count for these conditions."""
    q: Dict[str, Any] = {"filter": filter_ or None, "status": status, "queue": queue, "limit": limit,
                         "cursor": cursor}
    for k, v in (metadata or {}).items():
        q["metadata." + k] = v
    return q


def _bulk_body(action: str, filter_: Optional[str], status: Optional[str], queue: Optional[str],
               metadata: Optional[Dict[str, str]], priority: Optional[int]) -> Dict[str, Any]:
    """The body of POST /bulk; the server checks every field."""
    return _drop_none({"action": action, "filter": filter_ or None, "status": status or None,
                       "queue": queue or None, "metadata": metadata or None, "priority": priority})


def _millis(what: str, d: Duration, least: int = 0) -> int:
    """d (seconds, a timedelta or a Go duration) in whole milliseconds,
    rounded up, at least least; ValueError naming what for a negative one."""
    secs = parse_go_duration(d) if isinstance(d, str) else d.total_seconds() if isinstance(d, _dt.timedelta) else d
    secs = float(secs or 0)
    if secs < 0:
        raise ValueError(f"{what}: must not be negative, got {d!r}")
    return max(math.ceil(round(secs * 1000, 6)), least)


def _step_path(job_id: str, key: str) -> str:
    return f"/jobs/{urllib.parse.quote(job_id, safe='')}/steps/{urllib.parse.quote(key, safe='')}"


# The path prefixes of the reads ``stale_reads`` applies to.
_READ_ROUTES = ("/jobs", "/gangs", "/workers", "/queues", "/pauses", "/schedules")


def _is_read(path: str) -> bool:
    path = path.split("?", 1)[0]
    if path == "/jobs/next":  # claims
        return False
    return any(path == p or path.startswith(p + "/") for p in _READ_ROUTES)


class _Retryable(Exception):
    """A failure that did nothing on the server: try the next node."""

    def __init__(self, err: WorkronError, retry_after: float) -> None:
        super().__init__(str(err))
        self.err = err
        self.retry_after = retry_after


def _lease_entry(job_id: str, lease: int, progress: Optional[Tuple[int, str]]) -> Dict[str, Any]:
    """One lease of a worker heartbeat, with its attempt's progress if any."""
    entry: Dict[str, Any] = {"job_id": job_id, "lease": lease}
    if progress is not None:
        entry["progress"] = _progress_body(progress)
    return entry


def _progress_body(progress: Tuple[int, str]) -> Dict[str, Any]:
    """A (percent, message) progress as the API takes it."""
    return {"percent": progress[0], "message": progress[1]}
