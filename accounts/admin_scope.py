"""Django admin scoped to organizations.

Superusers see everything. Staff who are not superusers see and edit only the objects of
organizations where they are an owner or admin; every foreign-key choice is narrowed to
those orgs, and saving into another org is refused.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from accounts import audit
from accounts.models import ADMIN_ROLES, Membership


def admin_org_ids(request: HttpRequest) -> set[int]:
    cached = getattr(request, "_mnemo_admin_orgs", None)
    if cached is None:
        cached = set()
        if request.user.pk is not None:  # an anonymous user administers no org
            cached = set(
                Membership.objects.filter(
                    user_id=request.user.pk, role__in=ADMIN_ROLES
                ).values_list("org_id", flat=True)
            )
        request._mnemo_admin_orgs = cached  # type: ignore[attr-defined]
    return cached


class OrgScopedAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    org_field = "org"

    def _allowed(self, request: HttpRequest) -> bool:
        user = request.user
        return bool(
            user.is_active
            and user.is_staff
            and (user.is_superuser or admin_org_ids(request))
        )

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self._allowed(request)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allowed(request) and self._owns(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allowed(request) and self._owns(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self._allowed(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._allowed(request) and self._owns(request, obj)

    def _org_id_of(self, obj: Any) -> int | None:
        value = obj
        for part in self.org_field.split("__"):
            value = getattr(
                value, part if value is not obj or part != "org" else "org", None
            )
            if value is None:
                return None
        return value.pk if hasattr(value, "pk") else value

    def _owns(self, request: HttpRequest, obj: Any) -> bool:
        if obj is None or request.user.is_superuser:
            return True
        return self._org_id_of(obj) in admin_org_ids(request)

    def get_queryset(self, request: HttpRequest) -> Any:
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        return qs.filter(**{f"{self.org_field}__in": admin_org_ids(request)})

    def formfield_for_foreignkey(
        self, db_field: Any, request: HttpRequest, **kwargs: Any
    ) -> Any:
        if not request.user.is_superuser:
            orgs = admin_org_ids(request)
            model = db_field.related_model
            if model._meta.label == "accounts.Organization":
                kwargs["queryset"] = model.objects.filter(pk__in=orgs)
            elif any(f.name == "org" for f in model._meta.fields):
                kwargs["queryset"] = model.objects.filter(org__in=orgs)
            elif model._meta.label == "auth.User":
                kwargs["queryset"] = model.objects.filter(
                    memberships__org__in=orgs
                ).distinct()
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(
        self, db_field: Any, request: HttpRequest, **kwargs: Any
    ) -> Any:
        if not request.user.is_superuser:
            model = db_field.related_model
            if any(f.name == "org" for f in model._meta.fields):
                kwargs["queryset"] = model.objects.filter(
                    org__in=admin_org_ids(request)
                )
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    def save_model(
        self, request: HttpRequest, obj: Any, form: Any, change: bool
    ) -> None:
        if not request.user.is_superuser and self._org_id_of(obj) not in admin_org_ids(
            request
        ):
            raise PermissionDenied("not an admin of this organization")
        super().save_model(request, obj, form, change)
        self.audit_save(request, obj, form, change)

    def audit_save(
        self, request: HttpRequest, obj: Any, form: Any, change: bool
    ) -> None:
        """Record who changed what in admin: the changed fields, before and after."""
        changed = [n for n in getattr(form, "changed_data", []) if n in form.fields]
        if change and not changed:
            return
        fields = [f for f in changed if _is_field(obj, f)]
        audit.audit_record(
            org_id=self._org_id_of(obj),
            action=audit.admin_action(
                obj._meta.label_lower, adding=not change, changed=fields
            ),
            user=request.user,
            target=obj,
            before=(
                {f: audit.jsonable(form.initial.get(f)) for f in fields}
                if change
                else None
            ),
            after=audit.model_fields(obj, fields),
            request=request,
        )

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        audit.audit_record(
            org_id=self._org_id_of(obj),
            action="admin.delete",
            user=request.user,
            target=obj,
            before={"repr": str(obj)},
            request=request,
        )
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            audit.audit_record(
                org_id=self._org_id_of(obj),
                action="admin.delete",
                user=request.user,
                target=obj,
                before={"repr": str(obj)},
                request=request,
            )
        super().delete_queryset(request, queryset)

    def save_formset(
        self, request: HttpRequest, form: Any, formset: Any, change: bool
    ) -> None:
        super().save_formset(request, form, formset, change)
        for obj, changed in getattr(formset, "changed_objects", []):
            fields = [f for f in changed if _is_field(obj, f)]
            audit.audit_record(
                org_id=self._org_id_of(form.instance),
                action=audit.admin_action(
                    obj._meta.label_lower, adding=False, changed=fields
                ),
                user=request.user,
                target=obj,
                after=audit.model_fields(obj, fields),
                request=request,
            )


def _is_field(obj: Any, name: str) -> bool:
    try:
        obj._meta.get_field(name)
    except Exception:  # noqa: BLE001 - a form-only field
        return False
    return True
