"""The ``cute`` generator: CuTe DSL candidates (``templates/cute_row.py``) for references that
compute RMSNorm, LayerNorm or softmax over the last dimension, however they are written, or the
cross-entropy of rows of logits (mean or sum, any ignore index and label smoothing; the
template generator's cross-entropy family) (issue 15).

Whether a reference is one of them is decided on its traced graph (the template generator's
plan, traced behind the sandbox), not on its text: the graph is evaluated with numpy on random
rows and compared with each operator's definition. So ``x * torch.rsqrt(x.pow(2).mean(-1,
keepdim=True) + eps) * w``, ``x / (x.square().mean(-1, keepdim=True) + eps).sqrt() * w`` and
``F.rms_norm`` all match RMSNorm; anything else is refused in one line. The candidate keeps the
reference's constructor, reads the weight where the reference does, and bakes in its epsilon.

Candidates are proposed for ``cuda`` campaigns only: without a GPU nothing can check a CuTe
kernel (the correctness gate says ``needs_gpu``). Opt-in (``--generator template,cute``). In a
per-case crossover whose winners include a Triton and a CuTe node, it writes the back-end mix
(``backend_mix.py``): one candidate that runs each case on the faster of the two.
"""

from __future__ import annotations

import json
import random
from collections import Counter

import numpy as np

from workers import constants as C
from workers.search.generators import backend_mix
from workers.search.generators.base import (
    EDGE_CROSSOVER,
    EDGE_MUTATION,
    EDGE_SEED,
    GenerationContext,
    Proposal,
    training,
)
from workers.search.generators.templates import cute_row
from workers.search.ir import NoTemplate

_PW = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "neg": np.negative,
    "abs": np.abs,
    "reciprocal": lambda x: 1.0 / x,
}
_REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


def evaluate_plan(plan, rows: int, cols: int, seed: int = 0) -> tuple[dict, np.ndarray]:
    """The plan's single output on random rows, with the inputs it read ({ref: array}).
    Raises NoTemplate for what this small evaluator does not know."""
    if plan.family != "row" or len(plan.outputs) != 1:
        raise NoTemplate(f"a {plan.family} plan with {len(plan.outputs)} output(s)")
    rng = np.random.default_rng(seed)
    inputs, values = {}, {}
    for node in plan.nodes:
        role = node.attrs.get("role")
        if node.kind == "input" and role == "tile" and not node.attrs.get("shift"):
            x = inputs.setdefault(node.attrs["ref"], rng.standard_normal((rows, cols)))
            values[node.id] = x
        elif node.kind == "input" and role == "vec":
            values[node.id] = inputs.setdefault(node.attrs["ref"], rng.uniform(0.5, 1.5, cols))
        elif node.kind == "const" and isinstance(node.value, int | float):
            values[node.id] = float(node.value)
        elif node.kind == "pw" and node.op == "div_n" and not node.attrs:
            # a sum over the row divided by its length less a correction (var, std)
            total, correction = (values[a] for a in node.args)
            values[node.id] = total / (cols - correction)
        elif node.kind == "pw" and node.op in _PW and not node.attrs:
            values[node.id] = _PW[node.op](*(values[a] for a in node.args))
        elif node.kind == "reduce" and node.op in _REDUCE and not node.attrs:
            values[node.id] = _REDUCE[node.op](values[node.args[0]], axis=-1, keepdims=True)
        else:
            raise NoTemplate(f"{node.kind} {node.op or node.attrs.get('role')}".strip())
    tiles = [r for r, v in inputs.items() if np.ndim(v) == 2]
    if len(tiles) != 1:
        raise NoTemplate(f"{len(tiles)} row inputs")
    return inputs, np.broadcast_to(values[plan.outputs[0]], (rows, cols))


# What a plan may say of its rows for the CuTe template to read them: each output a whole row
# (of the last dimension, or of the last few: red_from), nothing gathered, sliced, folded or
# broadcast in other ways.
_PLAIN = {"output_kinds", "output_shapes_keep_last", "index_outputs", "red_from", "red_dim"}


def _plain_rows(plan) -> None:
    extra = plan.extra
    other = sorted(k for k in extra if k not in _PLAIN)
    kinds = extra.get("output_kinds") or []
    if (
        other
        or any(k != "tile" for k in kinds)
        or not all(extra.get("output_shapes_keep_last", [True]))
        or extra.get("index_outputs")
    ):
        what = ", ".join(other) or "outputs other than whole rows"
        raise NoTemplate(f"rows laid out otherwise than the CuTe row template reads them ({what})")


