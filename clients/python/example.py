"""A complete example: submit a typed job and run a worker for it.

Start a node first (`go run ./cmd/workron dev`, whose own worker only runs
shell commands, or `scripts/cluster.sh up`), then: python3 example.py. Like
the CLI, the client and worker find either quick start by themselves;
WORKRON_SERVER, WORKRON_TOKEN and WORKRON_TLS_CA say where and how to
connect otherwise.
"""

from __future__ import annotations

import threading

from workron import Client, JobContext, NoRetry, Worker

worker = Worker(queues=["emails"], concurrency=8)  # servers, token, tls_ca: as for the CLI


@worker.handle("email.send")
def send(job: JobContext) -> None:
    to = job.payload.get("to")
    if not to:
        raise NoRetry("payload has no 'to'")  # failed, no more attempts
    print(f"attempt {job.attempt}: sending to {to}")  # raise anything to fail and retry


client = Client()  # or Client("https://n1:7001,https://n2:7001", token=..., tls_ca=...)
job = client.submit(type="email.send", queue="emails", payload={"to": "ada@example.com"},
                    max_attempts=5, timeout="30s", idempotency_key="welcome-ada")

serving = threading.Thread(target=worker.run, kwargs={"install_signals": False})
serving.start()  # in a worker process of its own, call worker.run(): it serves until SIGTERM
done = client.wait(job.id, timeout=60, on_progress=lambda j: print("job", j.id, j.status))
print("finished:", done.status, "on", done.worker_id)
worker.stop()
serving.join()
