"""Bring in a search that ran standalone on a GPU host: `manage.py import_campaign OUT.json`."""

import json

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.campaigns.services.imports import campaign_import


class Command(BaseCommand):
    help = "Import the JSON written by `python -m workers search --json OUT.json`."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--user", default=None, help="username recorded as the author")
        parser.add_argument("--name", default="")

    def handle(self, path, user, name, **options):
        try:
            with open(path) as handle:
                summary = json.load(handle)
        except (OSError, json.JSONDecodeError) as exc:
            raise CommandError(f"cannot read {path}: {exc}") from exc
        author = User.objects.filter(username=user).first() if user else None
        try:
            campaign = campaign_import(summary=summary, created_by=author, name=name)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(
            f"imported campaign {campaign.pk}: {campaign.nodes.count()} nodes, "
            f"outcome {campaign.outcome}"
        )
