"""The server's warnings reach the caller: a submit, batch or schedule
with an unknown field (a typo in a plain dict's key) is accepted, and the
client issues one WorkronWarning per reply naming what was ignored."""

from __future__ import annotations

import unittest
import warnings
from typing import Callable, List

from tests.helpers import client, needs_node, unique
from workron import JobSpec, WorkronWarning


def caught(call: Callable[[], object]) -> List[str]:
    """The WorkronWarnings call issues, as strings, and that it issues no
    other warning of this client."""
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        call()
    return [str(w.message) for w in ws if issubclass(w.category, WorkronWarning)]


@needs_node
class WarningsTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()
        self.queue = unique("pywarn")

    def test_submit_names_an_unknown_field(self) -> None:
        got = caught(lambda: self.c.submit({"command": "echo", "queue": self.queue, "bogus": 1}))
        self.assertEqual(len(got), 1, got)
        self.assertIn('unknown field "bogus"', got[0])
        self.assertEqual(caught(lambda: self.c.submit(command="echo", queue=self.queue)), [], "no warning: none")

    def test_batch_and_batch_ids_name_the_job_and_field(self) -> None:
        specs = [{"command": "echo", "queue": self.queue, "max_atempts": 3},
                 {"command": "echo", "queue": self.queue, "priorty": 2}]
        for call in (lambda: self.c.batch(specs), lambda: self.c.batch_ids(specs)):
            got = caught(call)
            self.assertEqual(len(got), 1, f"one warning per reply: {got}")
            self.assertIn('unknown field "jobs[0].max_atempts"', got[0])
            self.assertIn('unknown field "jobs[1].priorty"', got[0])

    def test_schedules_name_an_unknown_field(self) -> None:
        name = unique("pywarnsched")
        job = {"command": "echo tick", "queue": self.queue, "tmeout": 5}
        got = caught(lambda: self.c.create_schedule(name, "0 3 * * *", job))
        try:
            self.assertEqual(len(got), 1, got)
            self.assertIn('unknown field "job.tmeout"', got[0])
            got = caught(lambda: self.c.update_schedule(name, "0 4 * * *", job))
            self.assertEqual(len(got), 1, got)
            self.assertIn('unknown field "job.tmeout"', got[0])
            self.assertEqual(caught(lambda: self.c.update_schedule(name, "0 4 * * *", JobSpec(command="x"))), [])
        finally:
            self.c.delete_schedule(name)

    def test_warnings_can_be_made_errors(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("error", WorkronWarning)
            with self.assertRaises(WorkronWarning):
                self.c.submit({"command": "echo", "queue": self.queue, "bogus": 1})
