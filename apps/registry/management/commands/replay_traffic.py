"""``manage.py replay_traffic <operator>``: drive a dispatch client against a running portal
with the operator's workload, so shadow and canary stages get real calls."""

import json
import tempfile

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from apps.registry import selectors


class Command(BaseCommand):
    help = "Replay an operator's workload through a runtime dispatch client (portal must run)."

    def add_arguments(self, parser):
        parser.add_argument("operator")
        parser.add_argument("--url", default="http://127.0.0.1:8000")
        parser.add_argument(
            "--user", default="runtime", help="whose API token the client uses (runtime role)"
        )
        parser.add_argument("--platform", default="interpret", choices=["interpret", "cuda"])
        parser.add_argument("--calls", type=int, default=200)
        parser.add_argument("--seed", type=int, default=None, help="default: a fresh one (logged)")
        parser.add_argument("--poll-interval", type=float, default=10.0)

    def handle(self, *args, **options):
        from workers.runtime.client import DispatchClient
        from workers.runtime.replay import replay

        region = selectors.region_list(operator=options["operator"]).first()
        if region is None or region.problem is None:
            raise CommandError(f"no region serves {options['operator']}")
        artifact = region.artifacts.select_related("campaign").order_by("-id").first()
        workload = artifact.campaign.workload if artifact else region.problem.smoke_workload
        user = User.objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"no user {options['user']}")
        # Reuse the user's token: issuing a new one would cut off their other clients.
        token = Token.objects.get_or_create(user=user)[0].key
        with tempfile.TemporaryDirectory(prefix="ke-replay-") as cache:
            client = DispatchClient(
                options["url"],
                token,
                platform=options["platform"],
                cache_dir=cache,
                poll_interval_s=options["poll_interval"],
                seed=options["seed"],
            )
            if client.manifest is None:
                raise CommandError(f"no manifest from {options['url']}: {client.last_error}")
            try:
                summary = replay(
                    client,
                    operator=options["operator"],
                    problem_source=region.problem.source,
                    workload=workload,
                    calls=options["calls"],
                    seed=options["seed"],
                )
            finally:
                client.close()
        self.stdout.write(json.dumps(summary.to_dict(), indent=2))
