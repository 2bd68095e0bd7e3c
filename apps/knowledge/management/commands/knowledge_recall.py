"""Retrieval quality: recall@k of a labelled query set (apps/knowledge/eval/queries.json)."""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from apps.knowledge.selectors.recall import recall_at_k
from apps.knowledge.services.imports import knowledge_starter_load

QUERIES = Path(__file__).resolve().parents[2] / "eval" / "queries.json"


class Command(BaseCommand):
    help = "Report recall@k of knowledge retrieval on the labelled queries (public entries)."

    def add_arguments(self, parser):
        parser.add_argument("--queries", default=str(QUERIES))
        parser.add_argument("-k", type=int, default=5)
        parser.add_argument(
            "--load-starter", action="store_true", help="load the starter set first"
        )
        parser.add_argument(
            "--no-full-text",
            dest="full_text",
            action="store_false",
            help="ablation: rank by platform/family filters and boosts only",
        )
        parser.add_argument("--json", dest="as_json", action="store_true", help="print JSON")

    def handle(self, *args, queries, k, load_starter, as_json, full_text, **options):
        if load_starter:
            knowledge_starter_load()
        labelled = json.loads(Path(queries).read_text())
        report = recall_at_k(labelled=labelled, k=k, full_text=full_text)
        if report["missing"]:
            raise CommandError(f"expected entries not in the base: {report['missing']}")
        if as_json:
            self.stdout.write(json.dumps(report, indent=1))
            return
        for row in report["queries"]:
            mark = "ok " if row["recall"] == 1 else "MISS"
            self.stdout.write(f"{mark} {row['recall']:.2f}  {row['name']}: {row['missed']}")
        self.stdout.write(
            f"recall@{k} = {report['recall']:.3f} over {len(report['queries'])} queries, "
            f"{report['entries']} entries, "
            f"{connection.vendor + ' full-text' if full_text else 'filters only'} "
            f"(MRR {report['mrr']:.3f})"
        )
