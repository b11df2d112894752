from django.core.management.base import BaseCommand

from memory.demo import seed_demo


class Command(BaseCommand):
    help = "Create the demo org, users, agent, API key and a few hundred memories."

    def handle(self, *args: object, **options: object) -> None:
        creds = seed_demo()
        from memory.models import Memory

        n = Memory.objects.filter(org=creds.org).count()
        line = "-" * 72
        self.stdout.write(
            f"{line}\nMnemo demo is ready ({n} memories in org '{creds.org.slug}').\n"
            f"  Web UI / admin : http://127.0.0.1:8000/admin/  "
            f"user {creds.admin_username} / password {creds.admin_password}\n"
            f"  API key        : {creds.api_key}\n"
            f"  Try            : curl -H 'Authorization: Bearer {creds.api_key}' "
            f"http://127.0.0.1:8000/api/v1/sessions\n{line}"
        )
