"""The step socket of a shell job on the Python worker: the Go worker's
(worker/stepsocket.go), so that ``workron step NAME -- CMD`` in a shell job
is durable under either worker (docs/workers.md, "Durable steps: from a
shell script").

A shell job has no lease and no token, so it cannot record a step itself.
For each running shell job the worker serves a small HTTP API on a unix
socket in a private directory (mode 0700), named by WORKRON_STEP_SOCKET in
the job's environment, and answers it with the job's own attempt (its
Journal, the one JobContext.step uses, occurrence counting included)::

    POST   /steps/{name}  the next occurrence of name: {"key"} and, when
                          it is recorded, {"step"} with its result
    PUT    /steps/{key}   record key, a key the POST gave as not recorded;
                          the body is a step request ({"result",
                          "attempts", "duration_ms"}), its lease the
                          attempt's whatever the body says
    DELETE /steps/{key}   give up key without recording it (the step
                          failed: a later attempt runs it again)
    POST   /steps/{name}/sleep, /wait, /invoke
                          park on name's next occurrence (the body is the
                          parking route's, its lease the attempt's):
                          {"key", "step"} when the step is complete, or
                          {"key", "parked": true}, and then the worker
                          stops the job's command (SIGTERM, the kill grace,
                          SIGKILL) and ends its attempt with no report

Only the job's processes may speak to it: the directory is 0700 and the
socket 0600, and on Linux each connection's peer credentials
(SO_PEERCRED) are read: a peer whose uid is not the worker's gets 403 on
every request, and the worker's log says so once per connection.

Errors are {"error": "..."}: 400 bad body, 403 another user's process, 409 a key not looked up or an
attempt whose lease the worker lost (or, for a lookup, that parked), 413 a
body over the bound, 429 too many names or steps running, 502 the
cluster's refusal. The socket is removed when the job's process ends.
"""

from __future__ import annotations

import http.server
import json
import logging
import os
import shutil
import socket
import socketserver
import struct
import sys
import tempfile
import threading
import urllib.parse
from typing import Any, Dict, Optional, Sequence, Set, Tuple

from .client import WorkronError
from .durable import MAX_STEP_RESULT_BYTES, Journal, Parked, StepLimitExceeded
from .lease import LeaseLost

STEP_SOCKET_ENV = "WORKRON_STEP_SOCKET"

# Bounds, the Go worker's: a request body (a result and room for the rest),
# keys handed out as not recorded and not yet recorded, distinct names in
# an attempt, and the longest temporary directory a socket is made in.
MAX_BODY = MAX_STEP_RESULT_BYTES + (4 << 10)
MAX_PENDING = 64
MAX_NAMES = 10_000
_MAX_DIR = 64
_PARK_KINDS = ("sleep", "wait", "invoke")
# The most of a body over MAX_BODY read (and dropped) to answer 413.
_MAX_DISCARD = 4 * MAX_BODY


def go_json(v: Any) -> bytes:
    """v as Go's encoding/json writes it (UTF-8 as it is; <, >, &, U+2028
    and U+2029 escaped), so that `workron step`, which compares the
    recorded result with its own encoding byte for byte, finds its own."""
    s = json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    for a, b in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        s = s.replace(a, b)
    return s.encode("utf-8")


