from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from accounts.admin_scope import OrgScopedAdmin
from memory.models import (
    Conflict,
    ConflictAlternative,
    ConflictEvent,
    Entity,
    Memory,
    Mention,
    Relationship,
    Session,
)


class ReadOnlyContentAdmin(OrgScopedAdmin):
    """Memory is append-only: admins change visibility, never content, never delete."""

    editable = ("visibility", "team")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        names = [f.name for f in self.model._meta.fields]
        return [n for n in names if n not in self.editable]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Session)
class SessionAdmin(ReadOnlyContentAdmin):
    list_display = ["external_id", "org", "visibility", "created_at"]
    list_filter = ["org", "visibility"]
    search_fields = ["external_id"]


@admin.register(Memory)
class MemoryAdmin(ReadOnlyContentAdmin):
    list_display = [
        "id",
        "tier",
        "kind",
        "short",
        "org",
        "visibility",
        "status",
        "embedding_state",
    ]
    list_filter = ["org", "tier", "kind", "status", "visibility", "embedding_state"]
    search_fields = ["content", "external_ref"]
    exclude = ["embedding", "derived_from"]
    list_select_related = ["org"]

    @admin.display(description="content")
    def short(self, obj: Memory) -> str:
        return obj.content[:80]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        names = [
            f.name
            for f in self.model._meta.fields
            if f.name not in ("embedding", "search")
        ]
        return [n for n in names if n not in self.editable]


@admin.register(Entity)
class EntityAdmin(OrgScopedAdmin):
    list_display = ["name", "type", "org", "mention_count", "unstable"]
    list_filter = ["org", "type", "unstable"]
    search_fields = ["name", "normalized_name"]
    exclude = ["embedding"]


@admin.register(Mention)
class MentionAdmin(OrgScopedAdmin):
    list_display = ["surface", "entity", "memory", "org"]
    raw_id_fields = ["memory", "entity"]


@admin.register(Relationship)
class RelationshipAdmin(ReadOnlyContentAdmin):
    list_display = ["subject", "predicate", "object_entity", "object_literal", "status"]
    list_filter = ["org", "status"]


class AlternativeInline(admin.TabularInline):  # type: ignore[type-arg]
    model = ConflictAlternative
    extra = 0
    raw_id_fields = ["memory", "relationship"]


class EventInline(admin.TabularInline):  # type: ignore[type-arg]
    model = ConflictEvent
    extra = 0
    readonly_fields = ["action", "actor", "note", "data", "at"]
    can_delete = False


@admin.register(Conflict)
class ConflictAdmin(OrgScopedAdmin):
    list_display = ["id", "kind", "status", "org", "created_at"]
    list_filter = ["org", "kind", "status"]
    inlines = [AlternativeInline, EventInline]
