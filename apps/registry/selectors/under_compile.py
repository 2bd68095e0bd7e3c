"""Reads for serving under ``torch.compile``: whether an artifact's kernel beat the compiler.

A patched model under ``torch.compile`` keeps the registry's kernel only where it is known to
beat what Inductor makes of the stock code (``RouteSpec.beats_compile``); everywhere else the
compiler gets the stock code, which it fuses. The registry knows it from the campaign that
accepted the artifact: judged against ``compile`` or ``max-autotune``, and faster on every case
of its fitness. The manifest and the model check carry the flag; the artifact page says why.
"""

from dataclasses import dataclass

from apps.campaigns.constants import Baseline
from apps.registry.models import Artifact

COMPILE_BASELINES = (Baseline.COMPILE, Baseline.MAX_AUTOTUNE)


@dataclass(frozen=True)
class UnderCompile:
    """What serves the artifact's operator in a compiled model, and why."""

    beats: bool
    line: str


def _fitness(artifact: Artifact) -> dict:
    # The signed evidence frozen with the artifact; the node's row for artifacts frozen before
    # the evidence carried it.
    fitness = (artifact.body.get("evidence") or {}).get("fitness")
    if not isinstance(fitness, dict) and artifact.node_id is not None:
        fitness = artifact.node.fitness_detail
    return fitness if isinstance(fitness, dict) else {}


def artifact_under_compile(*, artifact: Artifact) -> UnderCompile:
    """Whether the kernel serves under ``torch.compile`` and the reason, as one line."""
    stock = "Under torch.compile: the model's own code serves"
    campaign = artifact.campaign if artifact.campaign_id is not None else None
    if campaign is None:
        return UnderCompile(False, f"{stock} (no campaign judged it against torch.compile)")
    fitness = _fitness(artifact)
    # The baseline its speedups were measured against; the campaign's when the fitness is silent.
    baseline = fitness.get("baseline") or campaign.baseline
    if baseline not in COMPILE_BASELINES:
        return UnderCompile(False, f"{stock} (judged against {baseline}, not torch.compile)")
    per_case = fitness.get("per_case") or {}
    if not per_case:
        return UnderCompile(False, f"{stock} (its campaign timed no case against {baseline})")
    slower = sorted((s, c) for c, s in per_case.items() if not (float(s) >= 1.0))
    if slower:
        worst = ", ".join(f"{c} ({s:.3f}×)" for s, c in slower)
        return UnderCompile(False, f"{stock} (slower than {baseline} on case {worst})")
    return UnderCompile(
        True,
        "Under torch.compile: the kernel serves (it beat compile on every case of its campaign)",
    )


def artifact_beats_compile(*, artifact: Artifact) -> bool:
    """True when the artifact's campaign judged it against ``torch.compile`` (``compile`` or
    ``max-autotune``) and it was faster on every case (each per-case speedup at least 1)."""
    return artifact_under_compile(artifact=artifact).beats