def match(plan) -> dict:
    """``{"op", "x", "weight", "eps"}`` (and ``"bias"``) when the plan computes RMSNorm or
    LayerNorm (with their vectors, or not) or softmax over its rows; ``{"op": "cross_entropy",
    "x", "target", "ignore", "smooth", "mean"}`` for the template generator's cross-entropy
    family (a mean or sum over rows); NoTemplate says why not."""
    if plan.family == "cross_entropy":
        extra = plan.extra
        if extra.get("reduction") not in ("mean", "sum"):
            raise NoTemplate(f"cross-entropy with reduction={extra.get('reduction')!r}")
        return {"op": "cross_entropy", "x": extra["logits"], "target": extra["target"],
                "ignore": int(extra.get("ignore_index", -100)),
                "smooth": float(extra.get("label_smoothing") or 0.0),
                "mean": extra["reduction"] == "mean"}  # fmt: skip
    _plain_rows(plan)
    if plan.extra.get("red_dim") is not None:
        # RMSNorm over the channels of an NCHW tensor, say: the template reads rows along the
        # last dimension(s), and a transposed copy would cost more than the kernel saves
        raise NoTemplate(
            f"a reduction over dimension {plan.extra['red_dim']}, not the last: the CuTe row "
            "template reads rows along the last dimension(s)"
        )
    inputs, out = evaluate_plan(plan, 5, 48)
    (x_ref,) = [r for r, v in inputs.items() if np.ndim(v) == 2]
    x = inputs[x_ref]
    vecs = [r for r, v in inputs.items() if np.ndim(v) == 1]
    # epsilon candidates: the small positive constants of the graph
    epsilons = sorted({n.value for n in plan.nodes if n.kind == "const" and 0 < n.value < 1e-2})
    shifted = np.exp(x - x.max(-1, keepdims=True))
    if not vecs and np.allclose(out, shifted / shifted.sum(-1, keepdims=True), rtol=1e-6):
        return {"op": "softmax", "x": x_ref, "weight": None, "eps": 0.0}
    if len(vecs) <= 1:
        w = inputs[vecs[0]] if vecs else 1.0
        for eps in epsilons or [0.0]:
            want = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w
            if np.allclose(out, want, rtol=1e-6, atol=1e-9):
                return {"op": "rms_norm", "x": x_ref, "weight": vecs[0] if vecs else None,
                        "eps": eps}  # fmt: skip
    if len(vecs) <= 2:
        d = x - x.mean(-1, keepdims=True)
        for eps in epsilons or [0.0]:
            base = d / np.sqrt((d * d).mean(-1, keepdims=True) + eps)
            for w_ref, b_ref in _affine(vecs):
                w = inputs[w_ref] if w_ref else 1.0
                b = inputs[b_ref] if b_ref else 0.0
                if np.allclose(out, base * w + b, rtol=1e-6, atol=1e-9):
                    return {"op": "layer_norm", "x": x_ref, "weight": w_ref, "bias": b_ref,
                            "eps": eps}  # fmt: skip
    raise NoTemplate("it computes none of RMSNorm, LayerNorm or softmax over the last dimension")


def _affine(vecs: list) -> list[tuple]:
    """The ways the row's vector inputs can be LayerNorm's weight and bias."""
    if not vecs:
        return [(None, None)]
    if len(vecs) == 1:
        return [(vecs[0], None), (None, vecs[0])]
    return [(vecs[0], vecs[1]), (vecs[1], vecs[0])]


_MODEL_CE = """

class ModelNew(nn.Module):
{init}
    def forward(self, {args}):
        _ke_x2 = {x}.reshape(-1, {x}.shape[-1]).contiguous()
        _ke_out = torch.empty((), dtype=_ke_x2.dtype, device=_ke_x2.device)
        _ke_t = {target}.reshape(-1).contiguous()
        _ke_ce_run(_ke_x2, _ke_t, _ke_out, {ignore!r}, {smooth!r}, {mean!r})
        return _ke_out
"""

_MODEL = """

class ModelNew(nn.Module):
{init}
    def forward(self, {args}):
        _ke_x2 = {x}.reshape(-1, {cols}).contiguous()
        _ke_y = torch.empty_like(_ke_x2)
        if _ke_x2.numel():
{call}
        return _ke_y.reshape({x}.shape)
"""


