"""Row-level security policies that read the session's scope once per query.

0003's condition called ``current_setting`` and parsed ``mnemo.org_ids`` into a
``bigint[]`` for every row a scan touched. Wrapped in scalar sub-selects, PostgreSQL
evaluates them once per statement (an InitPlan) and compares each row's ``org_id``
against the ready array. Same rule, same rows; an exact vector scan over an 11k-row
tenant at 100k rows went from 32 to 28 ms (docs/benchmarks.md, session 3).
"""

from importlib import import_module

from django.db import migrations

old = import_module("accounts.migrations.0003_row_level_security")

ORG_VISIBLE = (
    "((SELECT current_setting('mnemo.scope', true)) = 'system' OR org_id = ANY (CAST("
    "(SELECT coalesce(nullif(current_setting('mnemo.org_ids', true), ''), '{}')) "
    "AS bigint[])))"
)


def _alter(condition: str) -> str:
    return "\n".join(
        f"ALTER POLICY mnemo_tenant ON {t} USING {condition} WITH CHECK {condition};"
        for t in old.ORG_TABLES
    )


class Migration(migrations.Migration):
    dependencies = [("accounts", "0003_row_level_security")]

    operations = [
        migrations.RunSQL(sql=_alter(ORG_VISIBLE), reverse_sql=_alter(old.ORG_VISIBLE)),
    ]
