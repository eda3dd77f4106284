"""A worker in its own process, for the tests that kill or stop it:
worker_proc.py URL WORKER_ID QUEUE MARKER_DIR GRACE [shell]. Handlers: "py.block"
writes MARKER_DIR/JOB_ID and blocks until stopped; "py.quick" sleeps 0.5s.
With "shell" it runs shell commands too."""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from workron import JobContext, Worker  # noqa: E402


def main() -> None:
    url, worker_id, queue, markers, grace = sys.argv[1:6]
    w = Worker(url, id=worker_id, queues=[queue], token=os.environ.get("WORKRON_TEST_WORKER_TOKEN"),
               tls_ca=os.environ.get("WORKRON_TEST_CA"), poll_wait=2.0, grace=float(grace),
               shell=sys.argv[6:] == ["shell"])

    @w.handle("py.block")
    def block(job: JobContext) -> None:
        with open(os.path.join(markers, job.id), "w") as f:
            f.write(str(job.lease))
        job.stopping.wait(120)

    @w.handle("py.quick")
    def quick(job: JobContext) -> None:
        with open(os.path.join(markers, job.id), "w") as f:
            f.write(str(job.lease))
        time.sleep(0.5)

    w.run()


if __name__ == "__main__":
    main()
