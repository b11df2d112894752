from django.urls import path

from memory.api import views

urlpatterns = [
    path("sessions", views.SessionListCreate.as_view(), name="api-sessions"),
    path(
        "sessions/<int:session_id>", views.SessionDetail.as_view(), name="api-session"
    ),
    path(
        "sessions/<int:session_id>/messages",
        views.SessionMessages.as_view(),
        name="api-session-messages",
    ),
    path("memories", views.MemoryListCreate.as_view(), name="api-memories"),
    path("memories/<int:memory_id>", views.MemoryDetail.as_view(), name="api-memory"),
    path(
        "memories/<int:memory_id>/supersede",
        views.MemorySupersede.as_view(),
        name="api-memory-supersede",
    ),
    path(
        "memories/<int:memory_id>/retract",
        views.MemoryRetract.as_view(),
        name="api-memory-retract",
    ),
]

# Knowledge tiers (issue 4): conflicts.
from memory.api import conflicts as conflict_views  # noqa: E402

urlpatterns += [
    path("conflicts", conflict_views.ConflictList.as_view(), name="api-conflicts"),
    path(
        "conflicts/<int:conflict_id>",
        conflict_views.ConflictDetail.as_view(),
        name="api-conflict",
    ),
    path(
        "conflicts/<int:conflict_id>/resolve",
        conflict_views.ConflictResolve.as_view(),
        name="api-conflict-resolve",
    ),
]
