"""Shared pieces of the template families: expression emission, kernel signatures, the header
every candidate starts with."""

from __future__ import annotations

import json
import keyword

from workers.search.generators.templates.math_ops import MATH_EXPR, helpers
from workers.search.trace import MODULES, IRNode, NoTemplate, Plan


def _literal(value: float) -> str:
    if value != value:
        return 'float("nan")'
    if value in (float("inf"), float("-inf")):
        return ("-" if value < 0 else "") + 'float("inf")'
    return f"({float(value)!r})"


# torch's maximum, minimum, clamp and relu keep a NaN; Triton's drop it unless told.
_NAN = "tl.PropagateNan.ALL"
_COMPARISONS = {"eq", "ne", "gt", "lt", "ge", "le"}


def _pw_expr(op: str, a: list[str], consts: list[float | None]) -> str:
    x = a[0] if a else ""
    table = {
        "add": lambda: f"{a[0]} + {a[1]}",
        "sub": lambda: f"{a[0]} - {a[1]}",
        "mul": lambda: f"{a[0]} * {a[1]}",
        "div": lambda: f"{a[0]} / {a[1]}",
        "div_n": lambda: f"{a[0]} / (N - {a[1]})",
        "neg": lambda: f"-{x}",
        "exp": lambda: f"tl.exp({x})",
        "exp2": lambda: f"tl.exp2({x})",
        "log": lambda: f"tl.log({x})",
        "log2": lambda: f"tl.log2({x})",
        "sqrt": lambda: f"tl.sqrt({x})",
        "rsqrt": lambda: f"tl.rsqrt({x})",
        "abs": lambda: f"tl.abs({x})",
        "sigmoid": lambda: f"tl.sigmoid({x})",
        "relu": lambda: f"tl.maximum({x}, 0.0, propagate_nan={_NAN})",
        "silu": lambda: f"{x} * tl.sigmoid({x})",
        "gelu": lambda: f"0.5 * {x} * (1.0 + tl.erf({x} * 0.7071067811865476))",
        # 0.5 * (1 + tanh(z)) == sigmoid(2 z)
        "gelu_tanh": lambda: (
            f"{x} * tl.sigmoid(1.5957691216057308 * ({x} + 0.044715 * {x} * {x} * {x}))"
        ),
        "erf": lambda: f"tl.erf({x})",
        "sin": lambda: f"tl.sin({x})",
        "cos": lambda: f"tl.cos({x})",
        "reciprocal": lambda: f"1.0 / {x}",
        "maximum": lambda: f"tl.maximum({a[0]}, {a[1]}, propagate_nan={_NAN})",
        "minimum": lambda: f"tl.minimum({a[0]}, {a[1]}, propagate_nan={_NAN})",
        "leaky_relu": lambda: f"tl.where({x} > 0.0, {x}, {x} * {a[1]})",
        "elu": lambda: (
            f"tl.where({x} > 0.0, {a[2]} * {x}, {a[2]} * {a[1]} * (tl.exp({x} * {a[3]}) - 1.0))"
        ),
        "softplus": lambda: (
            f"tl.where({x} * {a[1]} > {a[2]}, {x}, tl.log(1.0 + tl.exp({x} * {a[1]})) / {a[1]})"
        ),
        "hardsigmoid": lambda: (
            f"tl.minimum(tl.maximum({x} / 6.0 + 0.5, 0.0, propagate_nan={_NAN}), 1.0, "
            f"propagate_nan={_NAN})"
        ),
        # (a NaN stays NaN: x times the clamp)
        "hardswish": lambda: f"{x} * tl.minimum(tl.maximum({x} / 6.0 + 0.5, 0.0), 1.0)",
        "mish": lambda: (
            f"{x} * (2.0 * tl.sigmoid(2.0 * tl.where({x} > 20.0, {x}, "
            f"tl.log(1.0 + tl.exp({x})))) - 1.0)"
        ),
        "sign": lambda: f"tl.where({x} > 0.0, 1.0, tl.where({x} < 0.0, -1.0, 0.0))",
        "where": lambda: f"tl.where({a[0]}, {a[1]}, {a[2]})",
        "gt": lambda: f"{a[0]} > {a[1]}",
        "lt": lambda: f"{a[0]} < {a[1]}",
        "ge": lambda: f"{a[0]} >= {a[1]}",
        "le": lambda: f"{a[0]} <= {a[1]}",
        "xlogy": lambda: f"tl.where({a[0]} == 0.0, 0.0, {a[0]} * tl.log({a[1]}))",
    }
    if op == "pow":
        e = consts[1]
        if e is not None:
            powers = {
                1.0: f"{x}",
                2.0: f"{x} * {x}",
                3.0: f"{x} * {x} * {x}",
                4.0: f"({x} * {x}) * ({x} * {x})",
                0.5: f"tl.sqrt({x})",
                -0.5: f"tl.rsqrt({x})",
                -1.0: f"1.0 / {x}",
                0.0: "1.0",
            }
            if e in powers:
                return powers[e]
        return f"tl.exp2({a[1]} * tl.log2({x}))"
    if op in MATH_EXPR:
        return MATH_EXPR[op](a)
    if op not in table:
        raise NoTemplate(f"no Triton expression for pointwise op {op}")
    return table[op]()


