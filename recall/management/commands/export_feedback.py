"""``manage.py export_feedback --org SLUG --out FILE``: feedback as a test set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Organization
from recall.feedback_set import export_feedback_set


class Command(BaseCommand):
    help = "Write an org's accepted recall feedback as a replayable JSON test set."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--org", required=True, help="organization slug")
        parser.add_argument("--out", required=True, help="file to write ('-': stdout)")

    def handle(self, *args: Any, **opts: Any) -> None:
        try:
            org = Organization.objects.get(slug=opts["org"])
        except Organization.DoesNotExist as exc:
            raise CommandError(f"no organization with slug {opts['org']!r}") from exc
        text = json.dumps(export_feedback_set(org), indent=2)
        if opts["out"] == "-":
            self.stdout.write(text)
            return
        Path(opts["out"]).write_text(text + "\n", encoding="utf-8")
        cases = len(json.loads(text)["cases"])
        self.stderr.write(f"wrote {cases} case(s) of org {org.slug} to {opts['out']}")