class _TooLarge(ValueError):
    """A request body over MAX_BODY."""


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Drops a connection the job's process closed (a verb killed when
        its job parked); anything else is a bug, printed as socketserver
        does."""
        if isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


def peer_refusal(conn: socket.socket, allowed: Sequence[int]) -> str:
    """Why the process at the other end of conn, a unix socket connection,
    may not speak to a step socket: its uid (SO_PEERCRED, Linux only) is
    not one of allowed; "" when it may, or where the OS does not say."""
    opt = getattr(socket, "SO_PEERCRED", None)
    if opt is None:
        return ""  # the private directory is the only guard here
    try:
        pid, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, opt, struct.calcsize("3i")))
    except OSError as e:
        return f"step socket: peer credentials: {e}"
    if uid in allowed:
        return ""
    return f"step socket: peer uid {uid} (pid {pid}) is not the job's or the worker's (uids {list(allowed)})"


class StepSocket:
    """Serves one running shell job's steps on a unix socket until close(),
    to peers whose uid is in ``allowed`` (by default the worker's own);
    refusals are logged to ``log``."""

    def __init__(self, journal: Journal, allowed: Optional[Sequence[int]] = None,
                 log: Optional[logging.Logger] = None) -> None:
        base = tempfile.gettempdir()
        if len(base) > _MAX_DIR:
            base = "/tmp"  # a unix socket's path is short (108 bytes on Linux)
        self.dir = tempfile.mkdtemp(prefix="workron-step-", dir=base)  # mode 0700
        self.path = os.path.join(self.dir, "s")
        self._journal = journal
        self._lock = threading.Lock()
        self._pending: Set[str] = set()
        self._names: Set[str] = set()
        self._allowed = list(allowed) if allowed is not None else [os.geteuid()]
        self._log = log
        sock = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                self.refusal = peer_refusal(self.request, sock._allowed)
                if self.refusal and sock._log is not None:
                    sock._log.warning("%s: refused a connection to %s", self.refusal, sock.path)

            def _serve(self, method: str) -> None:
                if self.refusal:
                    self.close_connection = True
                    status, reply = 403, {"error": self.refusal}
                else:
                    status, reply = sock._handle(self, method)
                data = go_json(reply) + b"\n"
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802
                self._serve("POST")

            def do_PUT(self) -> None:  # noqa: N802
                self._serve("PUT")

            def do_DELETE(self) -> None:  # noqa: N802
                self._serve("DELETE")

            def do_GET(self) -> None:  # noqa: N802
                self._serve("GET")

        try:
            self._server = _Server(self.path, Handler)
            os.chmod(self.path, 0o600)
        except OSError:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise
        self._thread = threading.Thread(target=self._server.serve_forever, name="workron-step-socket", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stops serving and removes the socket and its directory."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _handle(self, req: http.server.BaseHTTPRequestHandler, method: str) -> Tuple[int, Any]:
        parts = urllib.parse.urlsplit(req.path).path.split("/")
        kind = parts[3] if len(parts) == 4 and method == "POST" and parts[3] in _PARK_KINDS else ""
        if len(parts) != (4 if kind else 3) or parts[:2] != ["", "steps"] or not parts[2]:
            req.close_connection = True
            return 404, {"error": f"no route {method} {req.path}"}
        name = urllib.parse.unquote(parts[2])
        try:
            body = self._body(req)
        except ValueError as e:
            req.close_connection = True
            return (413 if isinstance(e, _TooLarge) else 400), {"error": str(e)}
        if kind:
            return self._park(name, kind, body or {})
        if method == "POST":
            return self._lookup(name)
        if method == "PUT":
            return self._record(name, body)
        if method == "DELETE":
            with self._lock:
                self._pending.discard(name)
            return 200, {}
        return 405, {"error": f"method {method} not allowed"}

    @staticmethod
    def _body(req: http.server.BaseHTTPRequestHandler) -> Optional[Dict[str, Any]]:
        """The request's JSON body (None when empty), read up to MAX_BODY."""
        if req.headers.get("Transfer-Encoding"):
            raise ValueError("body: send it with a Content-Length")
        try:
            n = int(req.headers.get("Content-Length") or 0)
        except ValueError as e:
            raise ValueError("body: a bad Content-Length") from e
        if n > MAX_BODY:
            if n <= _MAX_DISCARD:  # read it, so that the client gets the answer rather than a broken pipe
                while n > 0:
                    chunk = req.rfile.read(min(n, 1 << 16))
                    if not chunk:
                        break
                    n -= len(chunk)
            raise _TooLarge(f"body: more than {MAX_BODY} bytes (a step's result is at most {MAX_STEP_RESULT_BYTES})")
        if n <= 0:
            return None
        try:
            body = json.loads(req.rfile.read(n))
        except ValueError as e:
            raise ValueError(f"body: {e}") from e
        if not isinstance(body, dict):
            raise ValueError("body: must be a JSON object")
        return body

    def _count_name(self, name: str, pending: bool) -> Optional[Tuple[int, Any]]:
        """Counts name among the attempt's; a 429 past the bounds (of names,
        and with pending, of steps running)."""
        with self._lock:
            if name not in self._names and len(self._names) >= MAX_NAMES:
                return 429, {"error": f"more than {MAX_NAMES} step names in one attempt"}
            if pending and len(self._pending) >= MAX_PENDING:
                return 429, {"error": f"more than {MAX_PENDING} steps running at once"}
            self._names.add(name)
        return None

    def _park(self, name: str, kind: str, body: Dict[str, Any]) -> Tuple[int, Any]:
        """A sleep, wait or invoke of the job: {"key", "step"} once it is
        complete, or {"key", "parked": true}, and then the worker stops the
        job's command and ends its attempt without a report."""
        refused = self._count_name(name, pending=False)
        if refused is not None:
            return refused
        try:
            if kind == "sleep":
                dur = body.get("duration_ms")
                st = self._journal.sleep(name, duration=None if dur is None else float(dur) / 1000,
                                         until=body.get("until"))
            elif kind == "wait":
                timeout = body.get("timeout_ms")
                st = self._journal.wait_step(name, event=body.get("event") or None, event_key=body.get("key"),
                                             signal=body.get("signal") or None,
                                             timeout=float(timeout) / 1000 if timeout else None)
            else:
                if not isinstance(body.get("job"), dict):
                    return 400, {"error": "job: must be a JSON object, the body of POST /jobs"}
                st = self._journal.invoke_step(name, body["job"])
        except Parked as e:
            return 200, {"key": e.key, "parked": True}
        except LeaseLost as e:
            return 409, {"error": str(e)}
        except StepLimitExceeded as e:
            return 429, {"error": str(e)}
        except (TypeError, ValueError) as e:
            return 400, {"error": f"body: {e}"}
        except WorkronError as e:
            return 502, {"error": str(e)}
        return 200, {"key": st.get("key", ""), "step": st}

    def _lookup(self, name: str) -> Tuple[int, Any]:
        refused = self._count_name(name, pending=True)
        if refused is not None:
            return refused
        try:
            key, rec = self._journal.lookup(name)
        except StepLimitExceeded as e:
            return 429, {"error": str(e)}
        except (Parked, LeaseLost) as e:
            return 409, {"error": f"the job's attempt has ended: {e}"}
        except WorkronError as e:
            return 502, {"error": str(e)}
        if rec is None:
            with self._lock:
                self._pending.add(key)
            return 200, {"key": key}
        return 200, {"key": key, "step": rec}

    def _record(self, key: str, body: Optional[Dict[str, Any]]) -> Tuple[int, Any]:
        if body is None:
            return 400, {"error": "body: EOF"}
        with self._lock:
            ok = key in self._pending
            self._pending.discard(key)
        if not ok:
            return 409, {"error": f"step {key}: not looked up as unrecorded in this attempt (POST /steps/{{name}} "
                                  "first)"}
        try:
            st = self._journal.record(key, {"result": body.get("result"), "failed": body.get("status") == "failed",
                                            "attempts": body.get("attempts"),
                                            "duration_ms": body.get("duration_ms")})
        except LeaseLost as e:
            return 409, {"error": str(e)}
        except WorkronError as e:
            return 502, {"error": str(e)}
        return 200, st