def render_for(plan, found: dict, params: dict) -> str:
    """A complete candidate: the CuTe kernels, and ``ModelNew`` with the reference's
    constructor and forward arguments (its own values named ``_ke_*``, which no argument of
    the reference is named: ``trace.candidate_args``)."""
    call = ""
    if found["op"] == "softmax":
        call = "            _ke_run(_ke_softmax, _ke_x2, (_ke_y,), ())"
    elif found["op"] == "layer_norm":
        w, b = (_vector(found[k], fill) for k, fill in (("weight", "ones"), ("bias", "zeros")))
        call = (
            f"            _ke_w = {w}\n            _ke_b = {b}\n"
            "            _ke_run(_ke_layer, _ke_x2, (_ke_w, _ke_b, _ke_y), "
            f"(cutlass.Float32({found['eps']!r}),))"
        )
    elif found["op"] == "rms_norm":
        w = _vector(found["weight"], "ones")
        call = (
            f"            _ke_w = {w}\n"
            "            _ke_run(_ke_rms, _ke_x2, (_ke_w, _ke_y), "
            f"(cutlass.Float32({found['eps']!r}),))"
        )
    # The reference's own imports and constants (its constructor may use them).
    have = set(cute_row.render(found["op"]).splitlines())
    preamble = [line for line in plan.preamble.splitlines() if line not in have]
    x = found["x"]
    # a row is the last dimension, or the last k of them (a LayerNorm over (C, H, W): red_from)
    k = -int(plan.extra.get("red_from") or -1)
    cols = f"{x}.shape[-1]" if k == 1 else f"math.prod({x}.shape[-{k}:])"
    fields = {
        "init": plan.init_source.rstrip("\n") + "\n" if plan.init_source.strip() else "",
        "args": ", ".join(plan.forward_args),
        "x": x,
        "cols": cols,
    }
    if found["op"] == "cross_entropy":
        keys = ("target", "ignore", "smooth", "mean")
        body = _MODEL_CE.format(**fields, **{k: found[k] for k in keys})
    else:
        body = _MODEL.format(**fields, call=call)
    model = ("\n\n" + "\n".join(preamble) if preamble else "") + body
    return cute_row.render(found["op"], params, model=model)


def _vector(ref: str | None, fill: str) -> str:
    """The expression of a per-column vector in the candidate's forward: the reference's
    parameter where it has one (flattened: a LayerNorm over several trailing dimensions has a
    weight of their shape), else ones or zeros."""
    if ref:
        return f"{ref}.detach().to(_ke_x2.dtype).reshape(-1).contiguous()"
    return f"torch.{fill}(_ke_x2.shape[-1], dtype=_ke_x2.dtype, device=_ke_x2.device)"


