"""``flush`` as the table owner: TRUNCATE is not granted to the application role."""

from __future__ import annotations

from typing import Any

from django.core.management.commands import flush
from django.db import connections

from config.db import roles


class Command(flush.Command):
    def handle(self, **options: Any) -> None:
        with roles.owner_mode(connections[options["database"]]):
            super().handle(**options)
