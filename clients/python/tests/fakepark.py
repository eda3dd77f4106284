"""A fake Workron node, in memory, for the durable-step tests: the routes a
Worker uses (register, claim with reports, heartbeats that it can refuse
or leave unanswered, actions, reports),
run steps, and the parking routes of sleeps, waits and invokes with events
and signals, as the HTTP contract of issue #31 has them. Its clock is
time.time(); it keeps every event (no look-back window) and knows nothing
of tokens or TLS. The tests run the same scenarios against it and, through
go test, against the real binary."""

from __future__ import annotations

import datetime as _dt
import http.server
import json
import threading
import time
import urllib.parse
from typing import Any, Dict, List, Optional, Tuple

FINAL = ("ok", "failed", "timeout")
CLAIM_JOURNAL_STEPS = 32  # the most steps a claim lists of a job's journal (wire.MaxClaimJournalSteps)
PAGE_RESULT_BYTES = 4 << 20  # the most result bytes of a page of the listing with results
# The least time after a park before the fake wakes the job by itself (a
# sleep, or a wait's timeout): long enough for the parked attempt's worker
# to read the park's reply before a claim can take the job again, which a
# real node's sleep of a second also gives. Woken sooner, a claim could take
# the job first, and the worker stopped the old attempt as superseded
# (the Go fake server's fakeWakeDelay, worker/fake_park_test.go). Events,
# signals and children's ends still wake a job at once.
WAKE_DELAY = 0.2


def _now_rfc3339(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).isoformat().replace("+00:00", "Z")


