from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest
from django.utils import timezone

from accounts import audit
from accounts.admin_scope import OrgScopedAdmin, admin_org_ids
from accounts.models import Agent, ApiKey, Membership, Organization, Team, hash_secret


@admin.register(Organization)
class OrganizationAdmin(OrgScopedAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}

    def get_queryset(self, request: HttpRequest) -> Any:
        qs = admin.ModelAdmin.get_queryset(self, request)
        return (
            qs
            if request.user.is_superuser
            else qs.filter(pk__in=admin_org_ids(request))
        )

    def _org_id_of(self, obj: Any) -> int | None:
        return obj.pk

    def has_add_permission(self, request: HttpRequest) -> bool:
        return request.user.is_superuser


@admin.register(Team)
class TeamAdmin(OrgScopedAdmin):
    list_display = ["name", "org", "slug"]
    list_filter = ["org"]
    search_fields = ["name"]


@admin.register(Membership)
class MembershipAdmin(OrgScopedAdmin):
    list_display = ["user", "org", "role"]
    list_filter = ["org", "role"]
    filter_horizontal = ["teams"]


class ApiKeyInline(admin.TabularInline):  # type: ignore[type-arg]
    model = ApiKey
    extra = 0
    fields = ["name", "prefix", "read_only", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Agent)
class AgentAdmin(OrgScopedAdmin):
    list_display = ["name", "org", "team", "default_visibility", "is_active"]
    list_filter = ["org", "is_active"]
    inlines = [ApiKeyInline]


@admin.register(ApiKey)
class ApiKeyAdmin(OrgScopedAdmin):
    list_display = [
        "__str__",
        "agent",
        "org",
        "read_only",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["org"]
    readonly_fields = ["prefix", "last_used_at", "created_at", "created_by", "org"]
    fields = [
        "agent",
        "name",
        "read_only",
        "prefix",
        "org",
        "created_at",
        "created_by",
        "last_used_at",
        "revoked_at",
    ]
    actions = ["revoke"]

    def _org_id_of(self, obj: Any) -> int | None:
        return obj.agent.org_id if obj.agent_id else None

    def save_model(
        self, request: HttpRequest, obj: ApiKey, form: Any, change: bool
    ) -> None:
        if not change:
            import secrets

            obj.org_id = obj.agent.org_id
            obj.prefix = secrets.token_hex(4)
            secret = secrets.token_urlsafe(32)
            obj.hashed_secret = hash_secret(secret)
            obj.created_by_id = request.user.pk
            super().save_model(request, obj, form, change)
            messages.warning(
                request,
                f"New API key (shown once, copy it now): mnemo_{obj.prefix}_{secret}",
            )
            return
        super().save_model(request, obj, form, change)

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        keys = list(queryset.filter(revoked_at__isnull=True))
        now = timezone.now()
        n = ApiKey.objects.filter(pk__in=[k.pk for k in keys]).update(revoked_at=now)
        for key in keys:
            audit.audit_record(
                org_id=key.org_id,
                action="apikey.revoke",
                user=request.user,
                target=key,
                before={"revoked_at": None},
                after={"revoked_at": now},
                request=request,
            )
        self.message_user(request, f"Revoked {n} key(s).")
