"""The write path's duplicate check by (session, content hash).

Every write of messages asks which of its contents are already active in the session
(``memory.services.memory_remember``). With only ``memory_session_seq`` the plan read
every row of the session and tested its hash: 2.26 ms a write of ten messages into a
2,300-row session, growing with the session (docs/benchmarks.md, session 32). Built
concurrently: writes go on while it builds.
"""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("memory", "0010_org_kind_tier_status_index"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="memory",
            index=models.Index(
                fields=["session", "content_sha256"], name="memory_session_sha"
            ),
        ),
    ]
