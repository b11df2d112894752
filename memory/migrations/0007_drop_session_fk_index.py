"""Drop the one-column index of ``Memory.session``; ``memory_session_seq`` covers it.

Only the index goes: the foreign key constraint stays (AlterField would drop and
re-validate it over every row).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0006_inline_embeddings"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="memory",
                    name="session",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="memories",
                        to="memory.session",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "memory_memory_session_id_1de0ec6b"',
                    reverse_sql='CREATE INDEX IF NOT EXISTS "memory_memory_session_id_1de0ec6b" '
                    'ON "memory_memory" ("session_id")',
                ),
            ],
        ),
    ]
