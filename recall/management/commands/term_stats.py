from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Organization
from recall import term_stats


class Command(BaseCommand):
    help = (
        "Recount the full-text term frequencies recall's lexical channel reads for "
        "orgs with at least --min-rows active rows (or the orgs named with --org). "
        "Idempotent."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--min-rows",
            type=int,
            default=None,
            help="default: MNEMO_TERM_STATS_MIN_ROWS "
            f"({settings.MNEMO_TERM_STATS_MIN_ROWS})",
        )
        parser.add_argument(
            "--org", type=int, action="append", help="org id (repeatable)"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["min_rows"] is not None and opts["min_rows"] < 1:
            raise CommandError("--min-rows must be at least 1")
        orgs = opts["org"]
        if orgs:
            unknown = set(orgs) - set(
                Organization.objects.filter(pk__in=orgs).values_list("pk", flat=True)
            )
            if unknown:
                raise CommandError(f"no such org: {sorted(unknown)}")
        done = term_stats.refresh(orgs, min_rows=opts["min_rows"])
        for org, seconds in done.items():
            self.stdout.write(f"org {org}: counted in {seconds:.1f}s")
        if not done:
            self.stdout.write("no org is large enough for term statistics")
