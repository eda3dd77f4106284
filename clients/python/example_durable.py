"""Durable steps: charge a card, wait for the payment provider's webhook (an
event) for at most a day, then send the receipt. A crash, a timeout or a
redeploy anywhere in between charges nobody twice, and while the job waits
it holds no worker.

Start a node first (`go run ./cmd/workron dev` or `scripts/cluster.sh up`),
then: python3 example_durable.py. WORKRON_SERVER, WORKRON_TOKEN and
WORKRON_TLS_CA say where and how to connect, as for example.py.
"""

from __future__ import annotations

import threading
import time
import uuid

from workron import Client, JobContext, StepTimeout, Worker

worker = Worker(queues=["orders"], concurrency=8)


def charge_card(order: str, cents: int) -> dict:
    print(f"charging {order}: {cents} cents")  # runs once per job, whatever happens after
    return {"charge": f"ch_{order}", "cents": cents}


@worker.handle("order.checkout")
def checkout(job: JobContext) -> dict:
    order = job.payload["order"]
    print(f"running {order}")  # each run replays from the top: recorded steps return at once
    charge = job.step("charge", lambda: charge_card(order, job.payload["cents"]),
                      attempts=3, backoff=1.0)  # a failing charge is retried on its own, 1s apart
    try:
        # Parks the job (the attempt ends, the slot is free) until the webhook's event
        # comes; one sent before this line, within the look-back window, counts too.
        paid = job.wait_for_event("settled", "payment.settled", order, timeout=24 * 3600)
    except StepTimeout:
        job.step("refund", lambda: print(f"refunding {charge['charge']}"))
        return {"order": order, "status": "refunded"}
    job.step("receipt", lambda: print(f"receipt for {order}: {paid['cents']} cents settled"))
    return {"order": order, "status": "paid", "charge": charge["charge"]}


client = Client()
order = f"order-{uuid.uuid4().hex[:6]}"
job = client.submit(type="order.checkout", queue="orders", payload={"order": order, "cents": 4200},
                    idempotency_key=order)
serving = threading.Thread(target=worker.run, kwargs={"install_signals": False})
serving.start()  # in a worker process of its own, call worker.run(): it serves until SIGTERM

# The payment provider's webhook handler would do this, in another process.
while not (client.get(job.id).raw.get("parked") or client.get(job.id).finished):
    time.sleep(0.1)
print("waiting for:", client.get(job.id).raw.get("parked"))
client.send_event("payment.settled", order, {"cents": 4200})

done = client.wait(job.id, timeout=60)
print("finished:", done.status, done.result)
worker.stop()
serving.join()
