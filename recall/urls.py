from django.urls import path

from recall import api

urlpatterns = [
    path("recall", api.RecallView.as_view(), name="api-recall"),
    path("search", api.SearchView.as_view(), name="api-search"),
    path("similar", api.SimilarView.as_view(), name="api-similar"),
    path(
        "memories/<int:memory_id>/trace",
        api.TraceView.as_view(),
        name="api-memory-trace",
    ),
]

from recall import feedback_api  # noqa: E402 - appended with the feedback loop

urlpatterns += [
    path(
        "recall/<int:recall_id>/feedback",
        feedback_api.FeedbackView.as_view(),
        name="api-recall-feedback",
    ),
    path(
        "recall/<int:recall_id>/outcome",
        feedback_api.OutcomeView.as_view(),
        name="api-recall-outcome",
    ),
    path(
        "feedback/export",
        feedback_api.FeedbackExportView.as_view(),
        name="api-feedback-export",
    ),
]

from recall import working_api  # noqa: E402 - appended with recall part two

urlpatterns += [
    path(
        "sessions/<int:session_id>/state",
        working_api.WorkingStateView.as_view(),
        name="api-session-state",
    ),
]