class _Emitter:
    """Writes the Triton statements that evaluate IR nodes."""

    def __init__(
        self,
        plan: Plan,
        load_tile: str,
        load_vec: str,
        load_bcast: str = "",
        shifted=None,
        load_row: str = "",
        positions: dict[str, str] | None = None,
    ) -> None:
        self.plan = plan
        # An element's coordinates as this kernel names them: ``col`` (its column) and ``mrow``
        # (its row within the rows' matrices, a tril/triu's i), where the kernel has them.
        self.positions = positions or {}
        self.load_tile = load_tile  # e.g. "tl.load({ptr} + roff + cols, mask=mask, other=0.0)"
        self.load_vec = load_vec
        self.load_bcast = load_bcast  # {ptr} and {k}, the input's index (its offsets: boff{k})
        # An input with one value per row (cat "rowscalar"), where the kernel has a per-row
        # stage: {ptr} and {k}, as a broadcast input's.
        self.load_row = load_row
        # Columns moved by a slice or a cat (``workers.search.lowering_slices``): the kernel's
        # ``shifted(node, ptr, k, shift_expr)`` load and its column vector, where it has them.
        self.shifted = shifted
        self.ptr = {}
        self.index = {}
        real = [n for n in plan.inputs() if n.attrs["ref"] != "acc"]
        for i, n in enumerate(real):
            self.ptr[n.id] = f"in{i}_ptr"
            self.index[n.id] = i

    def name(self, node: IRNode) -> str:
        if node.kind == "const":
            return _literal(node.value)
        if node.kind == "input" and node.attrs.get("role") == "scalar":
            return self.ptr[node.id]  # a number the wrapper passes: the argument itself
        return f"v{node.id}"

    def stmt(self, node: IRNode) -> str | None:
        nodes = self.plan.nodes
        if node.kind == "const":
            return None
        if node.kind == "input":
            if node.attrs["ref"] == "acc":
                return f"v{node.id} = acc"
            role = node.attrs["role"]
            if node.attrs.get("shift") or node.attrs.get("mirror"):
                if self.shifted is None:
                    raise NoTemplate("this kernel does not read columns moved by a slice")
                shift = _frac(*node.attrs.get("shift", (0, 1)))
                load = self.shifted(node, self.ptr[node.id], self.index[node.id], shift)
                return f"v{node.id} = {load}.to(tl.float32)"
            if role == "cell":  # one value (a 0-d parameter, a (1,) bias), read from memory
                return f"v{node.id} = tl.load({self.ptr[node.id]}).to(tl.float32)"
            if role == "rowvec":  # one value per row, at the row's number (row kernels)
                load = f"tl.load({self.ptr[node.id]} + rows, mask=rmask, other=0.0)"
                return f"v{node.id} = {load}.to(tl.float32)"
            if role in ("scalar", "index", "unread"):
                # a number passed as a float argument, a gather's indices (read by the rows'
                # offsets, see _bcast_rows), an input read only through its views
                return None
            # An integer input (a target per row) is loaded as it is (see _operands).
            cast = "" if node.attrs.get("int_dtype") else ".to(tl.float32)"
            if role == "bcast":
                tmpl = self.load_row if node.cat == "rowscalar" else self.load_bcast
                if not tmpl:
                    raise NoTemplate("this kernel does not read an input one value per row")
                load = tmpl.format(ptr=self.ptr[node.id], k=self.index[node.id])
                return f"v{node.id} = {load}{cast}"
            tmpl = self.load_vec if role == "vec" else self.load_tile
            return f"v{node.id} = {tmpl.format(ptr=self.ptr[node.id])}{cast}"
        if node.kind == "pw" and node.op in self.positions:
            return f"v{node.id} = {self.positions[node.op]}"
        if node.kind == "pw" and node.op == "mrow":
            raise NoTemplate("this kernel does not read the rows' matrix index (a tril/triu)")
        if node.kind == "pw" and node.op == "col_lt":
            if self.shifted is None:
                raise NoTemplate("this kernel does not read columns moved by a slice")
            return f"v{node.id} = cols[None, :] < {_frac(*node.attrs['frac'])}"
        if node.kind == "pw" and node.op == "col":  # an arange along the row: the column index
            if self.shifted is None:
                raise NoTemplate("this kernel does not read the column index (an arange)")
            return f"v{node.id} = cols[None, :]"
        if node.kind == "pw" and node.op in ("tril", "triu"):  # a matmul epilogue's rows/cols
            keep = "<=" if node.op == "tril" else ">="
            x, k = self.name(nodes[node.args[0]]), node.attrs["diagonal"]
            return f"v{node.id} = tl.where(cols - rows {keep} {k}, {x}, 0.0)"
        if node.kind == "pw":
            args = self._operands(node)
            consts = [nodes[a].value if nodes[a].kind == "const" else None for a in node.args]
            return f"v{node.id} = {_pw_expr(node.op, args, consts)}"
        raise AssertionError(node.kind)

    def _operands(self, node: IRNode) -> list[str]:
        """A pointwise op's operands as written. An integer input is compared as torch compares
        it: with another integer, or a number the reference wrote as an integer (``y == 1``,
        written as one here), exactly; in any other op it is a float32 value."""
        nodes = self.plan.nodes
        args = [nodes[a] for a in node.args]
        names = [self.name(a) for a in args]
        if not any(a.attrs.get("int_dtype") for a in args):
            return names
        whole = [a.attrs.get("int_dtype") or a.attrs.get("whole") for a in args]
        if node.op in _COMPARISONS and all(whole):
            pairs = zip(args, names, strict=True)
            return [str(int(a.value)) if a.kind == "const" else s for a, s in pairs]
        pairs = zip(args, names, strict=True)
        return [f"{s}.to(tl.float32)" if a.attrs.get("int_dtype") else s for a, s in pairs]

    def deps(self, ids, stop) -> list[int]:
        """Transitive dependencies of ``ids`` (themselves included), not crossing ``stop``."""
        seen: set[int] = set()
        stack = list(ids)
        while stack:
            i = stack.pop()
            if i in seen or i in stop:
                continue
            seen.add(i)
            node = self.plan.nodes[i]
            if node.kind != "reduce" or i in ids:
                stack.extend(node.args)
        return sorted(seen)


