"""Demo registry data: freeze the best accepted candidate of each demo campaign and put the
first into shadow, so the registry pages have something real to show. Safe to run again."""

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from apps.campaigns.constants import NodeStatus
from apps.campaigns.models import Campaign
from apps.registry.constants import Stage
from apps.registry.models import Artifact
from apps.registry.services.artifacts import artifact_create
from apps.registry.services.promotion import artifact_approve, artifact_promote

# Operators whose demo artifacts each go to shadow (the others: the first per platform only).
DEMO_SERVED = ("rms-norm", "softmax")


def registry_demo_seed() -> list[str]:
    """Freeze each demo campaign's best accepted node (reviewer); per platform, approve the
    first into shadow, and every RMSNorm and softmax one (on `interpret` the demo traffic then
    gives them real calls)."""
    reviewer = User.objects.filter(username="reviewer").first()
    admin = User.objects.filter(username="admin").first()
    if reviewer is None:
        return ["registry: no demo reviewer; skipped"]
    lines = []
    for campaign in Campaign.objects.select_related("best_node").order_by("id"):
        node = campaign.best_node
        if node is None or node.status != NodeStatus.ACCEPTED:
            node = campaign.nodes.filter(status=NodeStatus.ACCEPTED).order_by("-id").first()
        if node is None:
            continue
        if Artifact.objects.filter(node=node).exists():
            continue
        try:
            artifact = artifact_create(node=node, by=reviewer)
        except ValidationError as exc:
            lines.append(f"registry: {campaign.name}/{node.key} not frozen: {exc.messages[0]}")
            continue
        lines.append(f"registry: artifact #{artifact.pk} from {campaign.name}/{node.key}")
        staged = Artifact.objects.filter(region__platform=campaign.platform).exclude(
            stage=Stage.CANDIDATE
        )
        if artifact.region.operator in DEMO_SERVED:
            # RMSNorm and softmax each start in shadow: a new user takes them on to default,
            # where the model check runs the demo decoder stock vs patched with them.
            staged = staged.filter(region=artifact.region)
        if admin is not None and not staged.exists():
            try:
                artifact_approve(artifact=artifact, by=admin, reason="demo")
                artifact_promote(artifact=artifact, by=admin, reason="demo: start shadowing")
                lines.append(f"registry: artifact #{artifact.pk} in shadow")
            except ValidationError as exc:
                lines.append(f"registry: #{artifact.pk} stays a candidate: {exc.messages[0]}")
    if not lines:
        lines.append(
            "registry: no accepted candidates yet; run seed_demo again once demo campaigns "
            "accept some"
        )
    return lines
