"""Freeze an accepted candidate as a signed artifact; narrow one (which makes a new artifact)."""

import functools
import json

from django.db import transaction
from django.utils import timezone

from apps.campaigns.constants import Backend, NodeStatus
from apps.campaigns.models import Node
from apps.registry import signing
from apps.registry.constants import ARTIFACT_SCHEMA, TOOLCHAIN_KEYS, EventKind, Stage
from apps.registry.models import Artifact, Region
from apps.registry.services.common import RegistryError, event_add, require
from workers.boundary import BoundaryUnavailable
from workers.confined import ConfinedFailure, run_confined
from workers.runtime import scope as S
from workers.runtime.signing import digest, sha256_text

SCOPE_TIMEOUT_S = 120
SCOPE_MEMORY_BYTES = 8 << 30


@functools.lru_cache(maxsize=64)
def _derive_scope(problem_source: str, cases_json: str) -> dict:
    """Run the problem's ``get_inputs`` on the meta device behind the sandbox boundary (the
    problem is untrusted code: never in the web server, never with its rights)."""
    request = {"problem_source": problem_source, "cases": json.loads(cases_json)}
    try:
        answer = run_confined(
            "workers.runtime.scope",
            request,
            timeout_s=SCOPE_TIMEOUT_S,
            cpu_s=SCOPE_TIMEOUT_S,
            memory_bytes=SCOPE_MEMORY_BYTES,
        )
    except (BoundaryUnavailable, ConfinedFailure) as exc:
        raise RegistryError(f"could not derive the region from the workload: {exc}") from exc
    scope = answer.get("scope")
    if not isinstance(scope, dict) or not isinstance(scope.get("inputs"), list):
        reason = answer.get("error") or "the problem answered no scope"
        raise RegistryError(f"could not derive the region from the workload: {reason}")
    return scope


def passed_cases(report: dict) -> list[dict]:
    """The workload cases the candidate passed, with the constants it really ran with."""
    out = []
    for case in report.get("cases") or []:
        if case.get("kind") != "workload" or case.get("status") != "passed":
            continue
        overrides = dict(case.get("overrides") or {})
        scaled = case.get("scaled_for_interpreter")
        if scaled and scaled.get("used"):
            overrides = dict(scaled["used"])
        out.append({"name": case["name"], "overrides": overrides, "dtype": case.get("dtype")})
    return out


def _in_box(case: dict, dtypes, constants) -> bool:
    if dtypes is not None and (case.get("dtype") or "float32") not in dtypes:
        return False
    for name, (lo, hi) in (constants or {}).items():
        value = case["overrides"].get(name)
        if isinstance(value, int) and not lo <= value <= hi:
            return False
    return True


def _scope_for(problem_source: str, cases: list[dict]) -> dict:
    key = json.dumps([{k: c[k] for k in ("overrides", "dtype")} for c in cases], sort_keys=True)
    return _derive_scope(problem_source, key)


def _compile_evidence(report: dict) -> tuple[dict, list[dict]]:
    """(IR texts per kernel, binaries: hashes and ptxas numbers) from the compile gate."""
    gate = next((g for g in report.get("gates") or [] if g.get("name") == "compile"), None)
    ir, binaries = {}, []
    for entry in ((gate or {}).get("evidence") or {}).get("artifacts") or []:
        name = entry.get("kernel", "kernel")
        label = f"{name}:{len(binaries)}"
        ir[label] = dict(entry.get("ir") or {})
        binaries.append(
            {
                "kernel": name,
                "label": label,
                "cubin_sha256": entry.get("cubin_sha256"),
                "cubin_bytes": entry.get("cubin_bytes"),
                "target": entry.get("target"),
                "constexprs": entry.get("constexprs"),
                "registers": entry.get("registers"),
                "spill_stores": entry.get("spill_stores"),
                "num_warps": entry.get("num_warps"),
                "backend": entry.get("backend") or Backend.TRITON,
                "arch": entry.get("arch"),
                "ir_sha256": {k: sha256_text(v) for k, v in (entry.get("ir") or {}).items()},
            }
        )
    return ir, binaries


def _evidence(node: Node, report: dict) -> dict:
    return {
        "campaign": node.campaign_id,
        "campaign_name": node.campaign.name,
        "campaign_author": getattr(node.campaign.created_by, "username", None),
        "node": node.key,
        "verdict": report.get("verdict"),
        "reason": report.get("reason"),
        "gates": [
            {k: g.get(k) for k in ("name", "status", "reason", "rule")}
            for g in report.get("gates") or []
        ],
        "cases": [
            {k: c.get(k) for k in ("name", "kind", "dtype", "status", "max_abs_err", "max_rel_err")}
            for c in report.get("cases") or []
        ],
        "fitness": report.get("fitness"),
        "flags": report.get("flags") or [],
    }