def _frac(p: int, q: int, off: int = 0, up: int = 0) -> str:
    """``(p·N + up) // q + off`` columns (``N`` the row length; ``up`` > 0: a ``chunk`` of a
    row that does not divide rounds up), floored as in Python, as a kernel expression.
    Triton's ``//`` truncates toward zero, so a negative fraction is written as minus the
    ceiling of a numerator that is never negative."""
    p, q, off, up = int(p), int(q), int(off), int(up)
    if p < 0:
        rest = q - 1 - up
        n = f"-((N * {-p}{f' + {rest}' if rest else ''}) // {q})"
    else:
        n = f"((N * {p}{f' + {up}' if up else ''}) // {q})"
    return f"({n} + {off})" if off else n


# The combine of a product reduction (Triton has no tl.prod): included by a family's source
# where a kernel reduces with ``_reduce_expr("prod", ...)``.
_KE_MUL = """@triton.jit
def _ke_mul(a, b):
    return a * b


"""


def _reduce_expr(op: str, val: str, axis: int = 1, keep: bool = True) -> str:
    if op in ("argmax", "argmin"):  # the first index of the extreme, as torch
        out = f"tl.{op}({val}, axis={axis}, tie_break_left=True)"
        return out + ("[:, None]" if keep else "")
    if op == "prod":  # no tl.prod: a reduce with _ke_mul (_KE_MUL)
        return f"tl.reduce({val}, {axis}, _ke_mul)" + ("[:, None]" if keep else "")
    red = {"sum": "tl.sum", "mean": "tl.sum", "max": "tl.max", "min": "tl.min"}[op]
    out = f"{red}({val}, axis={axis})"
    return out + ("[:, None]" if keep else "")


