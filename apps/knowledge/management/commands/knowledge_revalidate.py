"""Flag entries whose provenance disagrees with the current toolchain fingerprint."""

import json

from django.core.management.base import BaseCommand, CommandError

from apps.knowledge.selectors.toolchain import toolchain_fingerprint_latest
from apps.knowledge.services.revalidation import knowledge_revalidate


class Command(BaseCommand):
    help = (
        "Compare active entries with a toolchain fingerprint (this host's by default, a JSON "
        "file, or the latest a worker reported) and flag those that differ for revalidation."
    )

    def add_arguments(self, parser):
        parser.add_argument("--platform", default="interpret", choices=["interpret", "cuda"])
        source = parser.add_mutually_exclusive_group()
        source.add_argument("--fingerprint", help="a JSON file (workers/fingerprint.py collect)")
        source.add_argument(
            "--from-reports",
            action="store_true",
            help="use the latest fingerprint a worker reported for --platform",
        )
        parser.add_argument("--dry-run", action="store_true")

    def handle(self, *args, platform, fingerprint, from_reports, dry_run, **options):
        if fingerprint:
            with open(fingerprint) as fh:
                fp = json.load(fh)
        elif from_reports:
            fp = toolchain_fingerprint_latest(platform=platform)
            if not fp:
                raise CommandError(f"no evaluation on {platform} has reported a fingerprint yet")
        else:
            from workers.fingerprint import collect

            fp = collect(platform)
        keys = ("platform", "device", "compute_capability", "driver", "cuda", "torch", "triton")
        self.stdout.write("fingerprint: " + ", ".join(f"{k}={fp.get(k)}" for k in keys))
        flagged = knowledge_revalidate(fingerprint=fp, dry_run=dry_run)
        verb = "would flag" if dry_run else "flagged"
        self.stdout.write(f"{verb} {len(flagged)} entries for revalidation")
        for entry, why in flagged:
            self.stdout.write(f"  {entry.slug}: {why}")
