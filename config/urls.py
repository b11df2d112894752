from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from memory import health
from recall.mcp_http import McpView

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path(
        "api/docs/",
        SpectacularSwaggerView.as_view(url_name="schema"),
        name="swagger-ui",
    ),
    path("api/v1/", include("memory.api.urls")),
    path("api/v1/", include("recall.urls")),
    path("mcp", McpView.as_view(), name="mcp"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("ui.urls")),
]

handler404 = "memory.api.errors.page_not_found"
handler500 = "memory.api.errors.server_error"