_IDENTITY = {
    "prod": "1.0",
    "sum": "0.0",
    "mean": "0.0",
    "max": '-float("inf")',
    "min": 'float("inf")',
    "argmax": '-float("inf")',
    "argmin": 'float("inf")',
}


def _kernel(name: str, plan: Plan, constexprs: list[str], body: list[str], extra_args=()) -> str:
    ins = [f"in{i}_ptr" for i in range(len(plan.inputs()) - _n_acc(plan))]
    outs = [f"out{j}_ptr" for j in range(len(plan.outputs))]
    sig = ", ".join(
        ins + outs + list(extra_args or ["M", "N"]) + [f"{c}: tl.constexpr" for c in constexprs]
    )
    text = f"@triton.jit\ndef {name}({sig}):\n"
    return text + "".join(f"    {line}\n" for line in body)


def _n_acc(plan: Plan) -> int:
    return sum(1 for n in plan.inputs() if n.attrs["ref"] == "acc")


HEADER_IMPORTS = (
    "import math",
    "",
    "import torch",
    "import torch.nn as nn",
    "import triton",
    "import triton.language as tl",
)


def _header(plan: Plan, params: dict) -> str:
    # The problem's own imports and constants follow, minus imports the header already has.
    lines = [line for line in plan.preamble.splitlines() if line not in HEADER_IMPORTS]
    imports = [line for line in lines if line.startswith(("import ", "from "))]
    constants = [line for line in lines if line not in imports]
    blocks = ["\n".join(HEADER_IMPORTS), "\n".join(imports), "\n".join(constants)]
    # Math the Triton language has no call for (atan, erfinv, ...), when the plan uses it.
    used = {n.op for n in getattr(plan, "nodes", None) or () if n.kind == "pw"}
    blocks.append(helpers(used).rstrip("\n"))
    return (
        f'"""KernelEvolve template candidate ({plan.family}).\n\n'
        f"Operator (traced): {plan.summary}\n"
        f"Parameters: {json.dumps(params, sort_keys=True)}\n"
        '"""\n\n' + "\n\n".join(block for block in blocks if block) + "\n\n\n"
    )


def _pow2(n: int) -> str:
    return f"triton.next_power_of_2({n})"


def _refs(plan: Plan, role: str | None = None) -> list[str]:
    return [n.attrs["ref"] for n in plan.inputs(role) if n.attrs["ref"] != "acc"]


def forward_def(plan: Plan) -> str:
    """The candidate's ``def forward`` line (4-space indented) under the reference's argument
    names. Where the trace renamed one that a wrapper binds (``p`` -> ``p_``,
    ``plan.extra["arg_names"]``), the forward takes ``p`` and rebinds ``p_`` first, so a call by
    keyword works as on the reference; a module's name (``math``) stays renamed, as a
    parameter would hide the module."""
    args = list(plan.forward_args)
    names = plan.extra.get("arg_names")
    if (
        not isinstance(names, list)
        or len(names) > len(args)
        or not all(
            isinstance(n, str) and n.isidentifier() and not keyword.iskeyword(n) for n in names
        )
    ):
        names = []
    names = [new if old in MODULES else old for old, new in zip(names, args, strict=False)]
    names += args[len(names) :]
    line = f"    def forward(self, {', '.join(names)}):\n"
    return line + "".join(
        f"        {new} = {old}\n" for old, new in zip(names, args, strict=True) if old != new
    )


