"""A reference's forward arguments keep their names in the candidate unless a template's wrapper
binds the same name: an einsum over ``p`` and ``v`` (attention code's names) read the wrapper's
parameters' dict as ``p`` and failed at its first call. Such an argument is renamed, and every
family's wrapper is held to the list of names it may bind (``trace.WRAPPER_NAMES``), so a name a
template starts binding is caught here rather than by a user's argument."""

from __future__ import annotations

import ast

from tests.workers.search.child import check_rendered
from workers.catalog import catalog_get, catalog_list
from workers.search.generators.base import GenerationContext
from workers.search.generators.cute import CuteGenerator
from workers.search.generators.template import DEFAULTS, render
from workers.search.trace import candidate_args, trace_problem, wrapper_binds


def _problem(args: str, forward: str, inputs: str, init: str = "") -> str:
    ctor = f"    def __init__(self):\n        super().__init__()\n{init}\n\n" if init else ""
    return (
        "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
        "b = 2\nc = 4\nn = 24\n\n\n"
        f"class Model(nn.Module):\n{ctor}"
        f"    def forward(self, {args}):\n        return {forward}\n\n\n"
        f"def get_inputs():\n    return [{inputs}]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


X = "torch.randn(b, n)"
# One problem a family at least, each argument named as a wrapper names its own values.
FAMILIES = {
    "elementwise": _problem("out, grid", "torch.relu(out) * grid", f"{X}, {X}"),
    "row": _problem("N, M", "torch.softmax(N + M, dim=-1)", f"{X}, {X}"),
    "scan": _problem("block", "torch.cumsum(block, dim=-1)", "torch.randn(b, n)"),
    "pool": _problem("shape", "F.max_pool2d(shape, 2)", "torch.randn(b, c, n, n)"),
    "move": _problem("p, total", "torch.cat([p, total], dim=0)", f"{X}, {X}"),
    "cross_entropy": _problem("p, out0", "F.cross_entropy(p, out0)",
                              "torch.randn(b, n), torch.randint(0, n, (b,))"),
    "conv": _problem("in0", "self.conv(in0)", "torch.randn(b, c, n, n)",
                     "        self.conv = nn.Conv2d(c, 8, 3)"),
    "matmul": _problem("math, a3", "torch.relu(math @ a3)", "torch.randn(n, n), torch.randn(n, n)"),
    "matmul+row": _problem("rows", "torch.softmax(self.fc(rows), dim=-1)", "torch.randn(b, n)",
                           "        self.fc = nn.Linear(n, 16)"),
    "matmul+move": _problem("p, v", 'torch.einsum("bhqk,bhkd->bqhd", p, v)',
                            "torch.randn(b, c, n, n), torch.randn(b, c, n, 16)"),
    "chain+row": _problem("seg, segs", "torch.softmax(torch.cat([seg, segs], dim=0), dim=0)",
                      f"{X}, {X}"),
    "attention": _problem("q, scale, out", "F.scaled_dot_product_attention(q, scale, out)",
                          "torch.randn(b, c, n, 16), torch.randn(b, c, n, 16), "
                          "torch.randn(b, c, n, 16)"),
}  # fmt: skip


def _forward_binds(cls: ast.ClassDef) -> set[str]:
    """Every name the class's ``forward`` assigns (a comprehension's own variables are its own:
    they leave the forward's names alone)."""
    out = set()
    for fn in ast.walk(cls):
        if isinstance(fn, ast.FunctionDef) and fn.name == "forward":
            scoped = {
                id(name)
                for comp in ast.walk(fn)
                if isinstance(comp, ast.comprehension)
                for name in ast.walk(comp.target)
            }
            out |= {
                node.id
                for node in ast.walk(fn)
                if isinstance(node, ast.Name)
                and isinstance(node.ctx, ast.Store)
                and id(node) not in scoped
            }
    return out


def _stage_binds(plan, code: str) -> dict[str, set[str]]:
    """{each stage's family: the names its wrapper's forward assigns} (a staged candidate's
    stages are classes ``_s0_ModelNew``, ``_s1_ModelNew``, ... under the one that runs them)."""
    stages = plan.stages or [plan]
    out: dict[str, set[str]] = {}
    for node in ast.parse(code).body:
        if not isinstance(node, ast.ClassDef) or not node.name.endswith("ModelNew"):
            continue
        if node.name == "ModelNew" and plan.stages:  # it only calls the stages
            renamed = set(plan.forward_args) - set(plan.extra.get("arg_names", plan.forward_args))
            assert _forward_binds(node) <= {f"_ke_s{j}" for j in range(len(stages))} | renamed
            continue
        index = int(node.name[2 : node.name.index("_", 2)]) if plan.stages else 0
        out.setdefault(stages[index].family, set()).update(_forward_binds(node))
    return out


def test_an_argument_named_as_the_wrapper_names_its_values_is_renamed_and_computes_the_reference(
    tmp_path,
):
    """Called by keyword too: the candidate's forward takes the reference's names (``p``) and
    rebinds each renamed one (``p_ = p``) before its wrapper binds its own values. An argument
    named as a module the candidate imports (matmul's ``math``) keeps its new name, as a
    parameter would hide the module: that candidate is called positionally."""
    sizes = {name: [{}] for name in FAMILIES}
    named = {name: src for name, src in FAMILIES.items() if name != "matmul"}
    results = check_rendered(named, [{}], sizes, str(tmp_path), keywords=True)
    results.update(check_rendered({"matmul": FAMILIES["matmul"]}, [{}], sizes, str(tmp_path)))
    for name, result in results.items():
        assert result["family"] == name, (name, result["summary"])
        for err in result["errs"]:
            assert not isinstance(err, str) and err < 1e-4, (name, result["errs"])


def test_every_family_binds_only_the_names_the_trace_keeps_free():
    sources = dict(FAMILIES)
    sources.update({entry.name: entry.problem_source() for entry in catalog_list()})
    for name, source in sources.items():
        plan = trace_problem(source)
        code = render(plan, {**DEFAULTS.get(plan.family, {})})
        for family, binds in _stage_binds(plan, code).items():
            # (a renamed argument is bound from the reference's name first: ``p_ = p``)
            renamed = set(plan.forward_args) - set(plan.extra.get("arg_names", plan.forward_args))
            loose = {v for v in binds if not wrapper_binds(v, [family]) and v not in renamed}
            assert not loose, (name, family, sorted(loose))


def test_the_cute_wrapper_binds_only_its_own_names():
    """The CuTe back end's wrapper (rows of a norm, a softmax, a cross-entropy) names its values
    ``_ke_*``, which no argument keeps: a softmax over an argument named ``y`` (the name the
    wrapper gave its output) keeps that name and reads it."""
    sources = {"softmax-of-y": _problem("y", "torch.softmax(y, dim=-1)", X)}
    for name in ("rms_norm", "layer_norm", "cross_entropy"):
        sources[name] = catalog_get(name).problem_source()
    for name, source in sources.items():
        seeds = CuteGenerator().propose(GenerationContext(source, platform="cuda"), 1)
        assert seeds, name
        model = [n for n in ast.parse(seeds[0].source).body if getattr(n, "name", "") == "ModelNew"]
        binds = _forward_binds(model[0])
        assert binds and all(v.startswith("_ke_") for v in binds), (name, binds)
    assert (
        "def forward(self, y):"
        in CuteGenerator()
        .propose(GenerationContext(sources["softmax-of-y"], platform="cuda"), 1)[0]
        .source
    )


def test_the_names_the_candidate_gives_the_arguments():
    # KernelBench's names stay where the family's wrapper does not bind them
    assert candidate_args(["A", "B"], ["matmul"]) == ["A", "B"]
    assert candidate_args(["Q", "K", "V"], ["attention"]) == ["Q", "K", "V"]
    assert candidate_args(["p", "v"], ["matmul", "move"]) == ["p_", "v"]
    assert candidate_args(["x", "B"], ["attention"]) == ["x", "B_"]
    # a module's name, or a name the wrappers number, in any family
    assert candidate_args(["math", "in0", "y"], ["elementwise"]) == ["math_", "in0_", "y"]
    # a renamed argument never takes another argument's name
    assert candidate_args(["p", "p_"], ["move"]) == ["p__", "p_"]
