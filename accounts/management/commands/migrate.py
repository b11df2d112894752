"""``migrate`` as the table owner, then re-provision the application role's grants."""

from __future__ import annotations

from typing import Any

from django.core.management.commands import migrate
from django.db import connections

from config.db import roles


class Command(migrate.Command):
    def handle(self, *args: Any, **options: Any) -> None:
        wrapper = connections[options["database"]]
        with roles.owner_mode(wrapper):
            super().handle(*args, **options)
            roles.reprovision(wrapper)