def _forward_head(plan: Plan) -> str:
    """``class ModelNew`` with the reference's ``__init__`` and the forward's signature."""
    return "\n\nclass ModelNew(nn.Module):\n" + plan.init_source + "\n" + forward_def(plan)


def _model_head(plan: Plan, p: dict) -> str:
    """The candidate's parameters (``_PARAMS``) and ``ModelNew`` down to the forward's first
    line, which binds them to ``p``."""
    return (
        f"\n\n_PARAMS = {json.dumps(p, sort_keys=True)}\n"
        + _forward_head(plan)
        + "        p = _PARAMS\n"
    )


def _bind_inputs(refs: list[str], numbers) -> str:
    """Wrapper lines binding each kernel input ``in{i}``: a number as a float, a tensor
    contiguous."""
    return "".join(
        f"        in{i} = float({r})\n" if r in numbers else f"        in{i} = {r}.contiguous()\n"
        for i, r in enumerate(refs)
    )


def _io_names(plan: Plan, refs: list[str]) -> tuple[list[str], str]:
    """(the kernel's input and output arguments, the wrapper's return expression)."""
    outs = [f"out{j}" for j in range(len(plan.outputs))]
    return [f"in{i}" for i in range(len(refs))] + outs, ", ".join(outs)


def _dtype_line(refs: list[str], plan: Plan | None = None) -> str:
    """The wrapper's ``odt``, its outputs' dtype: the inputs' promoted, or the dtype the
    reference casts its outputs to (``trace._cast_dtype``: ``x.half()`` is float16 whatever
    the inputs are)."""
    if plan is not None and plan.extra.get("out_dtype"):
        return f"        odt = {plan.extra['out_dtype']}\n"
    items = ", ".join(f"{r}.dtype" for r in refs)
    return (
        f"        odt = [{items}][0]\n"
        f"        for dt in [{items}]:\n"
        "            odt = torch.promote_types(odt, dt)\n"
    )


def _np2(n: int) -> int:
    return 1 << max(0, (int(n) - 1).bit_length())


# ------------------------------------------------------------------ inputs that broadcast


def by_index(plan: Plan) -> bool:
    """Whether the row kernels read broadcast inputs by each element's coordinates in the rows'
    shape, worked out from its flat index: rows that are groups of contiguous elements (a group
    norm's), or several trailing dimensions with a weight along a leading one (an affine
    instance norm's weight per channel)."""
    return bool(plan.extra.get("chunk") or plan.extra.get("by_index"))


def _bcast(plan: Plan) -> dict[int, list[int]]:
    """{input index: the dimensions it varies in} for the inputs that broadcast along leading
    dimensions of the rows (a table per token over every head, a mask shared by every head);
    {} where there are none. The index is the input's ``in{k}`` number."""
    real = [n for n in plan.inputs() if n.attrs["ref"] != "acc"]
    kept = {
        k: [d for d, size in enumerate(n.attrs["bshape"]) if int(size) != 1]
        for k, n in enumerate(real)
        if n.attrs["role"] == "bcast"
    }
    if by_index(plan):  # read by coordinates: each one's stride in all of them
        union = sorted({d for dims in kept.values() for d in dims})
        kept = {k: union for k in kept}
    return kept


def _bcast_rank(plan: Plan) -> int:
    """The rank the broadcast inputs were aligned to (0 without any: columns moved by a slice
    take the row-tiled kernel too)."""
    shapes = [n.attrs["bshape"] for n in plan.inputs() if n.attrs["role"] == "bcast"]
    return len(shapes[0]) if shapes else 0


