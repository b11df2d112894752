from django.contrib import admin

from accounts.admin_scope import OrgScopedAdmin
from recall.models import AgentRecallSettings, Feedback, RecallConfig, RecallEvent


@admin.register(RecallEvent)
class RecallEventAdmin(OrgScopedAdmin):
    list_display = [
        "id",
        "query",
        "principal",
        "phase_reached",
        "total_tokens",
        "created_at",
    ]
    list_filter = ["org"]
    search_fields = ["query"]


@admin.register(Feedback)
class FeedbackAdmin(OrgScopedAdmin):
    list_display = ["id", "verdict", "review_status", "author", "created_at"]
    list_filter = ["org", "verdict", "review_status"]
    raw_id_fields = ["event", "memory", "expected_memory"]


@admin.register(RecallConfig)
class RecallConfigAdmin(OrgScopedAdmin):
    list_display = ["org", "reinforcement_weight", "updated_at"]


@admin.register(AgentRecallSettings)
class AgentRecallSettingsAdmin(OrgScopedAdmin):
    org_field = "agent__org"
    list_display = ["agent", "record_outcomes", "updated_at"]
    raw_id_fields = ["agent"]
