"""Import Markdown entries (files or directories); a known slug becomes a new version."""

from pathlib import Path

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from apps.knowledge.services.imports import knowledge_import


class Command(BaseCommand):
    help = "Import Markdown files with front matter (a directory imports its *.md files)."

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+")
        parser.add_argument("--user", help="the author recorded on created versions")

    def handle(self, *args, paths, user, **options):
        by = None
        if user:
            by = User.objects.filter(username=user).first()
            if by is None:
                raise CommandError(f"no user {user!r}")
        files = []
        for raw in paths:
            path = Path(raw)
            found = sorted(path.glob("*.md")) if path.is_dir() else [path]
            files += [(p.name, p.read_text()) for p in found]
        result = knowledge_import(files=files, by=by)
        self.stdout.write(
            f"{len(result.created)} created, {len(result.updated)} updated, "
            f"{len(result.unchanged)} unchanged, {len(result.errors)} errors"
        )
        for name, error in result.errors.items():
            self.stderr.write(f"  {name}: {error}")
        if result.errors:
            raise CommandError("some files were not imported")
