"""Search insight: how the template parameters a campaign's candidates were generated with
relate to their fitness (what Optuna Dashboard shows of a study).

Reads only. A *trial* is an evaluated candidate (accepted or rejected), numbered in evaluation
order as the campaign's best-fitness chart numbers them. Its parameters are the `params` a
template generator gave it (`workers.search.generators.template`: block_n, strategy, stages, a
per-case `table`, ...); an LLM-written candidate has none. Its fitness is the node's weighted
speedup, which only the timing gate gives: candidates stopped before it (or evaluated on the
interpreter, which does not time) have none and are counted, not plotted.

Importance is the correlation ratio eta²: the share of the timed candidates' fitness variance
that grouping them by the parameter's value explains (between-group sum of squares over the
total). 1 when the parameter's value fixes the fitness, 0 when the parameter never varied or
its groups have equal means. Each parameter is measured alone, so shares do not add up to 1.
"""

import math
from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import F

from apps.campaigns.constants import NodeStatus, Platform
from apps.campaigns.models import Campaign

# The generator whose params are launch parameters (an LLM candidate's are its model's name).
TEMPLATE_GENERATOR = "template"
# Parameters whose values are all numbers, with more distinct values than this, are continuous:
# the parallel-coordinates axis keeps their scale instead of spacing their values evenly.
ORDINAL_MAX_VALUES = 24
UNSET = "unset"

EVALUATED = (NodeStatus.ACCEPTED, NodeStatus.REJECTED)


@dataclass(frozen=True)
class Trial:
    """One evaluated candidate: `number` is its place in evaluation order (1-based)."""

    number: int
    key: str
    generator: str
    status: str
    failed_gate: str
    fitness: float | None
    fitness_ci_low: float | None = None
    params: dict = field(default_factory=dict)

    @property
    def accepted(self) -> bool:
        return self.status == NodeStatus.ACCEPTED

    def value(self, name: str):
        return self.params.get(name, UNSET)


@dataclass(frozen=True)
class Parameter:
    """A parameter over the timed template candidates: its values in order and its importance.

    `numeric`: every value is a number (else each value is a category, in the order shown).
    `values`: the distinct values, sorted. `importance`: eta², None when the fitness has no
    variance to explain."""

    name: str
    numeric: bool
    values: tuple
    importance: float | None

    @property
    def varied(self) -> bool:
        return len(self.values) > 1

    @property
    def ordinal(self) -> bool:
        """Spaced evenly by rank on an axis (categories, and numbers with few values such as
        the powers of two a template's tile sizes take)."""
        return not self.numeric or len(self.values) <= ORDINAL_MAX_VALUES


@dataclass(frozen=True)
class Insight:
    """What the insight page shows of one campaign."""

    trials: tuple[Trial, ...]  # every evaluated candidate, in evaluation order
    best_path: tuple[tuple[int, str, float], ...]  # (number, key, fitness) of the best so far
    timed: tuple[Trial, ...]  # the template candidates with a fitness: what the plots relate
    parameters: tuple[Parameter, ...]  # by importance, highest first
    counts: dict
    empty_reason: str  # why there is nothing to relate ("" when there is)
    importance_note: str  # why importance is missing, or what limits it ("" when neither)

    @property
    def varied(self) -> tuple[Parameter, ...]:
        return tuple(p for p in self.parameters if p.varied)

    @property
    def constant(self) -> tuple[Parameter, ...]:
        return tuple(p for p in self.parameters if not p.varied)


def param_value(value):
    """A parameter's value as the plots compare it: numbers and strings as they are, a flag as
    'true'/'false', a nested value (a per-case launch `table`) by its size, absent as 'unset'."""
    if value is None:
        return UNSET
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float) and math.isfinite(value):
        return value
    if isinstance(value, dict | list | tuple):
        return f"{len(value)} entries" if value else "empty"
    return str(value)


def _sort_key(value) -> tuple:
    if isinstance(value, int | float):
        return (0, value, "")
    return (1, 0, str(value))


def eta_squared(groups: list[list[float]]) -> float | None:
    """The share of the values' variance that the grouping explains; None without variance."""
    values = [v for g in groups for v in g]
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    total = sum((v - mean) ** 2 for v in values)
    # Fitness measured equal everywhere (to rounding): there is no variance to explain.
    if total <= 1e-12 * max(1.0, mean * mean) * len(values):
        return None
    between = sum(len(g) * (sum(g) / len(g) - mean) ** 2 for g in groups if g)
    return max(0.0, min(1.0, between / total))


def parameter_importance(*, trials: list[Trial], name: str) -> float | None:
    """eta² of `name` over the trials with a fitness (grouped by the parameter's value)."""
    groups: dict = defaultdict(list)
    for t in trials:
        if t.fitness is not None:
            groups[t.value(name)].append(t.fitness)
    return eta_squared(list(groups.values()))