class CuteGenerator:
    name = "cute"

    def __init__(self, template=None):
        from workers.search.generators.template import TemplateGenerator

        self._template = template or TemplateGenerator()  # its traces, cached per problem
        self._counts: Counter = Counter()

    def _found(self, problem_source: str, train: bool = False):
        plan = self._template.plan(problem_source, train)
        if any(
            p.extra.get("state_outputs") or p.extra.get("counters") for p in (plan, *plan.stages)
        ):
            raise NoTemplate("the forward updates module state in place; CuTe kernels do not")
        return plan, match(plan)

    def describe(self, problem_source: str, train: bool = False) -> dict:
        try:
            _, found = self._found(problem_source, train)
        except NoTemplate as exc:
            return {"fits": False, "summary": f"no CuTe template fits: {exc}"}
        return {"fits": True, "family": "cute_row", "summary": f"{found['op']} in CuTe DSL"}

    def stats(self) -> dict:
        return dict(self._counts)

    def propose(self, ctx: GenerationContext, n: int) -> list[Proposal]:
        if ctx.platform != "cuda":
            self._counts["not_cuda"] += 1  # nothing here could check a CuTe kernel
            return []
        try:
            plan, found = self._found(ctx.problem_source, training(ctx.workload))
        except NoTemplate:
            self._counts["no_template"] += 1
            return []
        if ctx.mode == EDGE_CROSSOVER and (ctx.feedback or {}).get("per_case"):
            return self._mix(plan, found, ctx)
        rng = random.Random(f"{ctx.seed}:{ctx.mode}:{ctx.attempt}")
        parents = [p for p in ctx.parents if _own(p, self.name)]
        wanted: list[tuple[dict, str, str]] = []
        if ctx.mode == EDGE_SEED or not parents:
            d = cute_row.DEFAULTS
            seeds = [
                dict(d),
                {**d, "threads": 128},
                {**d, "max_cluster": 8},
                # the layout first verified on the H200 (session 31)
                {**d, "max_cluster": 8, "prefetch": 0, "online": 0, "exchange": 0},
            ]
            wanted = [(p, EDGE_SEED, "seed") for p in seeds]
            tuned = self._tuned(ctx)
            if tuned:
                note = "seed tuned per case on this GPU: " + ", ".join(
                    f"{c['name']} {c['speedup']:.3f}x" for c in tuned["cases"]
                )
                wanted.insert(0, ({**d, "table": tuned["table"]}, EDGE_SEED, note))
        else:
            # a child moves one parameter of every case: a parent's table would override it
            own = {k: v for k, v in parents[0]["params"].items() if k in cute_row.SPACE}
            base = {**cute_row.DEFAULTS, **own}
            for _ in range(n * 4):
                key = rng.choice(sorted(cute_row.SPACE))
                values = cute_row.SPACE[key]
                i = values.index(base[key])
                j = min(len(values) - 1, max(0, i + rng.choice((-1, 1))))
                if j != i:
                    wanted.append(({**base, key: values[j]}, EDGE_MUTATION, f"{key}={values[j]}"))
        out, seen = [], set()
        for params, edge, note in wanted:
            key = json.dumps(params, sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            out.append(Proposal(render_for(plan, found, params), edge, params, note))
            if len(out) >= n:
                break
        self._counts["proposed"] += len(out)
        return out

    def _tuned(self, ctx: GenerationContext) -> dict | None:
        """The CuTe tuner's answer of this campaign (``workers.search.tuning``: run beside the
        baseline on the GPU host), where it has a table; a failure is counted with its error."""
        answer = (ctx.tuned or {}).get("cute") if ctx.attempt == 1 else None
        if not answer or answer.get("skipped"):
            return None
        if not answer.get("ok") or not answer.get("table"):
            self._counts["tune_failed"] = 1
            self._counts["tune_error"] = str(answer.get("error") or "empty table")[:300]
            return None
        self._counts["tuned"] = 1
        return answer

    def _mix(self, plan, found: dict, ctx: GenerationContext) -> list[Proposal]:
        """Where the campaign's fastest nodes per case include a Triton (template) and a CuTe
        one, one candidate that runs each case on the back end that measured faster on it
        (``generators/backend_mix.py``); nothing when one back end would take every case.

        Each side is the parent of its back end that is fastest on the most cases. A case
        goes to the faster of the two where both were timed; where one was not (the
        performance gate stops at a case lost beyond doubt), to the timed one if it beat the
        baseline there, else to the other, untimed, which the evaluation then measures."""
        per_case = ctx.feedback["per_case"]
        wins = Counter(per_case.values())
        tri = _most_wins([p for p in ctx.parents if p.get("generator") == "template"], wins)
        cut = _most_wins([p for p in ctx.parents if _own(p, self.name)], wins)
        if tri is None or cut is None or not tri.get("source") or not cut.get("source"):
            return []
        rows = self._template.case_rows(plan, ctx)
        by_id = {p.get("id"): p for p in ctx.parents}
        backends, taken = {}, []
        for case in sorted(per_case):
            if case not in rows:
                continue
            st, sc = _case_speedup(tri, case), _case_speedup(cut, case)
            if st is not None and sc is not None:
                cute_wins = sc > st
            elif sc is not None:
                cute_wins = sc >= 1.0
            elif st is not None:
                cute_wins = st < 1.0
            else:  # neither side was timed there: the back end of the case's fastest node
                cute_wins = by_id.get(per_case[case], {}).get("generator") == self.name
            pick = C.BACKEND_CUTE if cute_wins else C.BACKEND_TRITON
            m, n, dtype = rows[case]
            backends[f"{m},{n},{dtype}"] = pick
            taken.append(f"{case} {pick} ({_fmt(st)} vs {_fmt(sc)})")
        if len(set(backends.values())) < 2:
            return []
        try:
            source = backend_mix.compose(
                tri["source"], cut["source"], backends, plan.forward_args, found["x"]
            )
        except backend_mix.CannotCompose as exc:
            self._counts["mix_refused"] += 1
            self._counts["mix_error"] = str(exc)[:300]
            return []
        self._counts["mixed"] += 1
        params = {"mix": {"triton": tri.get("id"), "cute": cut.get("id")}, "backends": backends}
        note = f"back-end crossover of {tri.get('id')} (Triton) and {cut.get('id')} (CuTe): "
        return [Proposal(source, EDGE_CROSSOVER, params, note + ", ".join(taken))]


def _most_wins(parents: list[dict], wins: Counter) -> dict | None:
    """The parent fastest on the most cases (the first, the best overall, on a tie)."""
    return max(parents, key=lambda p: wins.get(p.get("id"), 0), default=None)


def _own(parent: dict, name: str) -> bool:
    """A parent this generator can vary: one of its own single-back-end candidates."""
    params = parent.get("params") or {}
    return parent.get("generator") == name and bool(params) and "mix" not in params


def _case_speedup(parent: dict, case: str) -> float | None:
    value = ((parent.get("fitness") or {}).get("per_case") or {}).get(case)
    return float(value) if isinstance(value, (int, float)) else None


def _fmt(speedup: float | None) -> str:
    return "untimed" if speedup is None else f"{speedup:.3f}x"
