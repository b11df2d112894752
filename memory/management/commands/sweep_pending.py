from django.core.management.base import BaseCommand, CommandParser

from memory.services import sweep_pending


class Command(BaseCommand):
    help = (
        "Re-enqueue memories left pending (or failed) for embedding longer than "
        "a threshold."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than", type=int, default=None, help="seconds")

    def handle(self, *args: object, **options: object) -> None:
        n = sweep_pending(older_than_seconds=options["older_than"])  # type: ignore[arg-type]
        self.stdout.write(f"re-enqueued {n} rows")
