"""Row-level security on recall part two's tenant tables (as accounts/0003 does)."""

from django.db import migrations

ORG_VISIBLE = (
    "(current_setting('mnemo.scope', true) = 'system' OR org_id = ANY ("
    "coalesce(nullif(current_setting('mnemo.org_ids', true), ''), '{}')::bigint[]))"
)
TABLES = ("recall_workingstate", "recall_community")

FORWARD = [
    f"ALTER TABLE {t} ENABLE ROW LEVEL SECURITY;\n"
    f"CREATE POLICY mnemo_tenant ON {t} USING {ORG_VISIBLE} WITH CHECK {ORG_VISIBLE};"
    for t in TABLES
]
BACKWARD = [
    f"DROP POLICY IF EXISTS mnemo_tenant ON {t};\n"
    f"ALTER TABLE {t} DISABLE ROW LEVEL SECURITY;"
    for t in TABLES
]


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0003_row_level_security"),
        ("recall", "0003_working_memory_and_communities"),
    ]

    operations = [
        migrations.RunSQL(sql="\n".join(FORWARD), reverse_sql="\n".join(BACKWARD)),
    ]
