from django.contrib import admin

from accounts.admin_scope import OrgScopedAdmin
from recall.models import Feedback, RecallEvent


@admin.register(RecallEvent)
class RecallEventAdmin(OrgScopedAdmin):
    list_display = ["id", "query", "principal", "phase_reached", "total_tokens", "created_at"]
    list_filter = ["org"]
    search_fields = ["query"]


@admin.register(Feedback)
class FeedbackAdmin(OrgScopedAdmin):
    list_display = ["id", "verdict", "review_status", "author", "created_at"]
    list_filter = ["org", "verdict", "review_status"]
    raw_id_fields = ["event", "memory", "expected_memory"]
