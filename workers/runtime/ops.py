"""Promoted kernels as PyTorch operators: ``torch.ops.ke.<kind>`` (no Django).

Each operator kind a model uses (RMSNorm, LayerNorm, softmax, SiLU, SiLU-and-mul, residual add
+ RMSNorm, cross-entropy, grouped-query attention) is one ``torch.library.custom_op`` with a
fake implementation, so a model calls it under ``torch.compile`` (no graph break: the compiler
sees an opaque operator with known output metadata) and inside CUDA-graph capture (the launch is
captured like any kernel).

What serves a call is decided **once per call signature** (kind, shapes, dtypes, device, float
arguments): the first call resolves the region, the stage (default, canary, shadow) and the
kernel module, builds the kernel's ``ModelNew`` for those sizes and caches a ``Launcher``; every
later call with that signature is a dict lookup and the launcher. A signature no region covers
resolves to the PyTorch reference of the kind's contract (a counted fallback, with the reason).

Two routes reach a launcher. ``torch.ops.ke.<kind>`` goes through the dispatcher (tens of
microseconds of host time per call on a slow host): it is what ``torch.compile`` and
``torch.export`` see. ``call(kind, args)`` is the lean eager route a patched module takes when
nothing is compiling and autograd is off: the signature key, the dict lookup and the kernel's
``forward``, nothing else. Both count the same calls; ``coverage()`` says how many came through
the operator (``via_op``). A CUDA graph captured on either route holds the same kernel launches.

The serving table is an ``OpRuntime``: regions added locally (``serve``: a kernel source and its
problem, as the model check and the GPU bench do) or taken from a ``DispatchClient``'s verified
manifest (``attach``: re-read when the client installs a new manifest, so a rollback reaches new
launches; a CUDA graph captured before keeps what it captured until it is captured again).

Off the hot path: shadow samples (every ``1/rate``-th call of a signature, inputs cloned and
handed to a background thread that runs the reference and the shadow kernel and compares them in
the contract's tolerance) and latency samples (every ``latency_every``-th call, synchronised);
neither happens while a CUDA graph is being captured. Call counts are plain counters the
runtime turns into the client's metric batch when the client flushes.

Operator contracts (the catalog problem each kind's kernels are evaluated against):
``rms_norm(x, weight, eps)``, ``layer_norm(x, weight, bias, eps)``, ``softmax(x)`` (last
dimension), ``silu(x)``, ``silu_and_mul(gate, up)``, ``residual_rms_norm(x, residual, weight,
eps)`` (the norm of ``x + residual``), ``cross_entropy(logits, targets)`` (mean; every target a
valid class: the contract has no ``ignore_index``), ``attention(q, k, v)`` (``gqa_attention``:
q ``[B, Hq, Tq, D]``, k and v ``[B, Hkv, Tk, D]``, query head ``h`` reads key/value head
``h // (Hq // Hkv)``, scale ``1/sqrt(D)``, causal with the queries the last ``Tq`` of the ``Tk``
positions, softmax in float32; k and v may be slices of a KV cache: bound as they come, strided,
never copied).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import queue
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from workers import constants as C
from workers import cute_dsl
from workers.runtime import fastlaunch
from workers.runtime import scope as S
from workers.runtime.kinds import ALIASES, kind_of
from workers.runtime.modules import ModuleCache

LIBRARY = "ke"
PATH_DEFAULT, PATH_CANARY, PATH_FALLBACK = "default", "canary", "fallback"
SHADOW_QUEUE = 64  # shadow samples waiting for the background thread; more are dropped
CLIENT_LATENCY_EVERY = 64  # a client-attached runtime times one call in this many

# The contract of ``silu_and_mul`` (the SwiGLU activation) in the KernelBench format: no catalog
# problem has it yet, so the runtime carries it; a campaign on this source yields its kernels.
SILU_AND_MUL_PROBLEM = '''"""SwiGLU activation: silu(gate) * up over the MLP intermediate."""

import torch
import torch.nn as nn
import torch.nn.functional as F

num_tokens = 4096
intermediate_size = 14336


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        return F.silu(gate) * up


def get_inputs():
    return [
        torch.randn(num_tokens, intermediate_size),
        torch.randn(num_tokens, intermediate_size),
    ]


def get_init_inputs():
    return []
'''


# ----------------------------------------------------------------------------- kinds (contracts)


@dataclass(frozen=True)
class Binding:
    """A call seen as the kind's problem sees it."""

    constants: dict  # the problem's module constants for this call (ints: sizes; floats: checked)
    inputs: list  # the problem's forward inputs
    params: dict  # dotted parameter name of the kernel module -> the caller's tensor
    out_shape: tuple | None  # the kernel's output reshaped to this (None: as it comes)


