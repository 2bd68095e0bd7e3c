"""The problem module inside the sandbox child: loading, per-case constants, scaling for the
interpreter, edge cases, inputs and models.

A KernelBench problem is used unmodified: its module-level constants are set from a case's
overrides before ``get_inputs()``/``get_init_inputs()`` run, and restored afterwards.
"""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import sys

import torch

from workers import constants as C

DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}


def load_module(source: str, name: str, folder: str):
    """Write ``source`` to ``folder/name.py`` and import it (Triton needs a real file)."""
    path = os.path.join(folder, f"{name}.py")
    with open(path, "w") as fh:
        fh.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


@contextlib.contextmanager
def constants(module, overrides: dict):
    """Set module constants for the duration of a case."""
    missing = object()
    saved = {k: getattr(module, k, missing) for k in overrides}
    try:
        for k, v in overrides.items():
            setattr(module, k, v)
        yield
    finally:
        for k, v in saved.items():
            if v is missing:
                delattr(module, k)
            else:
                setattr(module, k, v)


def _int_constants(module) -> dict:
    return {
        k: v
        for k, v in vars(module).items()
        if not k.startswith("_") and isinstance(v, int) and not isinstance(v, bool)
    }


def input_shapes(module, overrides: dict) -> list:
    """Shapes of ``get_inputs()`` without allocating (meta device); None for non-tensors."""
    with constants(module, overrides), torch.device("meta"):
        inputs = module.get_inputs()
    return [tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in inputs]


def size_constants(module, base: dict) -> dict:
    """Module int constants that change an input's shape; name -> the shape-bearing value."""
    values = {**_int_constants(module), **{k: v for k, v in base.items() if isinstance(v, int)}}
    try:
        ref = input_shapes(module, base)
    except Exception:  # noqa: BLE001 - a problem that cannot be probed just gets no edge cases
        return {}
    found = {}
    for k, v in values.items():
        if v < 1:
            continue
        try:
            probe = input_shapes(module, {**base, k: v + 1})
        except Exception:  # noqa: BLE001 - e.g. the constant must be a power of two
            continue
        if probe != ref:
            found[k] = v
    return found


def _numel(shape) -> int:
    return math.prod(shape) if shape is not None else 0


def _tuple_sizes(module, overrides: dict) -> dict:
    """Module constants that are tuples of positive ints (``input_shape = (32768,)``) and change
    an input's shape: name -> the tuple."""
    found = {}
    values = {k: v for k, v in vars(module).items() if not k.startswith("_")}
    values.update(overrides)
    tuples = {
        k: v
        for k, v in values.items()
        if isinstance(v, tuple | list) and v and all(_positive_int(x) for x in v)
    }
    if not tuples:
        return found
    try:
        base = input_shapes(module, overrides)
    except Exception:  # noqa: BLE001 - a problem that cannot be probed has no tuple sizes
        return found
    for k, v in tuples.items():
        try:
            moved = input_shapes(module, {**overrides, k: tuple(x + 1 for x in v)})
        except Exception:  # noqa: BLE001
            continue
        if moved != base:
            found[k] = tuple(v)
    return found


def _positive_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


