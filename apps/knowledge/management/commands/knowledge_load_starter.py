"""Load the starter set of knowledge entries (apps/knowledge/starter/*.md); safe to rerun."""

from django.core.management.base import BaseCommand

from apps.knowledge.services.imports import knowledge_starter_load


class Command(BaseCommand):
    help = "Load the starter knowledge entries (Triton on Hopper, the interpreter, anti-cheat)."

    def handle(self, *args, **options):
        result = knowledge_starter_load()
        self.stdout.write(
            f"knowledge starter: {len(result.created)} created, {len(result.updated)} updated, "
            f"{len(result.unchanged)} unchanged"
        )
        for name, error in result.errors.items():
            self.stderr.write(f"  {name}: {error}")
