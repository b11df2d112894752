"""``manage.py replay_feedback FILE``: score recall on an exported feedback set.

Each case's query runs through ``recall_run`` as the principal that made the original
recall (skipped when that principal no longer exists), without storing a new event.
Prints hit@k and MRR of the expected ids and how often unwanted ids still come.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.principals import Principal
from recall.feedback_set import FeedbackSetError, load_feedback_set, replay_feedback_set
from recall.services import recall_run
from recall.types import RecallRequest


def _ranked(principal: Principal, request: RecallRequest) -> list[int]:
    return [item.id for item in recall_run(principal, request).items]


class Command(BaseCommand):
    help = "Replay an exported feedback set through recall_run and print hit@k / MRR."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="a file written by export_feedback")
        parser.add_argument("--out", help="also write the per-case report as JSON")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            fset = load_feedback_set(opts["file"])
            report = replay_feedback_set(fset, run=_ranked, log=self.stderr.write)
        except FeedbackSetError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"org {fset.org}: {report.cases} case(s) replayed, "
            f"{len(report.skipped)} skipped"
        )
        for key in sorted(report.summary):
            self.stdout.write(f"  {key:<12} {report.summary[key]:.4f}")
        if opts.get("out"):
            Path(opts["out"]).write_text(
                json.dumps(report.__dict__, indent=2) + "\n", encoding="utf-8"
            )
