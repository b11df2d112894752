"""Row-level security on every table that holds tenant content (docs/security.md).

A row is visible, and may be written, only when its org is in the session's
``mnemo.org_ids`` or the session's ``mnemo.scope`` is ``system``; with neither set
(a fresh request before its principal is known) nothing is visible. Link tables
without an org column follow their parent row. Table owners and superusers bypass
these policies: the application connects as a separate role (config/db/roles.py).
The table lists are frozen here on purpose; tests/security/test_rls.py fails when a
table with an ``org_id`` column is added without a policy.
"""

from django.db import migrations

ORG_VISIBLE = (
    "(current_setting('mnemo.scope', true) = 'system' OR org_id = ANY ("
    "coalesce(nullif(current_setting('mnemo.org_ids', true), ''), '{}')::bigint[]))"
)

ORG_TABLES = (
    "memory_session",
    "memory_memory",
    "memory_entity",
    "memory_mention",
    "memory_relationship",
    "memory_conflict",
    "memory_idempotencyrecord",
    "memory_knowledgesettings",
    "memory_consolidationrun",
    "memory_entitymerge",
    "recall_recallevent",
    "recall_feedback",
    "recall_recallconfig",
    "accounts_auditevent",
)

# (table, parent table, column pointing at the parent's id)
CHILD_TABLES = (
    ("memory_conflictalternative", "memory_conflict", "conflict_id"),
    ("memory_conflictevent", "memory_conflict", "conflict_id"),
    ("memory_memory_derived_from", "memory_memory", "from_memory_id"),
    ("memory_relationship_evidence", "memory_relationship", "relationship_id"),
)


def _enable(table: str, condition: str) -> str:
    return (
        f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;\n"
        f"CREATE POLICY mnemo_tenant ON {table} USING {condition} WITH CHECK {condition};"
    )


def _disable(table: str) -> str:
    return (
        f"DROP POLICY IF EXISTS mnemo_tenant ON {table};\n"
        f"ALTER TABLE {table} DISABLE ROW LEVEL SECURITY;"
    )


def _child_condition(parent: str, column: str) -> str:
    # The parent's own policy filters the sub-select: a link row is visible exactly
    # when the row it hangs off is.
    return f"(EXISTS (SELECT 1 FROM {parent} p WHERE p.id = {column}))"  # noqa: S608


FORWARD = [_enable(t, ORG_VISIBLE) for t in ORG_TABLES] + [
    _enable(t, _child_condition(parent, col)) for t, parent, col in CHILD_TABLES
]
BACKWARD = [_disable(t) for t in ORG_TABLES] + [_disable(t) for t, _, _ in CHILD_TABLES]


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_audit_and_key_limits"),
        ("memory", "0003_knowledge_tiers"),
        ("recall", "0002_feedback_loop"),
    ]

    operations = [
        migrations.RunSQL(sql="\n".join(FORWARD), reverse_sql="\n".join(BACKWARD)),
    ]