def _rows(x: torch.Tensor) -> tuple[int, int]:
    n = x.shape[-1] if x.dim() else 1
    return (x.numel() // n if n else 0), n


def _bind_rms_norm(x, weight, eps):
    m, n = _rows(x)
    return Binding(
        {"num_tokens": m, "hidden_size": n, "eps": eps},
        [x.reshape(m, n)],
        {"weight": weight},
        tuple(x.shape),
    )


def _bind_layer_norm(x, weight, bias, eps):
    m, n = _rows(x)
    return Binding(
        {"num_tokens": m, "hidden_size": n, "eps": eps},
        [x.reshape(m, n)],
        {"norm.weight": weight, "norm.bias": bias},
        tuple(x.shape),
    )


def _bind_softmax(x):
    m, n = _rows(x)
    return Binding({"batch_size": m, "dim": n}, [x.reshape(m, n)], {}, tuple(x.shape))


def _bind_silu(x):
    m, n = _rows(x)
    return Binding({"num_tokens": m, "intermediate_size": n}, [x.reshape(m, n)], {}, tuple(x.shape))


def _bind_silu_and_mul(gate, up):
    m, n = _rows(gate)
    return Binding(
        {"num_tokens": m, "intermediate_size": n},
        [gate.reshape(m, n), up.reshape(m, n)],
        {},
        tuple(gate.shape),
    )


def _bind_residual_rms_norm(x, residual, weight, eps):
    m, n = _rows(x)
    return Binding(
        {"num_tokens": m, "hidden_size": n, "eps": eps},
        [x.reshape(m, n), residual.reshape(m, n)],
        {"weight": weight},
        tuple(x.shape),
    )


def _bind_cross_entropy(logits, targets):
    m, n = logits.shape
    return Binding({"num_tokens": m, "vocab_size": n}, [logits, targets], {}, None)


def _bind_attention(q, k, v):
    b, hq, tq, d = q.shape
    return Binding(
        {
            "batch": b,
            "num_heads": hq,
            "num_kv_heads": k.shape[1],
            "q_len": tq,
            "kv_len": k.shape[2],
            "head_dim": d,
        },
        [q, k, v],
        {},
        None,
    )


def attention_reference(q, k, v):
    """The ``gqa_attention`` contract: causal grouped-query attention, the queries being the last
    ``Tq`` of the ``Tk`` key positions (bottom-right aligned), softmax in float32 then cast to
    ``q``'s dtype. The operations are the decoder's (``decoder.CoreAttention``), so a call that
    falls back gives the stock model's outputs bit for bit."""
    t, s = q.shape[-2], k.shape[-2]
    groups = q.shape[1] // k.shape[1]
    if groups > 1:
        k = k.repeat_interleave(groups, dim=1)
        v = v.repeat_interleave(groups, dim=1)
    scores = torch.matmul(q, k.transpose(2, 3)) * (1.0 / math.sqrt(q.shape[-1]))
    if t > 1:
        rows = torch.arange(s - t, s, device=q.device)[:, None]
        cols = torch.arange(s, device=q.device)[None, :]
        scores = scores.masked_fill(cols > rows, float("-inf"))
    probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    return torch.matmul(probs, v)


def rms_norm_reference(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _ref_residual_rms_norm(x, residual, weight, eps):
    return rms_norm_reference(x + residual, weight, eps)


@dataclass(frozen=True)
class Kind:
    """One operator kind: its PyTorch reference, how a call maps onto its problem, its names."""

    name: str
    catalog: str | None  # the catalog problem whose contract it keeps (None: SILU_AND_MUL)
    aliases: tuple[str, ...]
    bind: Callable
    reference: Callable
    inputs: tuple[int, ...]  # the call's arguments that are the problem's inputs (bind's order)
    params: tuple[int, ...]  # the call's arguments bound as the kernel's parameters (bind's)

    @property
    def op(self):
        return getattr(getattr(torch.ops, LIBRARY), self.name)

    def problem_source(self) -> str:
        if self.catalog is None:
            return SILU_AND_MUL_PROBLEM
        from workers.catalog import catalog_get

        return catalog_get(self.catalog).problem_source()


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "rms_norm",
            "rms_norm",
            ALIASES["rms_norm"],
            _bind_rms_norm,
            rms_norm_reference,
            inputs=(0,),
            params=(1,),
        ),
        Kind(
            "layer_norm",
            "layer_norm",
            ALIASES["layer_norm"],
            _bind_layer_norm,
            lambda x, w, b, eps: F.layer_norm(x, (x.shape[-1],), w, b, eps),
            inputs=(0,),
            params=(1, 2),
        ),
        Kind(
            "softmax",
            "softmax",
            ALIASES["softmax"],
            _bind_softmax,
            lambda x: torch.softmax(x, -1),
            inputs=(0,),
            params=(),
        ),
        Kind("silu", "silu", ALIASES["silu"], _bind_silu, F.silu, inputs=(0,), params=()),
        Kind(
            "silu_and_mul",
            None,
            ALIASES["silu_and_mul"],
            _bind_silu_and_mul,
            lambda g, u: F.silu(g) * u,
            inputs=(0, 1),
            params=(),
        ),
        Kind(
            "residual_rms_norm",
            "residual_rms_norm",
            ALIASES["residual_rms_norm"],
            _bind_residual_rms_norm,
            _ref_residual_rms_norm,
            inputs=(0, 1),
            params=(2,),
        ),
        Kind(
            "cross_entropy",
            "cross_entropy",
            ALIASES["cross_entropy"],
            _bind_cross_entropy,
            F.cross_entropy,
            inputs=(0, 1),
            params=(),
        ),
        Kind(
            "attention",
            "gqa_attention",
            ALIASES["attention"],
            _bind_attention,
            attention_reference,
            inputs=(0, 1, 2),
            params=(),
        ),
    )
}


