"""How the worker reports the end of each attempt: a report (its lease,
status, error, result) is queued, carried on the next claim or batched on
POST /jobs/reports, and sent again while the answer says nothing was done
(no leader, an unknown outcome...), until the shutdown's deadline.

_Reporting is a part of Worker (worker.py), which holds the state it uses.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Dict, List, Optional

from .client import MAX_RESULT_BYTES, WorkronError, _progress_body
from .lease import refused
from .task import _Task

# Report answers whose codes mean nothing was done: the report is sent again.
_RESEND_CODES = ("no_leader", "internal", "outcome_unknown", "upgrade_in_progress")


class _Reporting:
    """Worker's methods that settle attempts and send their reports (see
    the module doc)."""

    def _settle_result(self, task: _Task, value: Any) -> None:
        """Ends task's attempt done with value as its result, or failed for
        good when value is not JSON or too large."""
        if value is None:
            self._settle(task, "done")
            return
        try:
            size = len(json.dumps(value, separators=(",", ":")).encode("utf-8"))
        except (TypeError, ValueError) as e:
            self._settle(task, "failed", error=f"the handler's result is not JSON: {e}", retry=False)
            return
        if size > MAX_RESULT_BYTES:
            self._settle(task, "failed", retry=False,
                         error=f"the handler's result is {size} bytes of JSON, more than {MAX_RESULT_BYTES}")
            return
        self._settle(task, "done", result=value)

    def _settle(self, task: _Task, status: str, *, error: str = "", retry: bool = True, result: Any = None,
                hold: Optional[Dict[str, str]] = None, exit_code: Optional[int] = None, output: str = "") -> bool:
        """Ends task's attempt once and reports whether this call did: the
        first of its handler, its timeout, a cancel, the end of the grace
        period, a preemption and the loss of the lease wins. An attempt
        that parked is not reported (its lease has ended): it is parked
        instead; nor is one whose lease was lost (_lose_lease)."""
        if task.ctx.parked:
            self._park(task)
            return False
        if task.ctx.lease_lost.is_set():
            self._forget(task)
            return False
        with self._cond:
            if task.settled:
                return False
            task.settled = True
            job = task.ctx.job
            self._running.pop(task.key, None)
            rep: Dict[str, Any] = {"job_id": job.id, "status": status, "lease": job.lease}
            if error:
                rep["error"] = error[-4096:]
            if exit_code is not None:
                rep["exit_code"] = exit_code
            if output:
                rep["output"] = output
            if not retry:
                rep["retry"] = False
            rep.update(hold or {})
            if result is not None:
                rep["result"] = result
            pending = task.ctx._pending_progress()  # the last progress no heartbeat carried
            if pending is not None:
                rep["progress"] = _progress_body(pending[0])
            if task.ctx.traceparent != job.traceparent:  # a trace_hook's span
                rep["traceparent"] = task.ctx.traceparent
            self._reports.append(rep)  # queued before it leaves the running set, in one step
            self._cond.notify_all()
        self._leases.end(task.key)
        if task.timer is not None:
            task.timer.cancel()
        if status != "done":
            task.ctx.stop_reason = error.strip().splitlines()[-1] if error else status
            task.ctx.stopping.set()
        return True

    # ---- stops and preemptions

    def _retry(self, what: str, job_id: str, send: Callable[[], Any], deadline: float) -> bool:
        """Calls send until it succeeds, the server refuses for good, or the
        deadline (time.monotonic) passes, and reports whether it succeeded."""
        delay = 0.1
        while True:
            try:
                send()
                return True
            except WorkronError as e:
                if e.status in (404, 409):
                    self.log.warning("%s of job %s dropped: the server moved on: %s", what, job_id, e)
                    return False
                if not (e.status == 0 or e.status >= 500 or e.status == 429):
                    self.log.error("%s of job %s refused: %s", what, job_id, e)
                    return False
                if time.monotonic() + delay > deadline:
                    self.log.error("%s of job %s abandoned after one lease TTL: %s", what, job_id, e)
                    return False
                self.log.warning("%s of job %s failed, retrying: %s", what, job_id, e)
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    # ---- reports

    def _answered(self, reps: List[Dict[str, Any]], answers: Optional[List[Dict[str, Any]]]) -> None:
        """Settles reports sent: answered ones are done, the others queue again."""
        if not reps:
            return
        with self._cond:
            for r in reps:
                self._sending.pop((r["job_id"], r["lease"]), None)
            if answers is None or len(answers) != len(reps):
                self._reports[:0] = reps
                self._cond.notify_all()
                return
            again = [r for r, a in zip(reps, answers) if a.get("code") in _RESEND_CODES]
            for r, a in zip(reps, answers):
                if a.get("code") == "upgrade_in_progress":
                    # A node cannot take rate-limited or snoozed yet: a plain failure.
                    r.pop("rate_limited_for", None)
                    r.pop("snooze_for", None)
                    if (r.pop("result", None), r.pop("progress", None)) != (None, None):
                        self.log.warning("result and progress of job %s dropped: a member of the cluster runs a "
                                         "release without them", r["job_id"])
            self._reports[:0] = again
            if again:
                self._cond.notify_all()
        for r, a in zip(reps, answers):
            if a.get("error") and a.get("code") not in _RESEND_CODES:
                self.log.warning("report %s of job %s refused: %s (%s)", r, r["job_id"], a.get("error"), a.get("code"))

    def _report_loop(self) -> None:
        """Sends the reports no claim carried, in batches."""
        while True:
            with self._cond:
                while not self._reports and not self._quit.is_set():
                    self._cond.wait()
                if self._quit.is_set():
                    return
            time.sleep(0.02)  # let a claim about to start carry them, and let more gather
            if not self._send_reports():
                self._quit.wait(0.5)

    def _send_reports(self) -> bool:
        with self._cond:
            reps, self._reports = self._reports[:1000], self._reports[1000:]
            for r in reps:
                self._sending[(r["job_id"], r["lease"])] = r
        if not reps:
            return True
        try:
            answers = self.client.reports(reps)
        except WorkronError as e:
            self.log.warning("reports failed: %s", e)
            self._answered(reps, None)
            return False
        self._answered(reps, answers)
        return True

    def _flush(self) -> None:
        for _ in range(10):
            with self._cond:
                if not self._reports:
                    return
            if not self._send_reports():
                time.sleep(0.5)

    # ---- heartbeats
