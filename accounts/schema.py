"""OpenAPI description of the API-key authentication (drf-spectacular extension)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "accounts.authentication.ApiKeyAuthentication"
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "mnemo_<prefix>_<secret>",
            "description": "An agent's API key, shown once when it is created.",
        }


ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "error": {"type": "string"},
        "field": {"type": "string"},
        "detail": {},
    },
    "required": ["error"],
}
# Every operation can answer with these (docs/security.md lists when).
COMMON_ERRORS = {
    "400": "Invalid input; `field` names the first offending field.",
    "401": "Missing, invalid or revoked API key.",
    "403": "Authenticated but not allowed (not a member, read-only role or key).",
    "404": "Not found, or not visible to the caller (the same answer).",
    "413": "Request body larger than MNEMO_MAX_BODY_BYTES.",
    "429": "Over the key's rate limit; see Retry-After.",
    "503": "The database or a required service is unavailable; see Retry-After.",
}
WRITE_ERRORS = {
    "409": "State conflict, or an Idempotency-Key still in flight.",
    "422": "Idempotency-Key reused with a different body.",
}


def add_error_responses(result: dict[str, Any], **_: Any) -> dict[str, Any]:
    """drf-spectacular post-processing hook: document the shared error shape."""
    components = result.setdefault("components", {}).setdefault("schemas", {})
    components["Error"] = ERROR_SCHEMA
    ref = {"$ref": "#/components/schemas/Error"}
    for methods in result.get("paths", {}).values():
        for method, operation in methods.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            errors = dict(COMMON_ERRORS)
            if method in ("post", "put", "patch", "delete"):
                errors.update(WRITE_ERRORS)
            for code, description in errors.items():
                operation["responses"].setdefault(
                    code,
                    {
                        "description": description,
                        "content": {"application/json": {"schema": ref}},
                    },
                )
    return result
