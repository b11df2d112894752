from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory import vector_indexes


class Command(BaseCommand):
    help = (
        "Create a partial HNSW and a partial GIN index for every org with at least "
        "--min-rows embedded "
        "rows (and drop those of orgs under half of it); drop, narrow or keep the "
        "shared HNSW index by MNEMO_SHARED_HNSW. Idempotent; builds "
        "concurrently, so writes go on."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--min-rows",
            type=int,
            default=None,
            help="default: MNEMO_TENANT_HNSW_MIN_ROWS "
            f"({settings.MNEMO_TENANT_HNSW_MIN_ROWS})",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="print the plan, change nothing"
        )

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["min_rows"] is not None and opts["min_rows"] < 1:
            raise CommandError("--min-rows must be at least 1")
        try:
            todo = vector_indexes.sync_tenant_indexes(
                opts["min_rows"], dry_run=opts["dry_run"]
            )
        except ValueError as exc:  # a bad MNEMO_SHARED_HNSW
            raise CommandError(str(exc)) from exc
        verb = "would " if opts["dry_run"] else ""
        for org, n in todo.create:
            took = todo.built_s.get(org)
            tail = f" in {took:.1f}s" if took is not None else ""
            self.stdout.write(
                f"{verb}create {vector_indexes.index_name(org)} ({n} rows){tail}"
            )
        for org, n in todo.drop:
            self.stdout.write(f"{verb}drop {vector_indexes.index_name(org)} ({n} rows)")
        for org, n in todo.keep:
            self.stdout.write(f"keep {vector_indexes.index_name(org)} ({n} rows)")
        if not (todo.create or todo.drop or todo.keep):
            self.stdout.write("no org is large enough for its own index")
        shared, after = vector_indexes.SHARED, todo.shared_after
        took = todo.shared_built_s
        tail = f" in {took:.1f}s" if took is not None else ""
        if after is None:
            what = "drop" if todo.shared_rebuild else "no"
            self.stdout.write(f"{verb}{what} {shared} (MNEMO_SHARED_HNSW=none)")
        elif todo.shared_rebuild:
            self.stdout.write(
                f"{verb}rebuild {shared} leaving out {len(after)} orgs{tail}"
                if after
                else f"{verb}rebuild {shared} over every org{tail}"
            )
        else:
            self.stdout.write(f"keep {shared} (leaving out {len(after)} orgs)")
