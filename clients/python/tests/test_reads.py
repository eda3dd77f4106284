"""Consistent and stale reads: stale_reads sends ?stale=1 on reads only."""

from __future__ import annotations

import http.server
import json
import threading
import unittest
from typing import List

from tests.helpers import CA, CLIENT, URL, client, needs_node, unique
from workron import Client


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: List[str] = []

    def _answer(self) -> None:
        _Recorder.seen.append(self.command + " " + self.path)
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if self.path.startswith("/jobs/next"):
            self.send_response(204)
            self.end_headers()
            return
        body = {"jobs": []} if self.path.split("?")[0] == "/jobs" and self.command == "GET" else {"id": "j1", "status": "pending"}
        data = json.dumps(body).encode()
        self.send_response(201 if self.command == "POST" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = _answer
    do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


class StaleReadsTest(unittest.TestCase):
    def setUp(self) -> None:
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}"
        _Recorder.seen = []

    def tearDown(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()

    def use(self, c: Client) -> List[str]:
        _Recorder.seen = []
        c.get("j1")
        c.list(queue="q")
        c.submit(command="true")
        c.request("GET", "/jobs/next", query={"worker_id": "w1"})
        return list(_Recorder.seen)

    def test_stale_reads_ask_for_stale_on_reads_only(self) -> None:
        self.assertEqual(self.use(Client(self.url, stale_reads=True)),
                         ["GET /jobs/j1?stale=1", "GET /jobs?queue=q&stale=1", "POST /jobs", "GET /jobs/next?worker_id=w1"])

    def test_reads_are_consistent_by_default(self) -> None:
        self.assertEqual(self.use(Client(self.url)),
                         ["GET /jobs/j1", "GET /jobs?queue=q", "POST /jobs", "GET /jobs/next?worker_id=w1"])


@needs_node
class StaleReadsOnANodeTest(unittest.TestCase):
    def test_stale_reads_see_the_node_state(self) -> None:
        queue = unique("pystale")
        job = client().submit(command="true", queue=queue)
        c = Client(URL, token=CLIENT, tls_ca=CA, stale_reads=True)
        self.assertEqual(c.get(job.id).id, job.id)  # one node: its own writes are applied
        self.assertEqual([j.id for j in c.list(queue=queue).jobs], [job.id])
