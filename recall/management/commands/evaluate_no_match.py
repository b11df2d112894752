"""``manage.py evaluate_no_match``: precision of recall's ``no_match`` on LoCoMo."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from recall.evaluation import datasets, no_match


class Command(BaseCommand):
    help = (
        "Measure no_match on LoCoMo category 5 and on a copy of each conversation "
        "with the evidence of half its questions removed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--data", help="LoCoMo JSON (default: under MNEMO_DATASETS_DIR)"
        )
        parser.add_argument("--conversations", type=int, default=2)
        parser.add_argument(
            "--thresholds",
            default="0.2,0.3,0.4",
            help="comma-separated min_relevance values",
        )
        parser.add_argument("--out", help="write JSON here")

    def handle(self, *args: Any, **opts: Any) -> None:
        path = Path(
            opts["data"]
            or Path(settings.MNEMO_DATASETS_DIR) / "locomo" / "locomo_dev.json"
        )
        if not path.exists():
            raise CommandError(f"no LoCoMo data at {path}")
        conversations = datasets.load_locomo(path)[: opts["conversations"]]
        thresholds = [float(t) for t in opts["thresholds"].split(",") if t.strip()]
        results = no_match.measure(conversations, thresholds, log=self.stderr.write)
        self.stdout.write(no_match.render_markdown(results))
        if opts["out"]:
            Path(opts["out"]).write_text(json.dumps(results, indent=1))
