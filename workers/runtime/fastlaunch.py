"""A kernel module's call, replayed as the Triton launches it makes (issue 14: a lean launch).

A template candidate's ``forward`` is Python: it works out views, a launch configuration and a
grid, allocates its outputs, and launches through Triton's JIT, which binds the arguments and
works out their specialisation again on every call. On the H200 host that is 23-45 us per call
against 5 us for the launch itself (``docs/benchmarks.md``), more than the stock operator costs
in eager mode (a softmax is 7 us), so a patched model is slower on host-bound decode steps.

Everything that work decides is fixed by a call's signature (shapes, dtypes, devices, strides,
the float arguments). So for one signature the runtime records, once, what the call did:

- every Triton launch (the compiled kernel, its grid, every argument in order: each tensor
  traced to the call's argument or to a buffer the call allocated, everything else a constant);
- every PyTorch operation it ran, through a dispatch mode: only allocations (``empty*``) and
  views are allowed; any other operation (a copy, a fill, a reduction in the wrapper, an
  ``.item()``) means the call is more than its launches, and it is never replayed;
- what it returned (a buffer or argument, as a view with its shape, stride and offset).

A :class:`Replay` then serves that signature with the allocations and the launches alone,
straight through the compiled kernel's launcher (``CompiledKernel.run``: the same call Triton's
JIT makes at its end). Before it is used, it is run once on copies of the arguments and must
give bit-for-bit the outputs of the recorded call; a call whose argument strides or pointer
alignment differ from the recorded ones (Triton specialises on both) takes the module's own
path. Where launch hooks are set when a signature is recorded (profilers set
``triton.knobs.runtime.launch_enter_hook``) it is not replayed; hooks set later do not see the
replayed launches. Triton's interpreter takes the module's path. No Django here; no candidate
code is trusted more: the replay runs the same compiled kernels the module would have launched.
"""

from __future__ import annotations

import inspect
import threading
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ALIGN = 16  # Triton specialises a pointer argument on its divisibility by 16

_ALLOC = {
    "aten.empty.memory_format",
    "aten.empty_strided.default",
    "aten.empty_like.default",
    "aten.new_empty.default",
    "aten.new_empty_strided.default",
}


class Refused(Exception):
    """The call cannot be replayed (the reason says why); the module's own path serves it.
    ``retry``: another call of the signature may do (this one's tensors shared memory)."""

    def __init__(self, reason: str, *, retry: bool = False):
        super().__init__(reason)
        self.retry = retry
        self.output = None


class _Ops(TorchDispatchMode):
    """Every PyTorch operation a call runs: allocations kept, views allowed, the rest listed."""

    def __init__(self):
        super().__init__()
        self.allocs: list[torch.Tensor] = []
        self.other: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = str(func)
        if name in _ALLOC:
            self.allocs.append(out)
        elif getattr(func, "is_view", False):
            if not _shares(out, args):
                self.other.append(name)  # a view op that copied (``reshape``)
        elif func._schema.is_mutable or _has_tensor(out):
            self.other.append(name)  # a computation
        # else a query that makes no tensor (``promote_types``): nothing to replay
        return out


def _has_tensor(out) -> bool:
    if isinstance(out, torch.Tensor):
        return True
    return isinstance(out, (tuple, list)) and any(_has_tensor(o) for o in out)


def _shares(out, args) -> bool:
    """Whether ``out`` is a view of the op's first tensor argument (same storage)."""
    base = next((a for a in args if isinstance(a, torch.Tensor)), None)
    return (
        isinstance(out, torch.Tensor)
        and base is not None
        and out.untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
    )


# ------------------------------------------------------------------------- recording launches

_local = threading.local()
_spy_lock = threading.Lock()
_spy_users = 0
_original_run = None


def _spy_run(self, *args, grid, warmup, **kwargs):
    kernel = _original_run(self, *args, grid=grid, warmup=warmup, **kwargs)
    seen = getattr(_local, "launches", None)
    if seen is not None and not warmup:
        seen.append((self, args, kwargs, grid, kernel))
    return kernel


class _Launches:
    """Within the block, this thread's Triton JIT launches are recorded (others pass through)."""

    def __enter__(self):
        global _spy_users, _original_run
        from triton.runtime.jit import JITFunction

        with _spy_lock:
            if _spy_users == 0:
                _original_run = JITFunction.run
                JITFunction.run = _spy_run
            _spy_users += 1
        self.launches: list = []
        _local.launches = self.launches
        return self

    def __exit__(self, *exc):
        global _spy_users
        from triton.runtime.jit import JITFunction

        _local.launches = None
        with _spy_lock:
            _spy_users -= 1
            if _spy_users == 0:
                JITFunction.run = _original_run
        return False


