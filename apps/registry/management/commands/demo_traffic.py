"""``manage.py demo_traffic``: keep the one-machine demo's registry alive.

Every `--every` seconds: freeze newly accepted demo candidates (the first per platform goes to
shadow), then replay a little of each `interpret` region's workload through a real dispatch
client against the running portal, so shadow and canary stages show real calls, mismatches and
latency. `make run` starts it beside the web server and the worker; it never stops on an error.
"""

import io
import os
import time

from django.core.management import call_command
from django.core.management.base import BaseCommand

from apps.registry import selectors
from apps.registry.constants import Stage
from apps.registry.services.demo import registry_demo_seed


class Command(BaseCommand):
    help = "Demo only: freeze accepted demo candidates and replay traffic on interpret regions."

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000")
        parser.add_argument("--every", type=float, default=30.0)
        parser.add_argument("--calls", type=int, default=20)
        parser.add_argument("--once", action="store_true", help="one round, then exit")

    def handle(self, *args, **options):
        # The dispatch client interprets Triton kernels in this process: the interpreter must be
        # on before triton is first imported.
        os.environ.setdefault("TRITON_INTERPRET", "1")
        while True:
            self._round(options)
            if options["once"]:
                return
            time.sleep(options["every"])

    def _round(self, options) -> None:
        try:
            for line in registry_demo_seed():
                if "artifact #" in line:
                    self.stdout.write(line)
            active = (Stage.SHADOW, Stage.CANARY, Stage.DEFAULT)
            for region in selectors.region_list(platform="interpret"):
                if not region.artifacts.filter(stage__in=active).exists():
                    continue
                call_command(
                    "replay_traffic",
                    region.operator,
                    url=options["url"],
                    calls=options["calls"],
                    platform="interpret",
                    stdout=io.StringIO(),  # the replay summary is not needed here
                )
                self.stdout.write(f"demo traffic: {options['calls']} calls to {region.operator}")
        except Exception as exc:  # noqa: BLE001 - the demo driver reports and carries on
            self.stderr.write(f"demo traffic: {type(exc).__name__}: {exc}")