# ------------------------------------------------------------------------------ the operators


def _run(kind: str, args: tuple):
    runtime = _CURRENT[-1]
    runtime.op_calls[kind] = runtime.op_calls.get(kind, 0) + 1
    return runtime.run(kind, args)


def call(kind: str, args: tuple):
    """The lean eager route to the launcher of ``args``' signature (no dispatcher round trip).

    For eager callers only: nothing compiling (``torch.compile`` and ``torch.export`` must see
    ``torch.ops.ke.<kind>``) and no argument that autograd tracks (the operator route keeps the
    operator's autograd behaviour). ``workers.runtime.patch`` checks both before it comes here.
    """
    return _CURRENT[-1].run(kind, args)


@torch.library.custom_op(f"{LIBRARY}::rms_norm", mutates_args=())
def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return _run("rms_norm", (x, weight, eps))


@rms_norm.register_fake
def _(x, weight, eps):
    return x.new_empty(x.shape, dtype=torch.promote_types(x.dtype, weight.dtype))


@torch.library.custom_op(f"{LIBRARY}::layer_norm", mutates_args=())
def layer_norm(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float
) -> torch.Tensor:
    return _run("layer_norm", (x, weight, bias, eps))


@layer_norm.register_fake
def _(x, weight, bias, eps):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op(f"{LIBRARY}::softmax", mutates_args=())
def softmax(x: torch.Tensor) -> torch.Tensor:
    return _run("softmax", (x,))


