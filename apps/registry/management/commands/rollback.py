"""``manage.py rollback <region> --reason ... --user ...``: re-point a region's default."""

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.registry.models import Artifact, Region
from apps.registry.services import region_rollback


class Command(BaseCommand):
    help = (
        "Roll a region's default back to the previous default (or --to ARTIFACT_ID, or "
        "--to-reference). The region is its id, or OPERATOR[:PLATFORM] when that is unambiguous."
    )

    def add_arguments(self, parser):
        parser.add_argument("region")
        parser.add_argument("--reason", required=True)
        parser.add_argument("--user", required=True, help="a reviewer or admin username")
        parser.add_argument("--to", type=int, help="artifact id of an earlier default")
        parser.add_argument("--to-reference", action="store_true")

    def _region(self, spec: str) -> Region:
        if spec.isdigit():
            region = Region.objects.filter(pk=int(spec)).first()
        else:
            operator, _, platform = spec.partition(":")
            qs = Region.objects.filter(operator=operator, default_artifact__isnull=False)
            if platform:
                qs = qs.filter(platform=platform)
            if qs.count() > 1:
                ids = ", ".join(str(r.pk) for r in qs)
                raise CommandError(f"{spec} names several serving regions ({ids}): give the id")
            region = qs.first()
        if region is None:
            raise CommandError(f"no region {spec}")
        return region

    def handle(self, *args, **options):
        region = self._region(options["region"])
        user = User.objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"no user {options['user']}")
        to = None
        if options["to"]:
            to = Artifact.objects.filter(pk=options["to"], region=region).first()
            if to is None:
                raise CommandError(f"artifact {options['to']} is not in region {region.pk}")
        before = region.default_artifact
        try:
            region = region_rollback(
                region=region,
                by=user,
                reason=options["reason"],
                to=to,
                to_reference=options["to_reference"],
            )
        except (ValidationError, PermissionDenied) as exc:
            raise CommandError(" ".join(getattr(exc, "messages", [str(exc)]))) from exc
        after = region.default_artifact
        self.stdout.write(
            f"region {region.pk} ({region.operator}/{region.platform}): default "
            f"{before.short if before else 'reference'} -> {after.short if after else 'reference'}"
        )
