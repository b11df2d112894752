"""Console routes; mount with ``path("", include("ui.urls"))``."""

from django.urls import path

from ui.views import account, conflicts, entities, feedback, memories, sessions

app_name = "ui"

urlpatterns = [
    path("", account.home, name="home"),
    path("org/switch", account.switch_org, name="switch_org"),
    path("memories/", memories.memory_list, name="memory_list"),
    path("memories/<int:memory_id>/", memories.memory_detail, name="memory_detail"),
    path("sessions/", sessions.session_list, name="session_list"),
    path("sessions/<int:session_id>/", sessions.session_detail, name="session_detail"),
    path("entities/", entities.entity_list, name="entity_list"),
    path("entities/<int:entity_id>/", entities.entity_detail, name="entity_detail"),
    path("conflicts/", conflicts.conflict_list, name="conflict_list"),
    path(
        "conflicts/<int:conflict_id>/action",
        conflicts.conflict_action,
        name="conflict_action",
    ),
    path("feedback/", feedback.feedback_list, name="feedback_list"),
    path(
        "feedback/<int:feedback_id>/review",
        feedback.feedback_review,
        name="feedback_review",
    ),
]

from ui.views import playground  # noqa: E402 - appended with the playground

urlpatterns += [
    path("playground/", playground.playground_page, name="playground"),
    path(
        "playground/feedback",
        playground.playground_feedback,
        name="playground_feedback",
    ),
]

from ui.views import audit  # noqa: E402 - appended with the audit log

urlpatterns += [
    path("audit/", audit.audit_list, name="audit_list"),
    path("audit/export.jsonl", audit.audit_export, name="audit_export"),
]