def _bcast_args(plan: Plan) -> list[str]:
    """The kernel's arguments for them: the rows' leading sizes ``L{d}`` and each broadcast
    input's strides ``s{k}_{d}`` in the dimensions it varies in."""
    kept = _bcast(plan)
    if not kept:
        return []
    if by_index(plan):  # read by each element's coordinates: sizes and divisors
        dims = sorted({d for ds in kept.values() for d in ds})
        sizes = [f"L{d}" for d in dims] + [f"Q{d}" for d in dims]
    else:
        sizes = [f"L{d}" for d in range(_bcast_rank(plan) - 1)]
    gathered = [f"{x}{k}" for k in sorted(_gathers(plan)) for x in ("sg", "V")]
    return sizes + [f"s{k}_{d}" for k, dims in sorted(kept.items()) for d in dims] + gathered


def _gathers(plan: Plan) -> dict[int, int]:
    """{input index of a gathered table: input index of its integer indices}."""
    real = [n for n in plan.inputs() if n.attrs["ref"] != "acc"]
    index = {n.attrs["ref"]: k for k, n in enumerate(real) if n.attrs["role"] == "index"}
    return {
        k: index[n.attrs["gather"]]
        for k, n in enumerate(real)
        if n.attrs["role"] == "bcast" and n.attrs.get("gather")
    }


def _bcast_rows(plan: Plan, rows: str) -> list[str]:
    """Kernel lines: each broadcast input's offset of the rows ``rows`` (``rb{k}``) from the
    rows' leading coordinates, worked out once per row, not per element."""
    kept = _bcast(plan)
    if not kept or by_index(plan):  # read by flat index (see row.py)
        if _gathers(plan):
            raise NoTemplate("gathered rows in rows read by coordinates are not covered")
        return []
    rank = _bcast_rank(plan)
    gathers = _gathers(plan)
    real = [n for n in plan.inputs() if n.attrs["ref"] != "acc"]
    lead = sorted({d for dims in kept.values() for d in dims if d < rank - 1})
    out = []
    if lead:
        out.append(f"rem = {rows}")
        for d in range(rank - 2, min(lead) - 1, -1):
            out.append(f"c{d} = rem % L{d}" if d > 0 else "c0 = rem")
            if d > 0:
                out.append(f"rem = rem // L{d}")
    for k, dims in sorted(kept.items()):
        if k in gathers:  # the table's row named by this row's index, clamped to the table
            out.append(f"g{k} = tl.load(in{gathers[k]}_ptr + tl.minimum({rows}, M - 1))")
            out.append(f"g{k} = g{k}.to(tl.int64)")
            if real[k].attrs.get("wrap"):
                out.append(f"g{k} = tl.where(g{k} < 0, g{k} + V{k}, g{k})")
            out.append(f"rb{k} = tl.minimum(tl.maximum(g{k}, 0), V{k} - 1) * sg{k}")
            out.append(f"cs{k} = s{k}_{rank - 1}")
            continue
        terms = [f"c{d} * s{k}_{d}" for d in dims if d < rank - 1]
        out.append(f"rb{k} = " + (" + ".join(terms) if terms else f"{rows} * 0"))
        # its column stride (0 for one constant along the row: a weight per row)
        out.append(f"cs{k} = s{k}_{rank - 1}" if rank - 1 in dims else f"cs{k} = 0")
    return out


def bcast_view(node, shape: str = "shape") -> str | None:
    """A broadcast input as the model viewed it, before it is expanded (a weight placed along
    one dimension, or an input with 1s inserted: its dimensions where the trace saw them);
    None for one read as it is."""
    ref = node.attrs["ref"]
    if node.attrs.get("gather"):  # a view of the rows' shape: one table row expanded
        return f"{ref}.select(0, 0).expand(*{node.attrs['gather']}.shape, {ref}.shape[-1])"
    if node.attrs.get("from_vec"):
        own = node.attrs.get("bshape_in", node.attrs["bshape"])  # in the rows' own order
        view = [-1 if int(size) != 1 else 1 for size in own]
        return f"{ref}.reshape({view})"
    if node.attrs.get("viewed"):
        vdims = node.attrs["vdims"]
        for own in node.attrs.get("prefix", []):  # its first rows, as many as the rows have
            ref = f"{ref}.narrow({own}, 0, {shape}[{vdims.index(own)}])"
        sizes = ", ".join("1" if i is None else f"{ref}.shape[{i}]" for i in vdims)
        order = [i for i in vdims if i is not None]
        if node.attrs.get("permuted") and order != sorted(order):
            # Read through a permutation (a transposed input): its dimensions in the view's
            # order first, then those of size 1 the view drops; strides, not a copy.
            rest = f" + [d for d in range({ref}.dim()) if d not in {order}]"
            return f"{ref}.permute({order}{rest}).reshape(({sizes},))"
        return f"{ref}.reshape(({sizes},))"
    return None