class _Reject(Exception):
    def __init__(self, status: int, code: str, msg: str, extra: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(msg)
        self.status, self.code, self.msg, self.extra = status, code, msg, extra or {}


class FakePark:
    """The node's state, and its HTTP server on 127.0.0.1 (port 0)."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.jobs: Dict[str, Dict[str, Any]] = {}
        self.events: List[Dict[str, Any]] = []  # every event sent: name, key, payload, seq
        self.signals: List[Dict[str, Any]] = []  # job_id, name, payload, seq
        self.requests: List[Tuple[str, str]] = []  # (method, path) of each request
        self.reports: List[Dict[str, Any]] = []
        self.deadlines: Dict[Tuple[str, str], Optional[float]] = {}  # a waiting step's timeout
        self.parkings: Dict[Tuple[str, int, str], Dict[str, Any]] = {}  # (job, lease, key): the parking reply
        self.drop_replies = 0  # how many replies of drop_kinds routes to drop after doing the request
        self.drop_kinds: Tuple[str, ...] = ("sleep", "wait", "invoke")
        self.seq = 0
        self.lease_ttl_ms = 15000  # what each claim reply announces
        # Worker heartbeats: how many came, the leases each listed, and how
        # the next ones are answered (fail_beats, hold_beats).
        self.beats = 0
        self.beat_leases: List[List[Tuple[str, int]]] = []
        self.beat_failures = 0  # how many to refuse with beat_error
        self.beat_error: Tuple[int, str] = (503, "no_leader")
        self.beats_held = False  # left unanswered until release_beats() or close()
        self.closed = threading.Event()
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self, method: str) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n)) if n else None
                url = urllib.parse.urlsplit(self.path)
                path = url.path
                try:
                    status, reply = fake.route(method, path, body, urllib.parse.parse_qs(url.query))
                except _Reject as e:
                    status, reply = e.status, dict(e.extra, error=e.msg, code=e.code)
                data = json.dumps(reply).encode()
                with fake.lock:
                    drop = fake.drop_replies > 0 and method == "POST" and path.rsplit("/", 1)[-1] in fake.drop_kinds
                    if drop:
                        fake.drop_replies -= 1
                if drop:  # done, and the reply lost: the client's outcome is unknown
                    self.close_connection = True
                    return
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client went away (a worker's claim cut short at its stop)

            def do_GET(self) -> None:  # noqa: N802
                self._serve("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._serve("POST")

            def do_PUT(self) -> None:  # noqa: N802
                self._serve("PUT")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.closed.set()
        with self.lock:
            self.lock.notify_all()
        self.server.shutdown()
        self.server.server_close()

    # ---- routing

    def route(self, method: str, path: str, body: Any,
              query: Optional[Dict[str, List[str]]] = None) -> Tuple[int, Any]:
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
        with self.lock:
            self.requests.append((method, path))
        if (method, parts) == ("POST", ["workers", "register"]):
            return 200, {}
        if method == "POST" and parts[0] == "workers" and len(parts) == 3:
            if parts[2] == "actions":
                self.closed.wait(min(float(str((body or {}).get("wait", "1s")).rstrip("ms") or 1) / 1000, 0.2))
                return 200, {"actions": []}
            if parts[2] == "heartbeat":
                return self.heartbeat(body or {})
            return 200, {"renewed": 0, "actions": []}
        if (method, parts) == ("POST", ["jobs", "claim"]):
            return 200, self.claim(body or {})
        if (method, parts) == ("POST", ["jobs", "reports"]):
            with self.lock:
                return 200, {"results": [self._report(r) for r in body.get("reports") or []]}
        if (method, parts) == ("POST", ["jobs"]):
            with self.lock:
                return 201, self._public(self._submit(body or {}))
        if (method, parts) == ("POST", ["events"]):
            return 202, self.send_event(body or {})
        with self.lock:
            if parts[0] != "jobs" or len(parts) < 2 or parts[1] not in self.jobs:
                raise _Reject(404, "not_found", f"no route or job: {method} {path}")
            job = self.jobs[parts[1]]
            rest = parts[2:]
            if method == "GET" and not rest:
                return 200, self._public(job)
            if method == "POST" and rest == ["cancel"]:
                if job["status"] not in ("done", "failed", "cancelled"):
                    job["status"], job["parked"] = "cancelled", None
                    self._child_ended(job)
                return 200, self._public(job)
            if method == "POST" and len(rest) == 2 and rest[0] == "signals":
                return 202, self._signal(job, rest[1], (body or {}).get("payload"))
            if method == "GET" and rest == ["steps"]:
                return 200, self._list_steps(job, {k: v[-1] for k, v in (query or {}).items()})
            if len(rest) >= 2 and rest[0] == "steps":
                return self._step_route(method, job, rest[1], rest[2:], body or {})
        raise _Reject(404, "not_found", f"no route: {method} {path}")

    # ---- worker heartbeats

    def heartbeat(self, body: Dict[str, Any]) -> Tuple[int, Any]:
        """Counts a worker heartbeat and answers it as told: held, refused,
        or renewing what it lists (the fake keeps no lease ends) but for
        the leases it names lost as the cluster does (_lost): of a job
        unknown, no longer running, or since leased again."""
        with self.lock:
            self.beats += 1
            self.beat_leases.append([(j.get("job_id"), j.get("lease")) for j in body.get("jobs") or []])
            self.lock.notify_all()
            while self.beats_held and not self.closed.is_set():
                self.lock.wait(0.05)
            if self.beat_failures > 0:
                self.beat_failures -= 1
                status, code = self.beat_error
                raise _Reject(status, code, f"heartbeat refused ({code}), as the test asked")
            listed = body.get("jobs") or []
            lost = [{"job_id": j.get("job_id"), "lease": j.get("lease"), "reason": r}
                    for j in listed for r in [self._lost(j.get("job_id"), j.get("lease"))] if r]
        reply: Dict[str, Any] = {"renewed": len(listed) - len(lost), "actions": []}
        if lost:
            reply["lost"] = lost
        return 200, reply

    def _lost(self, job_id: Any, lease: Any) -> str:
        """Why a heartbeat does not renew lease of job_id ("": it does);
        called with the lock held."""
        j = self.jobs.get(job_id)
        if j is None:
            return "not_found"
        if j["lease"] != lease:
            return "stale_lease"
        return "" if j["status"] == "running" else "not_running"

    def reap(self, job_id: str) -> int:
        """Takes a running job back as the cluster's reaper does when its
        lease expired: pending again under the same lease, but not claimed
        again (its run_at is far off). Returns the heartbeats counted
        before."""
        with self.lock:
            j = self.jobs[job_id]
            j["status"], j["run_at"] = "pending", time.time() + 3600
            return self.beats

    def lease_again(self, job_id: str) -> int:
        """Gives a running job a new lease, as another worker's claim of it
        after a reap would. Returns the heartbeats counted before."""
        with self.lock:
            self.jobs[job_id]["lease"] += 1
            return self.beats

    def fail_beats(self, n: int, status: int, code: str) -> None:
        """Refuses the next n worker heartbeats with status and code."""
        with self.lock:
            self.beat_failures, self.beat_error = n, (status, code)

    def hold_beats(self) -> None:
        """Leaves the worker heartbeats from now on unanswered: the worker
        is cut off from the cluster."""
        with self.lock:
            self.beats_held = True

    def release_beats(self) -> None:
        with self.lock:
            self.beats_held = False
            self.lock.notify_all()

    def beat_count(self) -> int:
        with self.lock:
            return self.beats

    # ---- jobs and claims

    def _submit(self, body: Dict[str, Any], job_id: str = "") -> Dict[str, Any]:
        self.seq += 1
        job = {"id": job_id or f"job-{self.seq}", "type": body.get("type", ""), "command": body.get("command", ""),
               "env": body.get("env") or {}, "payload": body.get("payload"),
               "status": "pending", "lease": 0, "attempts": 0, "max_attempts": body.get("max_attempts", 3),
               "run_at": time.time(), "steps": {}, "parked": None, "parent": None, "result": None,
               "last_error": "", "output": "", "queue": body.get("queue", "default"), "consumed": 0}
        self.jobs[job["id"]] = job
        self.lock.notify_all()
        return job

    def submit(self, **body: Any) -> str:
        with self.lock:
            return self._submit(body)["id"]

    def claim(self, body: Dict[str, Any]) -> Dict[str, Any]:
        with self.lock:
            answers = [self._report(r) for r in body.get("reports") or []]
        deadline = time.monotonic() + (0 if body.get("reports") else 0.3)
        types, want = set(body.get("types") or []), int(body.get("max", 1))
        shell = bool(body.get("shell"))
        with self.lock:
            while True:
                self._wake_deadlines()
                ready = [j for j in self.jobs.values()
                         if j["status"] == "pending" and (j["type"] in types or shell and j["command"])
                         and j["run_at"] <= time.time()]
                if ready or time.monotonic() >= deadline or self.closed.is_set():
                    break
                self.lock.wait(0.02)
            jobs = []
            for j in ready[:want]:
                j["status"], j["lease"], j["attempts"] = "running", j["lease"] + 1, j["attempts"] + 1
                j["parked"] = None
                jobs.append(self._claimed(j))
        return {"jobs": jobs, "lease_ttl_ms": self.lease_ttl_ms, "reports": answers}

    def _claimed(self, j: Dict[str, Any]) -> Dict[str, Any]:
        d = self._public(j)
        steps = [{k: v for k, v in s.items() if k != "result"} for _, s in sorted(j["steps"].items())]
        if steps:
            d["journal"] = {"count": len(steps), "bytes": 0, "steps": steps[:CLAIM_JOURNAL_STEPS]}
            if len(steps) > CLAIM_JOURNAL_STEPS:
                d["journal"]["truncated"] = True
        return d

    def _list_steps(self, job: Dict[str, Any], q: Dict[str, str]) -> Dict[str, Any]:
        """GET /jobs/{id}/steps: a page in key order after the cursor (here
        the last key itself), with results when results=1, bounded by
        limit (default 100) and, with results, by PAGE_RESULT_BYTES."""
        results = q.get("results", "")
        if results not in ("", "0", "false", "1", "true"):
            raise _Reject(400, "invalid", f"results: must be 1 or 0, got {results!r}")
        with_results = results in ("1", "true")
        limit, after = int(q.get("limit", "100")), q.get("cursor", "")
        page: List[Dict[str, Any]] = []
        size, more = 0, False
        for key, st in sorted(job["steps"].items()):
            if key <= after:
                continue
            if len(page) >= limit or with_results and page and size + st["size"] > PAGE_RESULT_BYTES:
                more = True
                break
            page.append(st if with_results else {k: v for k, v in st.items() if k != "result"})
            size += st["size"]
        out: Dict[str, Any] = {"steps": page, "count": len(job["steps"]), "bytes": 0}
        if more:
            out["next_cursor"] = page[-1]["key"]
        return out

    def _public(self, j: Dict[str, Any]) -> Dict[str, Any]:
        d = {k: j[k] for k in ("id", "type", "command", "env", "payload", "status", "lease", "attempts",
                               "max_attempts", "queue", "last_error", "output")}
        if d["status"] == "parked" or d["status"] == "pending" and j["run_at"] > time.time():
            d["status"] = "scheduled"  # as the cluster shows it, with parked saying on what
        if j["result"] is not None:
            d["result"] = j["result"]
        if j["parked"]:
            d["parked"] = j["parked"]
        return d

    def _report(self, r: Dict[str, Any]) -> Dict[str, Any]:
        self.reports.append(r)
        j = self.jobs.get(r.get("job_id"))
        if j is None or j["status"] != "running" or j["lease"] != r.get("lease"):
            return {"job_id": r.get("job_id"), "error": "stale lease", "code": "stale_lease"}
        j["output"] = r.get("output", "")
        if r.get("status") == "done":
            j["status"], j["result"] = "done", r.get("result")
        else:
            j["last_error"] = r.get("error", "")
            again = r.get("retry", True) and j["attempts"] < j["max_attempts"]
            j["status"] = "pending" if again else "failed"
        if j["status"] in ("done", "failed"):
            self._child_ended(j)
        self.lock.notify_all()
        return {"job_id": j["id"], "status": j["status"]}

    # ---- steps

    def _fence(self, job: Dict[str, Any], body: Dict[str, Any]) -> None:
        if job["status"] != "running" or job["lease"] != body.get("lease"):
            raise _Reject(409, "stale_lease", f"job {job['id']}: lease {body.get('lease')} is not the running one")

    def _recorded(self, job: Dict[str, Any], key: str) -> None:
        st = job["steps"].get(key)
        if st is not None and st["status"] in FINAL:
            raise _Reject(409, "step_recorded", f"step {key} is recorded", {"step": st})

    def _put(self, job: Dict[str, Any], key: str, **fields: Any) -> Dict[str, Any]:
        st = {"key": key, "status": "ok", "attempts": 1, "job_attempt": job["attempts"],
              "recorded_at": _now_rfc3339(time.time()), "duration_ms": 0, "size": 0}
        st.update({k: v for k, v in fields.items() if v is not None})
        st["size"] = len(json.dumps(st.get("result"))) if "result" in st else 0
        job["steps"][key] = st
        return st

    def _park(self, job: Dict[str, Any], st: Dict[str, Any], run_at: float) -> Tuple[int, Any]:
        job["status"], job["run_at"], job["attempts"] = "pending", run_at, job["attempts"] - 1  # uncharged
        job["parked"] = {k: st[k] for k in ("kind", "key", "wake_at", "event", "event_key", "signal", "child_id")
                         if k in st}
        job["parked"]["step"] = job["parked"].pop("key")
        if st["status"] == "waiting":
            job["status"] = "parked"
        self.lock.notify_all()
        reply = {"step": st, "parked": True}
        self.parkings[(job["id"], job["lease"], st["key"])] = reply
        return 201, reply

    def _step_route(self, method: str, job: Dict[str, Any], key: str, kind: List[str],
                    body: Dict[str, Any]) -> Tuple[int, Any]:
        if method == "GET" and not kind:
            if key not in job["steps"]:
                raise _Reject(404, "not_found", f"step {key}: not recorded")
            return 200, job["steps"][key]
        if method == "PUT" and not kind:
            self._fence(job, body)
            self._recorded(job, key)
            return 201, self._put(job, key, status=body.get("status", "ok"), result=body.get("result"),
                                  attempts=body.get("attempts", 1), duration_ms=body.get("duration_ms", 0))
        if method != "POST" or len(kind) != 1:
            raise _Reject(404, "not_found", "no route")
        again = self.parkings.get((job["id"], body.get("lease"), key))
        if again is not None:  # a resend by the attempt that parked on this step
            return 201, again
        self._fence(job, body)
        self._recorded(job, key)
        now = time.time()
        if kind[0] == "sleep":
            wake = now + body["duration_ms"] / 1000 if "duration_ms" in body else \
                _dt.datetime.fromisoformat(body["until"].replace("Z", "+00:00")).timestamp()
            st = self._put(job, key, kind="sleep", wake_at=_now_rfc3339(wake), result=None)
            if wake <= now:
                return 201, {"step": st, "parked": False}
            return self._park(job, st, max(wake, now + WAKE_DELAY))
        if kind[0] == "wait":
            timeout = body.get("timeout_ms", 0)
            deadline = now + timeout / 1000 if timeout else None
            what = {"signal": body["signal"]} if body.get("signal") else {"event": body.get("event"),
                                                                          "event_key": body.get("key", "")}
            kept = self._kept(job, what)
            if kept is not None:
                job["consumed"] = max(job["consumed"], kept["seq"])
                return 201, {"step": self._put(job, key, kind="wait", result=kept["payload"], **what), "parked": False}
            st = self._put(job, key, kind="wait", status="waiting",
                           wake_at=_now_rfc3339(deadline) if deadline else None, **what)
            self.deadlines[(job["id"], key)] = max(deadline, now + WAKE_DELAY) if deadline else None
            return self._park(job, st, float("inf"))
        if kind[0] == "invoke":
            child_id = f"{job['id']}.{key}"
            child = self.jobs.get(child_id) or self._submit(body.get("job") or {}, child_id)
            child["parent"] = (job["id"], key)
            st = self._put(job, key, kind="invoke", status="waiting", child_id=child_id)
            if child["status"] in ("done", "failed", "cancelled"):
                self._child_ended(child)
                return 201, {"step": job["steps"][key], "parked": False}
            return self._park(job, st, float("inf"))
        raise _Reject(404, "not_found", "no route")

    def _kept(self, job: Dict[str, Any], what: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        if "signal" in what:
            found = [s for s in self.signals if s["job_id"] == job["id"] and s["name"] == what["signal"]]
        else:
            found = [e for e in self.events if (e["name"], e["key"]) == (what["event"], what["event_key"])]
        found = [e for e in found if e["seq"] > job["consumed"]]
        return found[0] if found else None

    def _wake_deadlines(self) -> None:
        now = time.time()
        for j in self.jobs.values():
            p = j["parked"]
            if j["status"] != "parked" or not p or p.get("kind") != "wait":
                continue
            st = j["steps"][p["step"]]
            deadline = self.deadlines.get((j["id"], st["key"]))
            if deadline is not None and deadline <= now:
                st["status"] = "timeout"
                j["status"], j["run_at"] = "pending", now

    def _satisfy(self, job: Dict[str, Any], ev: Dict[str, Any]) -> bool:
        p = job["parked"]
        if job["status"] != "parked" or not p or p.get("kind") != "wait":
            return False
        st = job["steps"][p["step"]]
        if ("signal" in ev and st.get("signal") == ev["name"] and ev["job_id"] == job["id"]) or \
                ("signal" not in ev and (st.get("event"), st.get("event_key")) == (ev["name"], ev["key"])):
            st["status"], st["result"] = "ok", ev["payload"]
            job["consumed"] = max(job["consumed"], ev["seq"])
            job["status"], job["run_at"] = "pending", time.time()
            return True
        return False

    def send_event(self, body: Dict[str, Any]) -> Dict[str, Any]:
        with self.lock:
            self.seq += 1
            ev = {"name": body["name"], "key": body.get("key", ""), "payload": body.get("payload"), "seq": self.seq}
            self.events.append(ev)
            woke = sum(self._satisfy(j, ev) for j in list(self.jobs.values()))
            self.lock.notify_all()
            return {"seq": ev["seq"], "woke": woke}

    def _signal(self, job: Dict[str, Any], name: str, payload: Any) -> Dict[str, Any]:
        self.seq += 1
        sig = {"job_id": job["id"], "name": name, "payload": payload, "seq": self.seq, "signal": True}
        self.signals.append(sig)
        woke = int(self._satisfy(job, sig))
        self.lock.notify_all()
        return {"seq": sig["seq"], "woke": woke}

    def _child_ended(self, child: Dict[str, Any]) -> None:
        if not child["parent"]:
            return
        pid, key = child["parent"]
        parent = self.jobs[pid]
        st = parent["steps"].get(key)
        if st is None or st["status"] in FINAL:
            return
        if child["status"] == "done":
            st["status"], st["result"] = "ok", child["result"]
        else:
            st["status"], st["result"] = "failed", {"status": child["status"], "error": child["last_error"]}
        if parent["status"] == "parked":
            parent["status"], parent["run_at"] = "pending", time.time()

    # ---- what tests look at

    def job(self, job_id: str) -> Dict[str, Any]:
        with self.lock:
            return json.loads(json.dumps(self.jobs[job_id], default=str))

    def wait_status(self, job_id: str, statuses: Tuple[str, ...], timeout: float = 10.0) -> Dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self.lock:
            while self.jobs[job_id]["status"] not in statuses:
                if time.monotonic() >= deadline:
                    raise AssertionError(f"job {job_id} is {self.jobs[job_id]['status']}, not {statuses}, "
                                         f"after {timeout}s")
                self.lock.wait(0.05)
        return self.job(job_id)
