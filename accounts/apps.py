from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts and access"

    def ready(self) -> None:
        from accounts import (  # noqa: F401
            rls,  # connects the Celery task-scope signals
            schema,  # registers the API-key scheme with drf-spectacular
        )
