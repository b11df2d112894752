#!/usr/bin/env python
"""Django's command-line utility for administrative tasks."""

import os
import sys

# Commands that serve requests: their sessions start with no org visible
# (accounts/rls.py).
SERVER_COMMANDS = frozenset({"runserver", "testserver"})


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line

    from config.db import roles

    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command not in SERVER_COMMANDS:
        # Maintenance commands (seed_demo, evaluate, sweep_pending, shell, ...) work
        # across organizations: an explicit, logged row-level-security system scope.
        roles.set_default_scope("system", reason=f"manage.py {command}")
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
