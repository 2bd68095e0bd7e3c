"""Export entries as Markdown files with front matter into a directory (e.g. a git repo)."""

from pathlib import Path

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from apps.knowledge.selectors.exports import knowledge_export_files


class Command(BaseCommand):
    help = "Write every entry visible to --user (public ones without it) as DIR/<slug>.md."

    def add_arguments(self, parser):
        parser.add_argument("directory")
        parser.add_argument("--user", help="export what this user may see (restricted too)")
        parser.add_argument("--status", action="append", help="only these statuses (repeat)")

    def handle(self, *args, directory, user, status, **options):
        who = None
        if user:
            who = User.objects.filter(username=user).first()
            if who is None:
                raise CommandError(f"no user {user!r}")
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        files = knowledge_export_files(user=who, statuses=status)
        for name, text in files:
            (out / name).write_text(text)
        self.stdout.write(f"exported {len(files)} entries to {out}")
