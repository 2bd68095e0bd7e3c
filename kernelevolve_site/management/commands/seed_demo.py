"""Load the demo: one user per role (passwords printed) and demo data for every page.

It lives in the site, the layer above the apps, because it seeds every one of them (issue 13:
``campaigns`` is the base and imports neither ``knowledge`` nor ``registry``)."""

from django.core.management.base import BaseCommand

from apps.accounts.services import demo_users_seed
from apps.campaigns.services.demo import demo_campaigns_seed
from apps.knowledge.services.demo import knowledge_demo_seed
from apps.registry.services.demo import registry_demo_seed


class Command(BaseCommand):
    help = "Create demo users (one per role) and demo data. Safe to run again."

    def handle(self, *args, **options):
        rows = demo_users_seed()
        self.stdout.write("Demo users (username / password / role):")
        for username, password, role in rows:
            self.stdout.write(f"  {username:<10} {password:<22} {role}")
        for line in demo_campaigns_seed():
            self.stdout.write(line)
        for line in knowledge_demo_seed():
            self.stdout.write(line)
        for line in registry_demo_seed():
            self.stdout.write(line)
