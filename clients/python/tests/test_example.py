"""The example of the READMEs (docs/workers.md) is example.py, and it runs."""

from __future__ import annotations

import os
import subprocess
import sys
import unittest

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
