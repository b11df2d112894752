"""Drop two indexes of ``memory_memory`` that no query needs.

- ``memory_org_sha`` (org, content_sha256): the write path's duplicate check filters by
  session (``memory_session_seq``), and nothing else looks rows up by hash; 0 scans
  over a LongMemEval and a LoCoMo run (docs/benchmarks.md, session 16).
- The one-column index of ``Memory.org``: every index that starts with ``org_id``
  (tier/status, occurred_at, speaker, kind) serves the same lookups.

Each index costs an entry when a message is written and another when its embedding
lands (the update touches the HNSW-indexed column, so it is never HOT). Only the
index goes for ``org``: the foreign key constraint stays (AlterField would drop and
re-validate it over every row).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0004_rls_initplan"),
        ("memory", "0008_search_gin_fastupdate_off"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="memory", name="memory_org_sha"),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="memory",
                    name="org",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="accounts.organization",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "memory_memory_org_id_39a6d626"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "memory_memory_org_id_39a6d626" '
                    'ON "memory_memory" ("org_id")',
                ),
            ],
        ),
    ]