# --------------------------------------------------------------------------------- the plan

ARG, BUF, CONST = 0, 1, 2


@dataclass(frozen=True)
class _Launch:
    run: object  # the compiled kernel's launcher
    function: object
    metadata: object
    grid: tuple[int, int, int]
    device: int
    values: tuple  # (ARG, index) | (BUF, index) | (CONST, value), in the kernel's order


@dataclass(frozen=True)
class _Buffer:
    shape: tuple
    stride: tuple
    dtype: torch.dtype
    device: torch.device


def _where(t: torch.Tensor, args: tuple, bufs: list[torch.Tensor]):
    """(ARG, i) or (BUF, j) for a tensor a launch took or a call returned, by its storage;
    (CONST, t) for a tensor the module holds; Refused where it is ambiguous."""
    ptr = t.untyped_storage().data_ptr()
    hits = [
        (ARG, i)
        for i, a in enumerate(args)
        if isinstance(a, torch.Tensor) and a.untyped_storage().data_ptr() == ptr
    ]
    hits += [(BUF, j) for j, b in enumerate(bufs) if b.untyped_storage().data_ptr() == ptr]
    if not hits:
        return CONST, t  # the module's own tensor (a parameter or buffer it holds)
    if len(hits) > 1:
        raise Refused("two of the call's tensors share memory", retry=True)
    return hits[0]


def _bound_values(jit, args: tuple, kwargs: dict) -> list:
    """The kernel's arguments in its parameter order, defaults filled in: what Triton's JIT
    hands the compiled kernel's launcher (``*bound_args.values()``)."""
    sig = inspect.signature(jit.fn)
    named = {k: v for k, v in kwargs.items() if k in sig.parameters}
    bound = sig.bind(*args, **named)
    bound.apply_defaults()
    return list(bound.arguments.values()), bound.arguments


def _driver_stream():
    """device index -> the device's current stream (a capture stream while capturing), as
    Triton's JIT takes it."""
    from triton.runtime.driver import driver

    return driver.active.get_current_stream


class Replay:
    """One signature's call as allocations and launches (see the module docstring)."""

    def __init__(self, launches, buffers, returns, checks, single: bool, stream=None):
        self.launches: tuple[_Launch, ...] = launches
        self.buffers: tuple[_Buffer, ...] = buffers
        self.returns = returns  # ((BUF, index, (shape, stride, offset) or None: as is), ...)
        self.checks = checks  # ((argument index, stride, aligned), ...)
        self.single = single
        self._stream = stream or _driver_stream()

    def admits(self, args: tuple) -> bool:
        for i, stride, aligned in self.checks:
            a = args[i]
            if a.stride() != stride or (a.data_ptr() % ALIGN == 0) != aligned:
                return False
        return True

    def __call__(self, args: tuple):
        bufs = [
            torch.empty_strided(b.shape, b.stride, dtype=b.dtype, device=b.device)
            for b in self.buffers
        ]
        for ln in self.launches:
            vals = [args[x] if k == ARG else bufs[x] if k == BUF else x for k, x in ln.values]
            g0, g1, g2 = ln.grid
            ln.run(g0, g1, g2, self._stream(ln.device), ln.function, ln.metadata,
                   None, None, None, *vals)  # fmt: skip
        out = []
        for k, x, view in self.returns:
            t = args[x] if k == ARG else bufs[x]
            out.append(t if view is None else t.as_strided(*view))
        return out[0] if self.single else tuple(out)


def record(call, args: tuple, *, stream=None) -> tuple[object, Replay]:
    """Run ``call(args)`` once, recording it; (its output, a Replay of it). Refused (with the
    output still computed, in ``.output``) where the call is more than its launches.
    ``stream``: device index -> stream handle (default: Triton's driver's current stream)."""
    from triton import knobs

    with _Ops() as ops, _Launches() as seen:
        out = call(args)
    try:
        return out, _plan(out, args, ops, seen.launches, knobs, stream)
    except Refused as exc:
        exc.output = out
        raise


def _hooked(hook) -> bool:
    """Whether a launch hook would run: Triton 3.6 keeps None or a function, 3.9 a chain."""
    return hook is not None and bool(getattr(hook, "calls", True))