def scale_for_interpreter(module, overrides: dict, cap: int = C.INTERPRET_MAX_ELEMENTS):
    """Halve the largest size constants until no input exceeds ``cap`` elements.

    Sizes are the int constants that shape an input and the elements of tuple constants that do
    (``input_shape = (32768,)``). Every size equal to the largest is halved in the same step, so
    sizes the problem keeps equal stay equal (KernelBench 100 broadcasts a ``(batch_size,)``
    vector against ``(batch_size, *input_shape)`` rows: it needs both the same).

    Returns (overrides actually used, {"orig": ..., "used": ...} or None when unchanged).
    """
    ints = size_constants(module, overrides)
    tuples = _tuple_sizes(module, overrides)
    # Int constants that shape no input themselves but that a tuple of sizes was built from at
    # import (``num_classes`` in ``input_shape = (num_classes,)``, which ``randint(0,
    # num_classes)`` also reads): halved with the sizes equal to them, so the two still agree.
    spare = {
        k: v
        for k, v in _int_constants(module).items()
        if k not in ints and k not in overrides and v > 1
    }
    used = {**overrides}
    try:
        shapes = input_shapes(module, used)
    except Exception:  # noqa: BLE001
        return used, None

    def slots() -> dict:
        out = {(k, None): used.get(k, v) for k, v in ints.items()}
        for k, v in tuples.items():
            for i, x in enumerate(used.get(k, v)):
                out[(k, i)] = x
        return out

    steps = 0
    history = []
    while max((_numel(s) for s in shapes), default=0) > cap and steps < 128:
        history.append(dict(used))
        current = slots()
        top = max((v for v in current.values() if v > 1), default=None)
        if top is None:
            break
        before = {k: used.get(k) for k in {name for name, _ in current} | set(spare)}
        if any(i is not None and v == top for (_, i), v in current.items()):
            for k, v in spare.items():
                if used.get(k, v) == top:
                    used[k] = max(1, top // 2)
        for (k, i), v in current.items():
            if v != top:
                continue
            if i is None:
                used[k] = max(1, v // 2)
            else:
                parts = list(used.get(k, tuples[k]))
                parts[i] = max(1, v // 2)
                used[k] = tuple(parts)
        steps += 1
        try:
            shapes = input_shapes(module, used)
        except Exception:  # noqa: BLE001
            for k, v in before.items():
                if v is None:
                    used.pop(k, None)
                else:
                    used[k] = v
            break
    # Sizes the reference refuses (a dilated 9x25 window over a 16x16 input): the least
    # scaled step back that it runs at (on the CPU: small sizes; torch 2.11's meta kernel
    # for a convolution does not check its window), where it runs at the case's own sizes
    # (on the meta device: shapes only, no data).
    if used != overrides and not _runs(module, used, "cpu") and _runs(module, overrides, "meta"):
        while history and not _runs(module, used, "cpu"):
            used = history.pop()
    if used == overrides:
        return used, None
    every = {**spare, **ints, **tuples}
    orig = {k: overrides.get(k, every.get(k)) for k in used if used[k] != overrides.get(k)}
    return used, {"orig": orig, "used": {k: used[k] for k in orig}}


def _runs(module, overrides: dict, device: str) -> bool:
    """Whether the reference runs at these sizes on ``device`` (on ``meta``: shapes only, no
    data; False too where an op has no meta kernel or reads a value)."""
    try:
        _, ref, _ = make_models(module, None, overrides, None, 0, device, None)
        inputs = make_inputs(module, overrides, None, 0, device)
        with torch.no_grad(), constants(module, overrides):
            ref(*inputs)
    except Exception:  # noqa: BLE001 - any failure of the problem's code
        return False
    return True


def tail_size(v: int) -> int:
    """The tail case's size for a size ``v`` of 4 or more: the power of two below it, plus one
    (a width no block divides); smaller sizes stay."""
    return (1 << int(math.log2(v - 1))) + 1 if v >= 4 else v


def edge_cases(module, base: dict) -> list[dict]:
    """Edge cases derived from a base case: tail sizes, an empty dimension, non-contiguous
    inputs, large magnitudes, infinities. Each is ``{name, overrides, transform}``."""
    sizes = size_constants(module, base)
    cases = []
    tail = {}
    for k, v in sizes.items():
        if v >= 4:
            tail[k] = tail_size(v)
    if tail and any(tail[k] != sizes[k] for k in tail):
        cases.append({"name": C.EDGE_TAIL, "overrides": {**base, **tail}, "transform": None})
    try:
        shapes = input_shapes(module, base)
        first = next((s for s in shapes if s), None)
        empty_key = None
        if first:
            for k in sizes:
                probe = input_shapes(module, {**base, k: sizes[k] + 1})
                fp = next((s for s in probe if s), None)
                if fp and fp[0] != first[0]:
                    empty_key = k
                    break
        if empty_key:
            cases.append(
                {"name": C.EDGE_EMPTY, "overrides": {**base, empty_key: 0}, "transform": None}
            )
    except Exception:  # noqa: BLE001
        pass
    cases.append({"name": C.EDGE_NONCONTIGUOUS, "overrides": dict(base), "transform": "strided"})
    cases.append({"name": C.EDGE_LARGE_VALUES, "overrides": dict(base), "transform": "large"})
    cases.append({"name": C.EDGE_INF, "overrides": dict(base), "transform": "inf"})
    return cases


def make_inputs(module, overrides, dtype, seed, device, transform=None) -> list:
    """Fresh inputs for a case: seeded ``get_inputs()``, floats cast to the case dtype."""
    torch.manual_seed(seed)
    with constants(module, overrides), torch.device(device):
        raw = module.get_inputs()
    out = []
    for t in raw:
        if isinstance(t, torch.Tensor):
            t = t.to(device)
            if dtype is not None and t.is_floating_point():
                t = t.to(dtype)
        out.append(t)
    if transform:
        out = apply_transform(out, transform, seed)
    return out


def apply_transform(inputs: list, transform: str, seed: int) -> list:
    out = []
    first_float = True
    for t in inputs:
        if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.numel() == 0:
            out.append(t)
            continue
        if transform == "strided":
            if t.dim() >= 2:
                t = t.transpose(-1, -2).contiguous().transpose(-1, -2)
            else:
                wide = torch.empty(t.numel() * 2, dtype=t.dtype, device=t.device)
                wide[::2] = t
                t = wide[::2]
        elif transform == "large":
            scale = 100.0 if t.dtype == torch.float16 else 1e4
            t = t * scale
        elif transform == "inf" and first_float:
            t = t.clone()
            flat = t.view(-1)
            flat[0] = float("inf")
            if flat.numel() > 1:
                flat[-1] = float("-inf")
            first_float = False
        out.append(t)
    return out


def make_models(
    problem, candidate_module, overrides, dtype, seed, device, high_precision, train=False
):
    """(reference in high precision, reference in the case dtype, candidate) for a case.

    Both are built from the same seed and the candidate gets the reference's parameters where
    names and shapes match, so both compute the same function. Both are in eval mode unless
    ``train`` (the workload's ``"mode": "train"``).
    """
    # A candidate keeps the problem's constants (its constructor may read them, as the
    # reference's does): the case's sizes apply to both, else its parameters take the traced
    # shape and no longer match the reference's.
    own = {k: v for k, v in overrides.items() if hasattr(candidate_module, k)}
    with constants(problem, overrides), torch.device(device):
        init = problem.get_init_inputs()
        torch.manual_seed(seed)
        ref = problem.Model(*init)
        cand = None
        if candidate_module is not None:
            torch.manual_seed(seed)
            with constants(candidate_module, own):
                cand = candidate_module.ModelNew(*init)
    ref = ref.to(device).train(train)
    if dtype is not None:
        ref = ref.to(dtype)
    if cand is not None:
        cand = cand.to(device).train(train)
        if dtype is not None:
            cand = cand.to(dtype)
        copy_parameters(ref, cand)
    high = None
    if high_precision is not None:
        import copy

        high = copy.deepcopy(ref).to(high_precision)
    return high, ref, cand


def copy_parameters(src, dst):
    theirs = dst.state_dict()
    with torch.no_grad():
        for name, value in src.state_dict().items():
            if name in theirs and theirs[name].shape == value.shape:
                theirs[name].copy_(value)
