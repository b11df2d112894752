"""The presence probe's index: (org, kind, tier, status) instead of (org, kind).

Recall asks on every request whether the caller's org holds any chunk or artifact
(phase 3) and any rule or lesson (the overlays), in one statement with a generic plan
(``config.db.prepared``). Whether that plan read ``memory_org_kind`` or
``memory_org_tier_status`` depended on the table's statistics: on one 1M-row corpus it
took the second and tested the kind of all 196k raw rows of the largest tenant, 148 ms
a recall. With every column of the probe in one index the plan stops at the first
entry (0.2 ms; docs/benchmarks.md, session 23). Built and dropped concurrently: writes
go on while it builds.
"""

from django.contrib.postgres.operations import (
    AddIndexConcurrently,
    RemoveIndexConcurrently,
)
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memory", "0009_drop_redundant_indexes"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(
                fields=["org", "kind", "tier", "status"],
                name="memory_org_kind_tier_status",
            ),
        ),
        RemoveIndexConcurrently(model_name="memory", name="memory_org_kind"),
    ]
