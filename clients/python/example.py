"""A complete example: submit a typed job and run a worker for it.

Start a node first (`go run ./cmd/workron dev`, whose own worker only runs
shell commands), then: python3 example.py. WORKRON_SERVER, WORKRON_TOKEN
and WORKRON_TLS_CA say where and how to connect, as for the CLI.
"""

from __future__ import annotations

import os
import threading

from workron import Client, JobContext, NoRetry, Worker

server = os.environ.get("WORKRON_SERVER", "http://127.0.0.1:7070")
token = os.environ.get("WORKRON_TOKEN")  # a client,worker token with --auth-token-file
tls_ca = os.environ.get("WORKRON_TLS_CA")  # the CA of an https:// node

worker = Worker(server, token=token, tls_ca=tls_ca, queues=["emails"], concurrency=8)


@worker.handle("email.send")
def send(job: JobContext) -> None:
    to = job.payload.get("to")
    if not to:
        raise NoRetry("payload has no 'to'")  # failed, no more attempts
    print(f"attempt {job.attempt}: sending to {to}")  # raise anything to fail and retry


client = Client(server, token=token, tls_ca=tls_ca)
job = client.submit(type="email.send", queue="emails", payload={"to": "ada@example.com"},
                    max_attempts=5, timeout="30s", idempotency_key="welcome-ada")

serving = threading.Thread(target=worker.run, kwargs={"install_signals": False})
serving.start()  # in a worker process of its own, call worker.run(): it serves until SIGTERM
done = client.wait(job.id, timeout=60, on_progress=lambda j: print("job", j.id, j.status))
print("finished:", done.status, "on", done.worker_id)
worker.stop()
serving.join()