def _plan(out, args, ops: _Ops, launches: list, knobs, stream) -> Replay:
    if ops.other:
        raise Refused(f"the call runs PyTorch operations besides its launches: {ops.other[:3]}")
    if not launches:
        raise Refused("the call made no Triton launch")
    if _hooked(knobs.runtime.launch_enter_hook) or _hooked(knobs.runtime.launch_exit_hook):
        raise Refused("Triton launch hooks are set (a profiler)")
    allocs = [t for t in ops.allocs if isinstance(t, torch.Tensor)]
    taken: list[torch.Tensor] = []  # the allocations the replay makes, in its order

    def locate(t: torch.Tensor) -> tuple[int, int]:
        kind, i = _where(t, args, allocs)
        if kind != BUF:
            return kind, i
        if not any(b is allocs[i] for b in taken):
            taken.append(allocs[i])
        return BUF, next(j for j, b in enumerate(taken) if b is allocs[i])

    plan = []
    for jit, a, kw, grid, kernel in launches:
        if hasattr(kernel, "result"):  # a compile future (Triton 3.6's async compile)
            kernel = kernel.result()
        if not all(hasattr(kernel, k) for k in ("run", "function", "packed_metadata")):
            raise Refused("the launch returned no compiled kernel (an interpreter?)")
        values, named = _bound_values(jit, a, kw)
        if callable(grid):
            grid = grid(named)
        grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
        slots, device, tensors = [], None, 0
        for v in values:
            if isinstance(v, torch.Tensor):
                kind, i = locate(v)
                tensors += 1
                device = v.device.index if v.is_cuda else device
                if kind == CONST:
                    slots.append((CONST, v))
                    continue
                # The launcher reads only the pointer: the argument or buffer itself does,
                # where the launch took a view of it that starts where it starts.
                base = args[i] if kind == ARG else taken[i]
                if v.data_ptr() != base.data_ptr():
                    raise Refused("a launch took a view of a tensor at an offset")
                slots.append((kind, i))
            elif isinstance(v, (int, float, bool, str, type(None))) or type(v).__name__ in (
                "constexpr",
                "dtype",
            ):
                slots.append((CONST, v))
            else:
                raise Refused(f"a launch argument of type {type(v).__name__}")
        if not tensors:
            raise Refused("a launch with no tensor argument")
        plan.append(
            _Launch(kernel.run, kernel.function, kernel.packed_metadata, grid, device, tuple(slots))
        )
    single = isinstance(out, torch.Tensor)
    returns = []
    for t in [out] if single else list(out or ()):
        if not isinstance(t, torch.Tensor):
            raise Refused("the call returned something other than tensors")
        kind, i = locate(t)
        if kind != BUF:
            raise Refused("the call returns a tensor it did not allocate")
        base = taken[i]
        same = t.shape == base.shape and t.stride() == base.stride() and t.storage_offset() == 0
        returns.append((BUF, i, None if same else (tuple(t.shape), tuple(t.stride()),
                                                    t.storage_offset())))  # fmt: skip
    buffers = tuple(_Buffer(tuple(b.shape), tuple(b.stride()), b.dtype, b.device) for b in taken)
    checks = tuple(
        (i, tuple(a.stride()), a.data_ptr() % ALIGN == 0)
        for i, a in enumerate(args)
        if isinstance(a, torch.Tensor)
    )
    return Replay(tuple(plan), buffers, tuple(returns), checks, single, stream)


def _copy(a: torch.Tensor) -> torch.Tensor:
    """A copy with ``a``'s strides (``clone`` makes a slice of a KV cache dense, and the replay
    would then be checked on a layout it never serves)."""
    return torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device).copy_(a)


def verified(call, args: tuple, replay: Replay) -> str:
    """ "" where ``replay`` gives bit-for-bit what ``call`` gives on copies of ``args``, else why
    not (the replay is then not used)."""
    copies = tuple(_copy(a) if isinstance(a, torch.Tensor) else a for a in args)
    want = call(copies)
    got = replay(copies)
    want = [want] if isinstance(want, torch.Tensor) else list(want)
    got = [got] if isinstance(got, torch.Tensor) else list(got)
    if len(want) != len(got):
        return "the replay returned a different number of outputs"
    for w, g in zip(want, got, strict=True):
        if w.shape != g.shape or w.dtype != g.dtype or w.stride() != g.stride():
            return "the replay's output has another shape, dtype or stride"
        if not torch.equal(w, g):
            return "the replay's output differs from the call's"
    return ""