@softmax.register_fake
def _(x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op(f"{LIBRARY}::silu", mutates_args=())
def silu(x: torch.Tensor) -> torch.Tensor:
    return _run("silu", (x,))


@silu.register_fake
def _(x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op(f"{LIBRARY}::silu_and_mul", mutates_args=())
def silu_and_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return _run("silu_and_mul", (gate, up))


@silu_and_mul.register_fake
def _(gate, up):
    return gate.new_empty(gate.shape, dtype=torch.promote_types(gate.dtype, up.dtype))


@torch.library.custom_op(f"{LIBRARY}::residual_rms_norm", mutates_args=())
def residual_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> torch.Tensor:
    return _run("residual_rms_norm", (x, residual, weight, eps))


@residual_rms_norm.register_fake
def _(x, residual, weight, eps):
    dtype = torch.promote_types(torch.promote_types(x.dtype, residual.dtype), weight.dtype)
    return x.new_empty(x.shape, dtype=dtype)


@torch.library.custom_op(f"{LIBRARY}::cross_entropy", mutates_args=())
def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return _run("cross_entropy", (logits, targets))


@cross_entropy.register_fake
def _(logits, targets):
    return logits.new_empty(())


@torch.library.custom_op(f"{LIBRARY}::attention", mutates_args=())
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return _run("attention", (q, k, v))


@attention.register_fake
def _(q, k, v):
    return torch.empty_like(q, memory_format=torch.contiguous_format)


OPERATORS = {
    "rms_norm": rms_norm,
    "layer_norm": layer_norm,
    "softmax": softmax,
    "silu": silu,
    "silu_and_mul": silu_and_mul,
    "residual_rms_norm": residual_rms_norm,
    "cross_entropy": cross_entropy,
    "attention": attention,
}


# --------------------------------------------------------------------------- the serving table


@dataclass(frozen=True)
class KernelSpec:
    """A kernel module (``ModelNew``) and the scope it may serve (None: any call)."""

    digest: str
    source: str
    scope: dict | None = None

    @property
    def backend(self) -> str:
        """The kernel language its (signed) source declares: Triton, CuTe DSL or both."""
        return cute_dsl.declared_backend(self.source)


@dataclass
class RouteSpec:
    """One region of one kind: what serves it at each stage."""

    kind: str
    operator: str
    region: int | None
    scope: dict | None  # None: every call of the kind
    problem_source: str
    default: KernelSpec | None = None
    canary: KernelSpec | None = None
    canary_percent: float = 0.0
    shadow: KernelSpec | None = None
    shadow_rate: float = 0.0
    tolerance: dict | str | None = None
    # The region's kernel was measured faster than torch.compile on every case of its campaign
    # (the registry's manifest says so per artifact): patched modules keep the kernel when
    # compiling. Otherwise they hand the compiler the stock code, which it fuses.
    beats_compile: bool = False


def _capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def _dtype_name(tensors) -> str | None:
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.is_floating_point():
            return str(t.dtype).removeprefix("torch.")
    return None


def signature_key(kind: str, args: tuple) -> tuple:
    """What a launcher is cached under: the kind, each tensor's shape, dtype and device, and the
    other arguments as they are (the float arguments are part of the contract)."""
    key = [kind]
    for a in args:
        if isinstance(a, torch.Tensor):
            key += (a.shape, a.dtype, a.device)
        else:
            key.append(a)
    return tuple(key)


class _KernelCall:
    """A kernel module instance built for one signature, with the caller's parameters bound.

    Everything ``Kind.bind`` works out that the signature fixes (the problem's 2-D views of the
    inputs, whether the output needs its caller's shape back) is worked out here once; a call
    binds the parameters by position and reshapes only where the signature said it must.
    """

    # Calls recorded for a launch replay before giving up on one (a first call whose tensors
    # share memory is tried again on the next).
    REPLAY_TRIES = 3

    def __init__(
        self, kind: Kind, instance, owners: list, b: Binding, args: tuple, *, replay: bool = False
    ):
        self.kind = kind
        # The launch replay (``workers.runtime.fastlaunch``): built on a first call on a GPU,
        # then serving every call whose strides and alignment match the recorded ones.
        self.fast: fastlaunch.Replay | None = None
        self.fast_tries = self.REPLAY_TRIES if replay else 0
        self.fast_reason = "" if replay else "not on a GPU runtime"
        self.instance = instance
        self.forward = instance.forward
        # (the owning module's parameter dict, the parameter's name, the argument's index)
        self.params = tuple(
            (owner._parameters, name, i)
            for (owner, name), i in zip(owners, kind.params, strict=True)
        )
        # (the argument's index, the shape the problem takes it in, or None: as it comes)
        self.inputs = tuple(
            (i, None if t.shape == args[i].shape else tuple(t.shape))
            for i, t in zip(kind.inputs, b.inputs, strict=True)
        )
        first = b.inputs[0].shape
        self.out_shape = None if b.out_shape is None or b.out_shape == first else b.out_shape
        for (_, _, i), tensor in zip(self.params, b.params.values(), strict=True):
            assert tensor is args[i], f"{kind.name}: Kind.params disagrees with Kind.bind"

    def __call__(self, args):
        fast = self.fast
        if fast is not None and fast.admits(args):
            return fast(args)
        if self.fast_tries and not _capturing():
            return self._record(args)
        return self.call(args)

    def _record(self, args):
        """Serve this call through the module while recording it; keep the replay if it gives
        the module's outputs bit for bit."""
        self.fast_tries -= 1
        try:
            out, replay = fastlaunch.record(self.call, args)
        except fastlaunch.Refused as exc:
            self.fast_reason = str(exc)
            if not exc.retry:
                self.fast_tries = 0
            return exc.output
        try:
            why = fastlaunch.verified(self.call, args, replay)
        except Exception as exc:  # noqa: BLE001 - e.g. no memory for the copies: no replay
            why = f"the replay could not be checked: {type(exc).__name__}: {exc}"[:300]
        if why:
            self.fast_reason, self.fast_tries = why, 0
        else:
            self.fast, self.fast_reason, self.fast_tries = replay, "", 0
        return out

    def call(self, args):
        """The kernel module's own path."""
        for params, name, i in self.params:
            params[name] = args[i]
        inputs = self.inputs
        if len(inputs) == 1:
            i, shape = inputs[0]
            out = self.forward(args[i] if shape is None else args[i].reshape(shape))
        else:
            out = self.forward(*(args[i] if s is None else args[i].reshape(s) for i, s in inputs))
        return out if self.out_shape is None else out.reshape(self.out_shape)


@dataclass
class Launcher:
    """What serves one call signature; resolved once, then called for every such call."""

    kind: str
    signature: str
    dtype: str | None
    path: str
    region: int | None = None
    operator: str = ""
    artifact: str | None = None
    reason: str = ""
    serve: Callable | None = None  # default kernel or reference
    canary: Callable | None = None
    canary_artifact: str | None = None
    canary_percent: float = 0.0
    shadow: Callable | None = None
    shadow_artifact: str | None = None
    shadow_every: int = 0
    tolerance: dict | str | None = None
    latency_every: int = 0
    calls: int = 0
    canary_calls: int = 0
    errors: int = 0
    failed: str | None = None  # the artifact that raised (this signature falls back since)
    error: str = ""
    reported: dict = field(default_factory=dict)
    latency_ms: dict = field(default_factory=dict)  # path -> samples since the last report
    plain: bool = False  # no canary, shadow or latency sampling: serve and count, nothing else
    _acc: float = 0.0

    def __post_init__(self):
        self._reference = KINDS[self.kind].reference

    def settle(self) -> None:
        """Decide, once the launcher is built (or after a fault), whether calls take the plain
        path: one counter and the serving function, no per-call branches for stages."""
        self.plain = self.canary is None and self.shadow is None and not self.latency_every

    def __call__(self, runtime: OpRuntime, args):
        self.calls += 1
        if self.plain:
            try:
                return self.serve(args)
            except Exception as exc:  # noqa: BLE001 - a kernel fault must not take the call down
                return self._fault(runtime, self.path, exc, args)
        n = self.calls
        path, fn = PATH_DEFAULT if self.artifact else PATH_FALLBACK, self.serve
        if self.canary is not None:
            self._acc += self.canary_percent
            if self._acc >= 100.0:
                self._acc -= 100.0
                self.canary_calls += 1
                path, fn = PATH_CANARY, self.canary
        sample_latency = self.latency_every and n % self.latency_every == 0 and not _capturing()
        try:
            if sample_latency:
                out = self._timed(path, fn, args)
            else:
                out = fn(args)
        except Exception as exc:  # noqa: BLE001 - a kernel fault must not take the call down
            out = self._fault(runtime, path, exc, args)
        if self.shadow is not None and n % self.shadow_every == 0 and not _capturing():
            runtime.shadow_submit(self, args)
        return out

    def _fault(self, runtime: OpRuntime, path: str, exc: Exception, args):
        if path == PATH_FALLBACK:
            raise exc
        self.errors += 1
        self.failed = self.canary_artifact if path == PATH_CANARY else self.artifact
        self.error = f"{type(exc).__name__}: {exc}"[:500]
        runtime.last_error = f"{self.kind} {self.signature}: {self.error}"
        # This signature falls back from now on; the error is counted and reported.
        self.serve, self.canary = self.reference, None
        self.artifact = self.canary_artifact = None
        self.reason = f"kernel raised {type(exc).__name__}: falls back"
        self.path = PATH_FALLBACK
        self.settle()
        return self.reference(args)

    def reference(self, args):
        return self._reference(*args)

    def _timed(self, path, fn, args):
        cuda = any(isinstance(a, torch.Tensor) and a.is_cuda for a in args)
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = fn(args)
        if cuda:
            torch.cuda.synchronize()
        self.latency_ms.setdefault(path, []).append((time.perf_counter() - t0) * 1e3)
        return out


class OpRuntime:
    """The serving table behind ``torch.ops.ke.*`` in this process."""

    def __init__(
        self, *, platform: str = "interpret", cache_dir: str | None = None, fast_launch=True
    ):
        self.platform = platform
        # Serve a signature by replaying its launches (``workers.runtime.fastlaunch``) once
        # recorded and verified; False: every call through the kernel module's forward.
        self.fast_launch = fast_launch
        # A folder of its own is removed with the runtime (or at exit): nothing outlives it.
        self._folder = None if cache_dir else tempfile.TemporaryDirectory(prefix="ke-ops-")
        self.cache_dir = cache_dir or self._folder.name
        self.routes: dict[str, list[RouteSpec]] = {}
        self.launchers: dict[tuple, Launcher] = {}
        self.last_error = ""
        self.latency_every = 0
        self.op_calls: dict[str, int] = {}  # per kind: calls that came through torch.ops.ke
        self.shadow_results: list[dict] = []  # local runtimes keep them; attached ones report
        self.shadow_dropped = 0
        self._modules = ModuleCache(self.cache_dir, "ke_op_")
        self._lock = threading.RLock()
        self._client = None
        self._client_routes = None
        self._shadow_queue: queue.Queue | None = None
        self._shadow_thread: threading.Thread | None = None
        self._shadow_launchers: dict[tuple, Callable] = {}

    # table ----------------------------------------------------------------------------------
    def serve(
        self,
        kind: str,
        *,
        source: str,
        problem_source: str | None = None,
        scope: dict | None = None,
        digest: str | None = None,
        operator: str | None = None,
        region: int | None = None,
        tolerance=None,
        stage: str = PATH_DEFAULT,
        canary_percent: float = 0.0,
        shadow_rate: float = 0.0,
        beats_compile: bool = False,
    ) -> RouteSpec:
        """Serve ``source`` (a module defining ``ModelNew``) for calls of ``kind`` in ``scope``
        at ``stage`` (default, canary or shadow); the problem defaults to the kind's contract.
        ``beats_compile``: keep the kernel under ``torch.compile`` (``RouteSpec``)."""
        if kind not in KINDS:
            raise KeyError(f"no operator kind {kind!r}; known: {', '.join(KINDS)}")
        spec = KernelSpec(digest or hashlib.sha256(source.encode()).hexdigest(), source, scope)
        route = RouteSpec(
            kind=kind,
            operator=operator or kind,
            region=region,
            scope=scope,
            problem_source=problem_source or KINDS[kind].problem_source(),
            tolerance=tolerance,
            beats_compile=beats_compile,
        )
        if stage == PATH_DEFAULT:
            route.default = spec
        elif stage == PATH_CANARY:
            route.canary, route.canary_percent = spec, canary_percent
        elif stage == "shadow":
            route.shadow, route.shadow_rate = spec, shadow_rate
        else:
            raise ValueError(f"stage {stage!r}: default, canary or shadow")
        with self._lock:
            self.routes.setdefault(kind, []).append(route)
            self.launchers = {}
        return route

    def clear(self) -> None:
        with self._lock:
            self.routes, self.launchers = {}, {}

    def kinds(self) -> set[str]:
        """Kinds with at least one region (a kernel at some stage)."""
        return {k for k, routes in self.routes.items() if routes}

    def beats_compile(self, kind: str) -> bool:
        """Whether a region of ``kind`` says its kernel beats ``torch.compile`` in a model."""
        return any(r.beats_compile for r in self.routes.get(kind) or ())

    def attach(self, client, *, operators: dict[str, str] | None = None) -> None:
        """Serve what ``client`` (a DispatchClient) serves: its regions become routes (operator
        names mapped to kinds by ``kind_of`` or ``operators``), its flush carries our counts."""
        self._client = client
        self._operators = dict(operators or {})
        self.platform = client.platform
        self.latency_every = CLIENT_LATENCY_EVERY
        self._sync()
        client.add_collector(self.collect)

    def _sync(self) -> None:
        client = self._client
        with self._lock:
            routes, manifest = client.routes, client.manifest
            table: dict[str, list[RouteSpec]] = {}
            operators = (manifest.body.get("operators") or {}) if manifest else {}
            for operator, client_routes in routes.items():
                kind = self._operators.get(operator) or kind_of(operator)
                problem = (operators.get(operator) or {}).get("problem_source")
                if kind is None or not problem:
                    continue
                for r in client_routes:
                    table.setdefault(kind, []).append(
                        RouteSpec(
                            kind=kind,
                            operator=operator,
                            region=r.region,
                            scope=r.scope,
                            problem_source=problem,
                            default=self._spec(manifest, r.default),
                            canary=self._spec(manifest, r.canary),
                            canary_percent=r.canary_percent,
                            shadow=self._spec(manifest, r.shadow),
                            shadow_rate=r.shadow_rate,
                            tolerance=(manifest.artifacts.get(r.shadow) or {}).get("tolerance")
                            if r.shadow
                            else None,
                            beats_compile=self._beats_compile(manifest, r),
                        )
                    )
            self.routes, self.launchers, self._client_routes = table, {}, routes

    @staticmethod
    def _beats_compile(manifest, route) -> bool:
        """A region keeps its kernel under ``torch.compile`` when every kernel that serves its
        calls (the default, and the canary beside it) beat compile in its campaign: the
        manifest's signed ``beats_compile`` of each artifact entry (absent in older manifests:
        False). No default: the calls no kernel takes run the reference, slower than compile."""
        if manifest is None or route.default is None:
            return False
        entries = manifest.body.get("artifacts") or {}
        serving = [d for d in (route.default, route.canary) if d is not None]
        return all((entries.get(d) or {}).get("beats_compile") is True for d in serving)

    @staticmethod
    def _spec(manifest, digest) -> KernelSpec | None:
        if digest is None:
            return None
        body = manifest.artifacts[digest]
        return KernelSpec(digest, body["source"], body.get("scope"))

    # the hot path ---------------------------------------------------------------------------
    def run(self, kind: str, args: tuple):
        if self._client is not None and self._client.routes is not self._client_routes:
            self._sync()
        key = signature_key(kind, args)
        launcher = self.launchers.get(key)
        if launcher is None:
            launcher = self._resolve(kind, key, args)
        return launcher(self, args)

    # resolution (once per signature) --------------------------------------------------------
    def _resolve(self, kind_name: str, key: tuple, args: tuple) -> Launcher:
        with self._lock:
            if key in self.launchers:
                return self.launchers[key]
            launcher = self._build(kind_name, args)
            launcher.latency_every = self.latency_every
            launcher.settle()
            self.launchers[key] = launcher
            return launcher

    def _build(self, kind_name: str, args: tuple) -> Launcher:
        kind = KINDS[kind_name]
        b = kind.bind(*args)
        shapes = [tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in b.inputs]
        dtype = _dtype_name(b.inputs)
        signature = f"{dtype} {[list(s) if s else s for s in shapes]}"
        fallback = Launcher(kind=kind_name, signature=signature, dtype=dtype, path=PATH_FALLBACK)
        fallback.serve = fallback.reference
        device = next(t.device for t in b.inputs if isinstance(t, torch.Tensor))
        routes = self.routes.get(kind_name) or []
        if not routes:
            fallback.reason = "no region serves this operator"
            return fallback
        if (self.platform == "cuda") != (device.type == "cuda"):
            fallback.reason = f"{device.type} tensors on a {self.platform} runtime"
            return fallback
        route = next(
            (r for r in routes if r.scope is None or S.matches(r.scope, dtype, shapes)), None
        )
        if route is None:
            fallback.reason = "outside every region's scope"
            return fallback
        fallback.region, fallback.operator = route.region, route.operator

        def admits(spec):
            return spec is not None and (spec.scope is None or S.matches(spec.scope, dtype, shapes))

        launcher = fallback
        launcher.tolerance = route.tolerance
        if admits(route.default):
            call, why = self._kernel_call(kind, route, route.default, b, args, device)
            if call is not None:
                launcher.serve, launcher.artifact, launcher.path = (
                    call,
                    route.default.digest,
                    (PATH_DEFAULT),
                )
            else:
                launcher.reason = why
        elif route.default is None:
            launcher.reason = "the region has no default kernel (reference serves)"
        else:
            launcher.reason = "outside the default kernel's scope"
        if admits(route.canary) and route.canary_percent > 0:
            call, why = self._kernel_call(kind, route, route.canary, b, args, device)
            if call is not None:
                launcher.canary, launcher.canary_artifact = call, route.canary.digest
                launcher.canary_percent = route.canary_percent
        if admits(route.shadow) and route.shadow_rate > 0:
            call, why = self._kernel_call(kind, route, route.shadow, b, args, device)
            if call is not None:
                launcher.shadow, launcher.shadow_artifact = call, route.shadow.digest
                launcher.shadow_every = max(1, round(1.0 / route.shadow_rate))
        return launcher

    def _module(self, key: str, source: str):
        return self._modules.get(key, source)

    def _kernel_call(
        self, kind: Kind, route: RouteSpec, spec: KernelSpec, b: Binding, args: tuple, device
    ):
        """(a _KernelCall, "") or (None, why this signature cannot use the kernel)."""
        from workers.contract import problem as P

        problem = self._module(
            "p" + hashlib.sha256(route.problem_source.encode()).hexdigest(), route.problem_source
        )
        sizes = {k: v for k, v in b.constants.items() if isinstance(v, int)}
        for name, value in b.constants.items():
            own = getattr(problem, name, None)
            if isinstance(value, float) and isinstance(own, float) and own != value:
                return None, f"{name} {value:g} differs from the region's contract ({own:g})"
        try:
            expected = P.input_shapes(problem, sizes)
        except Exception as exc:  # noqa: BLE001 - the problem does not take these constants
            return None, f"the region's problem cannot size this call: {exc}"
        got = [tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in b.inputs]
        if expected != got:
            return None, f"the region's problem takes inputs {expected} here, the call {got}"
        if cute_dsl.uses_cute(spec.backend) and not cute_dsl.available():
            return None, (
                f"the kernel is written for {C.BACKEND_LABELS[spec.backend]} and "
                "nvidia-cutlass-dsl is not installed here"
            )
        try:
            kernel = self._module("k" + spec.digest, spec.source)
            with P.constants(problem, sizes), torch.device(device):
                init = problem.get_init_inputs()
                torch.manual_seed(0)
                instance = kernel.ModelNew(*init)
            instance = instance.to(device).eval()
            owners = []
            for dotted in b.params:
                owner_name, _, name = dotted.rpartition(".")
                owner = instance.get_submodule(owner_name) if owner_name else instance
                if name not in owner._parameters:
                    return None, f"the kernel module has no parameter {dotted}"
                owners.append((owner, name))
            for name, value in b.constants.items():
                own = _float_attr(instance, name)
                if isinstance(value, float) and own is not None and own != value:
                    return None, f"{name} {value:g} differs from the kernel's ({own:g})"
        except Exception as exc:  # noqa: BLE001 - a kernel that cannot be built falls back
            return None, f"the kernel module could not be built: {type(exc).__name__}: {exc}"
        replay = self.fast_launch and self.platform == "cuda"
        return _KernelCall(kind, instance, owners, b, args, replay=replay), ""

    # shadow (off the hot path) --------------------------------------------------------------
    def shadow_submit(self, launcher: Launcher, args) -> None:
        if self._shadow_queue is None:
            with self._lock:
                if self._shadow_queue is None:
                    self._shadow_queue = queue.Queue(maxsize=SHADOW_QUEUE)
                    self._shadow_thread = threading.Thread(
                        target=self._shadow_loop, name="ke-ops-shadow", daemon=True
                    )
                    self._shadow_thread.start()
        copies = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)
        try:
            self._shadow_queue.put_nowait((launcher, copies))
        except queue.Full:
            self.shadow_dropped += 1

    def _shadow_loop(self) -> None:
        from workers.runtime.client import compare

        while True:
            launcher, args = self._shadow_queue.get()
            try:
                with torch.no_grad():
                    reference = launcher.reference(args)
                    try:
                        out = launcher.shadow(args)
                        mismatch = compare(out, reference, launcher.tolerance)
                    except Exception as exc:  # noqa: BLE001 - a failing shadow is a mismatch
                        mismatch = {"reason": f"raised {type(exc).__name__}: {exc}"}
                if mismatch is not None:
                    mismatch = {"case": f"{launcher.kind} {launcher.signature}", **mismatch}
                self._shadow_record(launcher, mismatch)
            finally:
                self._shadow_queue.task_done()

    def _shadow_record(self, launcher: Launcher, mismatch) -> None:
        if self._client is not None:
            self._client.metrics.shadow_sample(launcher.shadow_artifact, launcher.region, mismatch)
        else:
            self.shadow_results.append(
                {"artifact": launcher.shadow_artifact, "kind": launcher.kind, "mismatch": mismatch}
            )

    def shadow_wait(self) -> None:
        """Block until every queued shadow sample is compared (tests, the model check)."""
        if self._shadow_queue is not None:
            self._shadow_queue.join()

    # metrics and coverage -------------------------------------------------------------------
    def collect(self, metrics) -> None:
        """Move the counts since the last collection into a client's metric batch."""
        with self._lock:
            launchers = list(self.launchers.values())
        for ln in launchers:
            rows = (
                (ln.path, ln.artifact, ln.calls - ln.canary_calls, ln.errors),
                (PATH_CANARY, ln.canary_artifact, ln.canary_calls, 0),
            )
            for path, artifact, total, errors in rows:
                seen, seen_errors = ln.reported.get(path, (0, 0))
                latency = ln.latency_ms.pop(path, [])
                if total - seen <= 0 and not latency:
                    continue
                key = (ln.operator or ln.kind, ln.region, ln.dtype, path, artifact)
                metrics.add(key, total - seen, errors - seen_errors, latency)
                ln.reported[path] = (total, errors)

    def coverage(self) -> dict:
        """Per kind: calls, calls a kernel served, calls that came through ``torch.ops.ke``
        (``via_op``: compiled graphs, autograd; the rest took the lean eager route), and each
        signature's path (with why)."""
        out: dict[str, dict] = {}
        with self._lock:
            launchers = list(self.launchers.values())
        for ln in launchers:
            row = out.setdefault(
                ln.kind,
                {
                    "calls": 0,
                    "kernel_calls": 0,
                    "via_op": self.op_calls.get(ln.kind, 0),
                    "signatures": [],
                },
            )
            kernel = ln.canary_calls + (ln.calls - ln.canary_calls if ln.artifact else 0)
            row["calls"] += ln.calls
            row["kernel_calls"] += kernel
            row["signatures"].append(
                {
                    "signature": ln.signature,
                    "path": ln.path,
                    "region": ln.region,
                    "artifact": ln.artifact,
                    "canary": ln.canary_artifact,
                    "shadow": ln.shadow_artifact,
                    "calls": ln.calls,
                    "errors": ln.errors,
                    "failed": ln.failed,
                    "error": ln.error,
                    "reason": ln.reason,
                    "launch": _launch_route(ln.serve),
                }
            )
        return out

    def reset_counts(self) -> None:
        with self._lock:
            self.op_calls = {}
            for ln in self.launchers.values():
                ln.calls = ln.canary_calls = ln.errors = 0
                ln.reported = {}
                ln.latency_ms = {}


def _launch_route(serve) -> str:
    """How a signature's kernel is launched: by its launch replay, or through the kernel
    module (and why), or "reference" where no kernel serves it."""
    if not isinstance(serve, _KernelCall):
        return "reference"
    if serve.fast is not None:
        return "launch replay"
    if serve.fast_tries:
        return "kernel module (not yet recorded)"
    return f"kernel module ({serve.fast_reason})"


def _float_attr(module, name: str):
    """A float attribute ``name`` on ``module`` or one of its submodules (e.g. ``norm.eps``)."""
    for sub in module.modules():
        value = getattr(sub, name, None)
        if isinstance(value, float):
            return value
    return None


_CURRENT: list[OpRuntime] = [OpRuntime()]


def current() -> OpRuntime:
    """The runtime ``torch.ops.ke.*`` serve from in this process."""
    return _CURRENT[-1]


def install(runtime: OpRuntime) -> OpRuntime:
    """Make ``runtime`` the process's serving table (returns the one it replaces)."""
    previous = _CURRENT[-1]
    _CURRENT[-1] = runtime
    return previous


@contextlib.contextmanager
def using(runtime: OpRuntime):
    """Serve from ``runtime`` inside the block (the model check, tests)."""
    _CURRENT.append(runtime)
    try:
        yield runtime
    finally:
        _CURRENT.pop()
