"""Create (and start) a campaign from files or a catalog problem; optionally follow it."""

import json
import time
from pathlib import Path

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.campaigns.constants import FINISHED_STATUSES
from apps.campaigns.models import Campaign, Problem
from apps.campaigns.services.campaigns import campaign_create
from apps.campaigns.services.problems import catalog_sync, problem_create


def campaign_follow(stdout, campaign_id: int, poll_s: float = 2.0) -> Campaign:
    """Print progress lines until the campaign finishes."""
    last = None
    while True:
        campaign = Campaign.objects.get(pk=campaign_id)
        line = (
            f"[{campaign.status}] {campaign.candidates_evaluated}/{campaign.budget_candidates} "
            f"evaluated, accepted {campaign.funnel.get('accepted', 0)}, "
            f"device {campaign.device_seconds:.2f}s"
        )
        if line != last:
            stdout.write(line)
            last = line
        if campaign.status in FINISHED_STATUSES:
            stdout.write(
                f"outcome: {campaign.outcome or campaign.status}: {campaign.outcome_reason}"
            )
            return campaign
        time.sleep(poll_s)


class Command(BaseCommand):
    help = "Create a campaign: --problem is a KernelBench file or a catalog problem name."

    def add_arguments(self, parser):
        parser.add_argument("--problem", required=True)
        parser.add_argument("--workload", help="workload JSON file")
        parser.add_argument("--platform", default="interpret", choices=["interpret", "cuda"])
        parser.add_argument("--generator", default="template", help="template[,llm]")
        parser.add_argument("--policy", default="best_first", choices=["best_first", "islands"])
        parser.add_argument("--budget-candidates", type=int, default=12)
        parser.add_argument("--user", default="engineer")
        parser.add_argument("--follow", action="store_true", help="print progress until done")

    def handle(self, **opts):
        user = User.objects.filter(username=opts["user"]).first()
        if user is None:
            raise CommandError(f"no user {opts['user']!r} (run `manage.py seed_demo`?)")
        workload = None
        if opts["workload"]:
            try:
                workload = json.loads(Path(opts["workload"]).read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise CommandError(f"cannot read workload {opts['workload']}: {exc}") from exc
        try:
            problem = self._problem(opts["problem"], user)
            campaign = campaign_create(
                problem=problem,
                created_by=user,
                platform=opts["platform"],
                generators=opts["generator"].split(","),
                policy=opts["policy"],
                workload=workload,
                budget_candidates=opts["budget_candidates"],
            )
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        self.stdout.write(f"campaign {campaign.pk} started: {campaign.name}")
        if opts["follow"]:
            campaign_follow(self.stdout, campaign.pk)

    def _problem(self, spec: str, user) -> Problem:
        path = Path(spec)
        if path.suffix == ".py":
            try:
                source = path.read_text()
            except OSError as exc:
                raise CommandError(f"cannot read {spec}: {exc}") from exc
            existing = Problem.objects.filter(source=source).first()
            return existing or problem_create(name=path.stem, source=source, created_by=user)
        catalog_sync()
        problem = Problem.objects.filter(name=spec.replace("_", "-")).first()
        if problem is None:
            names = ", ".join(Problem.objects.values_list("name", flat=True))
            raise CommandError(f"no problem {spec!r}; catalog: {names}")
        return problem