def _freeze(*, node, region, scope, cases, by, supersedes=None) -> Artifact:
    report = node.report or {}
    campaign = node.campaign
    ir, binaries = _compile_evidence(report)
    workload = campaign.workload or {}
    body = {
        "schema": ARTIFACT_SCHEMA,
        "operator": region.operator,
        "family": region.family,
        "platform": region.platform,
        "region": region.pk,
        "scope": scope,
        "cases": cases,
        "source": node.source,
        "source_sha256": sha256_text(node.source),
        "backend": node.backend,
        "problem_sha256": sha256_text(campaign.problem.source),
        "binaries": binaries,
        "toolchain": {k: (report.get("fingerprint") or {}).get(k) for k in TOOLCHAIN_KEYS},
        "harness_hash": report.get("harness_hash") or "",
        "tolerance": workload.get("tolerance") if isinstance(workload, dict) else None,
        "evidence": _evidence(node, report),
        "created_by": by.username,
        "created_at": timezone.now().isoformat(),
        "supersedes": supersedes.digest if supersedes else None,
        "key_id": signing.key_id(),
    }
    body = json.loads(json.dumps(body))  # exactly what a JSON round trip gives back
    artifact = Artifact.objects.create(
        region=region,
        campaign=campaign,
        node=node,
        digest=digest(body),
        body=body,
        signature=signing.sign(body),
        key_id=signing.key_id(),
        ir=ir,
        supersedes=supersedes,
        created_by=by,
    )
    event_add(
        region=region,
        kind=EventKind.CREATED,
        actor=by,
        artifact=artifact,
        to_stage=Stage.CANDIDATE,
        to_artifact=artifact.digest,
        reason=f"frozen from {campaign.name} / {node.key}"
        + (f" (narrows #{supersedes.pk})" if supersedes else ""),
        evidence={"scope": scope, "evidence": body["evidence"]},
    )
    return artifact


def artifact_create(
    *, node: Node, by, dtypes: list[str] | None = None, constants: dict | None = None
) -> Artifact:
    """Freeze an accepted node: region from the workload it passed, optionally narrowed."""
    require(by, "create_artifact")
    if node.status != NodeStatus.ACCEPTED or not node.report:
        raise RegistryError(f"candidate {node.key} is {node.status}: only accepted ones freeze")
    cases = passed_cases(node.report)
    if not cases:
        raise RegistryError("the candidate passed no workload case: no region to serve")
    problem = node.campaign.problem
    full = _scope_for(problem.source, cases)
    narrowed_cases = cases
    if dtypes is not None or constants:
        try:
            S.narrow(full, dtypes=dtypes, constants=constants)
        except S.ScopeError as exc:
            raise RegistryError(str(exc)) from exc
        narrowed_cases = [c for c in cases if _in_box(c, dtypes, constants)]
        if not narrowed_cases:
            raise RegistryError("no case the candidate passed lies inside the narrowed region")
    scope = _scope_for(problem.source, narrowed_cases) if narrowed_cases != cases else full
    live = Artifact.objects.filter(node=node).exclude(stage=Stage.ABORTED)
    if any(a.scope == scope for a in live):
        raise RegistryError(f"candidate {node.key} is frozen with this region already")
    with transaction.atomic():
        region, _ = Region.objects.get_or_create(
            operator=problem.name,
            platform=node.campaign.platform,
            scope_key=digest(full),
            defaults={
                "family": problem.family,
                "problem": problem,
                "scope": full,
                "label": S.describe(full),
            },
        )
        return _freeze(node=node, region=region, scope=scope, cases=narrowed_cases, by=by)


def artifact_narrow(
    *, artifact: Artifact, by, dtypes: list[str] | None = None, constants: dict | None = None
) -> Artifact:
    """A new artifact with a narrower scope (the old one's approvals do not carry over)."""
    require(by, "create_artifact")
    if artifact.stage in (Stage.ABORTED, Stage.RETIRED):
        raise RegistryError(f"artifact #{artifact.pk} is {artifact.stage}")
    try:
        S.narrow(artifact.scope, dtypes=dtypes, constants=constants)
    except S.ScopeError as exc:
        raise RegistryError(str(exc)) from exc
    cases = [c for c in artifact.body.get("cases", []) if _in_box(c, dtypes, constants)]
    if not cases:
        raise RegistryError("no case the candidate passed lies inside the narrowed region")
    scope = _scope_for(artifact.campaign.problem.source, cases)
    if scope == artifact.scope:
        raise RegistryError("the narrowed region is the same as the artifact's: nothing changes")
    with transaction.atomic():
        new = _freeze(
            node=artifact.node,
            region=artifact.region,
            scope=scope,
            cases=cases,
            by=by,
            supersedes=artifact,
        )
        if artifact.stage == Stage.CANDIDATE:
            from apps.registry.services.promotion import _set_stage

            _set_stage(artifact, Stage.ABORTED, f"superseded by narrowed artifact #{new.pk}")
            event_add(
                region=artifact.region,
                kind=EventKind.ABORTED,
                actor=by,
                artifact=artifact,
                from_stage=Stage.CANDIDATE,
                to_stage=Stage.ABORTED,
                from_artifact=artifact.digest,
                reason=f"superseded by narrowed artifact #{new.pk}",
            )
        return new
