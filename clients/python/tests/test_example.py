"""The example of the READMEs (docs/workers.md) is example.py, and it runs."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest

from tests.fakepark import FakePark
from tests.helpers import ADMIN, CA, URL, needs_node

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class ExampleInReadmeTest(unittest.TestCase):
    def test_readme_shows_example(self) -> None:
        with open(os.path.join(ROOT, "example.py")) as f:
            example = f.read()
        for readme in ("README.md", os.path.join("..", "..", "docs", "workers.md")):
            with open(os.path.join(ROOT, readme)) as f:
                self.assertIn("```python\n" + example + "```", f.read(), f"{readme} must show example.py as it is")


@needs_node
class ExampleRunsTest(unittest.TestCase):
    def test_example_runs(self) -> None:
        env = dict(os.environ, WORKRON_SERVER=URL, WORKRON_TOKEN=ADMIN or "", WORKRON_TLS_CA=CA or "",
                   PYTHONPATH=ROOT)
        out = subprocess.run([sys.executable, os.path.join(ROOT, "example.py")], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("attempt 1: sending to ada@example.com", out.stdout)
        self.assertIn("finished: done", out.stdout)


def run_durable_example(url: str, token: str, ca: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, WORKRON_SERVER=url, WORKRON_TOKEN=token, WORKRON_TLS_CA=ca, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, os.path.join(ROOT, "example_durable.py")], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


class DurableExampleTest(unittest.TestCase):
    """example_durable.py: charged once, parked on the webhook's event, woken by it, receipt sent."""

    def check(self, out: subprocess.CompletedProcess) -> None:
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.count("charging order-"), 1, out.stdout)
        self.assertEqual(out.stdout.count("running order-"), 2, "once to the wait, once from it")
        self.assertIn("waiting for: {", out.stdout)
        self.assertIn("'event': 'payment.settled'", out.stdout)
        self.assertEqual(out.stdout.count("cents settled"), 1, out.stdout)
        self.assertIn("finished: done {'order': 'order-", out.stdout)
        self.assertIn("'status': 'paid'", out.stdout)

    def test_docs_show_its_handler(self) -> None:
        with open(os.path.join(ROOT, "example_durable.py")) as f:
            example = f.read()
        start = example.index('@worker.handle("order.checkout")')
        handler = example[start:example.index("\n\n\n", start) + 1]
        with open(os.path.join(ROOT, "..", "..", "docs", "workers.md")) as f:
            self.assertIn("```python\n" + handler + "```", f.read(), "docs/workers.md shows example_durable.py's handler")

    def test_on_the_fake_node(self) -> None:
        fake = FakePark()
        self.addCleanup(fake.close)
        self.check(run_durable_example(fake.url, "", ""))

    @unittest.skipUnless(URL, "WORKRON_TEST_URL not set: run `go test ./clients/python`")
    def test_on_a_node(self) -> None:
        self.check(run_durable_example(URL, ADMIN or "", CA or ""))
