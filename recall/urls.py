from django.urls import path

from recall import api

urlpatterns = [
    path("recall", api.RecallView.as_view(), name="api-recall"),
    path("search", api.SearchView.as_view(), name="api-search"),
    path("similar", api.SimilarView.as_view(), name="api-similar"),
    path("memories/<int:memory_id>/trace", api.TraceView.as_view(), name="api-memory-trace"),
]
