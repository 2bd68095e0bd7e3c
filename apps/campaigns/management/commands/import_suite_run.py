"""Bring in a benchmark-suite run: `manage.py import_suite_run kb1.json --name kb1-h100`."""

import json
from pathlib import Path

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.campaigns.services.suites import suite_run_import


class Command(BaseCommand):
    help = "Import the JSON written by `python scripts/bench_kernelbench.py --out FILE`."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--name", default="", help="the run's name (default: the file's stem)")
        parser.add_argument("--user", default=None, help="username recorded as the importer")

    def handle(self, path, name, user, **options):
        try:
            doc = json.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CommandError(f"cannot read {path}: {exc}") from exc
        importer = User.objects.filter(username=user).first() if user else None
        try:
            run = suite_run_import(doc=doc, name=name or Path(path).stem, imported_by=importer)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(
            f"imported suite run {run.pk} ({run.name}): {run.results.count()} problems"
        )