def _bcast_wrapper(plan: Plan, shape: str) -> str:
    """Wrapper lines (8-space indented) that bind ``in{k}`` for every input: tiles contiguous,
    broadcast inputs expanded to ``shape`` (a weight vector the model viewed along one
    dimension reshaped first) and checked against the dimensions the trace saw them vary in,
    then the kernel's ``L{d}`` and ``s{k}_{d}``."""
    real = [n for n in plan.inputs() if n.attrs["ref"] != "acc"]
    kept = _bcast(plan)
    rank = _bcast_rank(plan)
    moved = plan.extra.get("bcast_moved")
    lines = []
    for k, n in enumerate(real):
        ref = n.attrs["ref"]
        if n.attrs["role"] == "scalar":
            lines.append(f"in{k} = float({ref})")
            continue
        if n.attrs["role"] != "bcast":  # a tile, or a weight's own node the kernel never reads
            tail = ".contiguous()" if n.attrs["role"] in ("tile", "vec", "index", "rowvec") else ""
            lines.append(f"in{k} = {ref}{tail}")
            continue
        if n.attrs.get("gather"):  # a table: its row stride, width and length
            lines += [
                f"in{k} = {ref}",
                f"if {ref}.shape[-1] != {shape}[-1]:",
                f"    raise ValueError('{ref} rows are not as wide as the rows')",
                f"sg{k} = in{k}.stride(0)",
                f"s{k}_{rank - 1} = in{k}.stride(1)",
                f"V{k} = in{k}.shape[0]",
                f"if V{k} == 0 and {n.attrs['gather']}.numel():",
                f"    raise IndexError('index out of range: {ref} has no rows')",
            ]
            continue
        view = bcast_view(n, shape)
        # Rows over a middle dimension: the input expanded to the rows' shape, that dimension
        # then moved last (``bcast_moved``), so the kernel reads it like rows of the last.
        tail = f".movedim({moved}, -1)" if moved is not None else ""
        if view is not None:
            lines.append(f"in{k} = {view}.expand({shape}){tail}")
        else:
            own = n.attrs.get("bshape_in", n.attrs["bshape"])  # in the rows' own order
            ones = [d for d in range(rank) if int(own[d]) == 1]
            lines += [
                f"in{k} = {ref}.expand({shape}){tail}",
                f"if any({ref}.dim() + d >= {rank} and {ref}.shape[{ref}.dim() + d - {rank}] "
                f"!= 1 for d in {ones}):",
                f"    raise ValueError('{ref} varies along a dimension the kernel broadcasts "
                "it over')",
            ]
        lines += [f"s{k}_{d} = in{k}.stride({d})" for d in kept[k]]
    if moved is not None:  # the rows' sizes with the reduced dimension last
        order = [d for d in range(rank) if d != moved % rank] + [moved % rank]
        lines += [f"L{d} = {shape}[{order[d]}]" for d in range(rank - 1)]
    elif by_index(plan):
        dims = sorted({d for ds in kept.values() for d in ds})
        lines += [f"L{d} = {shape}[{d}]" for d in dims]
        lines += [f"Q{d} = math.prod({shape}[{d + 1}:])" for d in dims]
    else:
        lines += [f"L{d} = {shape}[{d}]" for d in range(rank - 1)]
    return "".join(f"        {line}\n" for line in lines)