def _parameters(timed: list[Trial]) -> list[Parameter]:
    names = sorted({name for t in timed for name in t.params})
    out = []
    for name in names:
        values = sorted({t.value(name) for t in timed}, key=_sort_key)
        numeric = all(isinstance(v, int | float) for v in values)
        out.append(
            Parameter(
                name=name,
                numeric=numeric,
                values=tuple(values),
                importance=parameter_importance(trials=timed, name=name),
            )
        )
    return sorted(out, key=lambda p: (-(p.importance or 0.0), not p.varied, p.name))


def best_path(trials: list[Trial]) -> tuple[tuple[int, str, float], ...]:
    """The campaign's best after each trial, as its rule names it (`selectors.campaign_best_rule`
    replays the same rule to explain it): the first accepted candidate, replaced by a later
    accepted one only when the lower bound of that one's 95% CI is above the best's speedup.
    Only where the best has a fitness to draw."""
    path: list[tuple[int, str, float]] = []
    best: Trial | None = None
    for t in trials:
        if t.accepted:
            if best is None:
                best = t
            elif t.fitness is not None and best.fitness is not None:
                if (t.fitness_ci_low or 0.0) > best.fitness:
                    best = t
        if best is not None and best.fitness is not None:
            path.append((t.number, best.key, best.fitness))
    return tuple(path)


def _empty_reason(campaign: Campaign, counts: dict) -> str:
    if not counts["generated"]:
        return "No candidate has been generated yet."
    if not counts["evaluated"]:
        return (
            f"No candidate has been evaluated yet ({counts['unsettled']} waiting for an "
            "evaluation worker)."
        )
    if not counts["template"]:
        return (
            f"None of the {counts['evaluated']} evaluated candidates was generated from a "
            "template: LLM-written candidates carry no parameters to relate to fitness."
        )
    if not counts["timed"] and campaign.platform == Platform.INTERPRET:
        return (
            "No fitness to relate parameters to: the interpret platform runs the Triton "
            "interpreter on the CPU and checks correctness only; it does not time candidates."
        )
    if not counts["timed"]:
        return (
            f"None of the {counts['template']} evaluated template candidates was timed: each "
            "was rejected at a gate before the performance gate."
        )
    return ""


def campaign_insight(*, campaign: Campaign) -> Insight:
    """The campaign's trials, its parameters' importance and the counts the page states (one
    query: the columns it reads, never sources or reports)."""
    rows = (
        campaign.nodes.order_by(F("evaluated_at").asc(nulls_last=True), "id")
        .values_list(
            "key", "generator", "params", "status", "failed_gate", "fitness", "fitness_ci_low"
        )
        .iterator()
    )
    counts = {
        "generated": 0,
        "unsettled": 0,
        "cancelled": 0,
        "evaluated": 0,
        "template": 0,
        "other_generators": 0,
        "timed": 0,
        "timed_accepted": 0,
        "timed_rejected": 0,
        "untimed": 0,
        "all_timed": 0,
    }
    untimed_by_gate: dict[str, int] = defaultdict(int)
    trials: list[Trial] = []
    timed: list[Trial] = []
    for key, generator, params, status, failed_gate, fitness, ci_low in rows:
        counts["generated"] += 1
        if status not in EVALUATED:
            counts["cancelled" if status == NodeStatus.CANCELLED else "unsettled"] += 1
            continue
        counts["evaluated"] += 1
        templated = generator == TEMPLATE_GENERATOR and isinstance(params, dict) and params
        trial = Trial(
            number=counts["evaluated"],
            key=key,
            generator=generator,
            status=status,
            failed_gate=failed_gate,
            fitness=fitness,
            fitness_ci_low=ci_low,
            params={k: param_value(v) for k, v in params.items()} if templated else {},
        )
        trials.append(trial)
        counts["all_timed"] += fitness is not None
        if not templated:
            counts["other_generators"] += 1
            continue
        counts["template"] += 1
        if fitness is None:
            counts["untimed"] += 1
            # Rejected at a gate before timing, or accepted as correct without timing (the
            # interpreter, or cases the timing gate skipped).
            untimed_by_gate[failed_gate or "correct, not timed"] += 1
            continue
        counts["timed"] += 1
        counts["timed_accepted" if trial.accepted else "timed_rejected"] += 1
        timed.append(trial)
    counts["untimed_by_gate"] = dict(sorted(untimed_by_gate.items()))
    empty = _empty_reason(campaign, counts)
    parameters = _parameters(timed) if not empty else []
    note = ""
    if not empty and len(timed) < 2:
        note = "One timed template candidate: importance needs at least two to compare."
    elif not empty and all(p.importance is None for p in parameters):
        note = "Every timed template candidate has the same fitness: there is nothing to explain."
    elif not empty and any(p.importance and len(p.values) == len(timed) for p in parameters):
        note = (
            "A parameter with a different value for every timed candidate explains all of the "
            "variance by construction: more candidates make its share meaningful."
        )
    return Insight(
        trials=tuple(trials),
        best_path=best_path(trials),
        timed=tuple(timed),
        parameters=tuple(parameters),
        counts=counts,
        empty_reason=empty,
        importance_note=note,
    )
