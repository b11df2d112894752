"""Full-text GIN index without a pending list (``fastupdate = off``).

With fastupdate on, inserts go to a pending list of up to ``gin_pending_list_limit``
(4 MB) that every search scans linearly until VACUUM merges it: at 100k rows, 229
pending pages cost ~2 ms per full-text probe, and a recall makes several. The index is
altered in place (no rebuild) and its pending entries merged now.
"""

import django.contrib.postgres.indexes
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0007_drop_session_fk_index"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="memory", name="memory_search_gin"),
                migrations.AddIndex(
                    model_name="memory",
                    index=django.contrib.postgres.indexes.GinIndex(
                        fastupdate=False, fields=["search"], name="memory_search_gin"
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    "ALTER INDEX memory_search_gin SET (fastupdate = off); "
                    "SELECT gin_clean_pending_list('memory_search_gin'::regclass)",
                    reverse_sql="ALTER INDEX memory_search_gin SET (fastupdate = on)",
                ),
            ],
        ),
    ]
