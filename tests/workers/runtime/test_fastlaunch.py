"""The launch replay (issue 14): a kernel module's call for one signature, served by its
allocations and Triton launches alone. On this machine the kernels are real ``triton.jit``
functions whose launcher is a CPU stand-in for the GPU's (it computes what the kernel would,
from the arguments the launcher gets): what is tested is what the replay records, refuses and
passes, which decides whether a patched model computes the right thing."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

from torch.utils._python_dispatch import _disable_current_modes  # noqa: E402
from triton.runtime.jit import JITFunction  # noqa: E402

from workers.runtime import fastlaunch, ops  # noqa: E402


def _scale_rows_fn(
    x_ptr, w_ptr, out_ptr, M, N, stride, SCALE: tl.constexpr, BLOCK: tl.constexpr = 64
):
    pass


# A JITFunction as on a GPU host (the tests run with TRITON_INTERPRET, where ``triton.jit``
# would give the interpreter's function, which never goes through JITFunction.run).
_scale_rows = JITFunction(_scale_rows_fn)


class _Compiled:
    """What Triton's JIT returns for a launch: ``run`` is the launcher, called as
    ``run(g0, g1, g2, stream, function, metadata, launch_metadata, enter, exit, *args)``."""

    function = "fn"
    packed_metadata = "meta"

    def __init__(self, calls: list):
        self.calls = calls

    def run(self, g0, g1, g2, stream, function, metadata, lm, enter, exit_, *args):
        x, w, out, m, n, stride, scale, block = args
        assert block == 64 and (g0, g1, g2) == (m, 1, 1)
        self.calls.append(stream)
        with _disable_current_modes():  # a GPU kernel is no PyTorch operation
            out.copy_((x.reshape(m, n) * w * scale).reshape(out.shape))


@pytest.fixture
def launcher(monkeypatch):
    """JITFunction.run as a GPU would do it, on CPU tensors (and counting launches)."""
    calls: list = []
    compiled = _Compiled(calls)

    def run(self, *args, grid, warmup, **kwargs):
        bound = dict(zip(["x_ptr", "w_ptr", "out_ptr", "M", "N", "stride"], args, strict=False))
        g = grid(bound) if callable(grid) else grid
        compiled.run(g[0], 1, 1, None, None, None, None, None, None, *args, kwargs["SCALE"], 64)
        return compiled

    monkeypatch.setattr(JITFunction, "run", run)
    monkeypatch.setattr(fastlaunch, "_driver_stream", lambda: _stream)  # no GPU driver here
    return calls


class Scale(torch.nn.Module):
    """A template-like wrapper: views, an allocation, one launch, the caller's shape back."""

    def __init__(self, extra=None):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(8))
        self.extra = extra
        self.forwards = 0

    def forward(self, x):
        self.forwards += 1
        m, n = x.numel() // x.shape[-1], x.shape[-1]
        x2 = x.reshape(m, n)
        if self.extra == "contiguous":
            x2 = x2.t().contiguous().t()  # a copy: the call is more than its launch
        out = torch.empty((m, n), dtype=x.dtype, device=x.device)
        _scale_rows[(m,)](x2, self.weight, out, m, n, x2.stride(0), SCALE=2.0)
        if self.extra == "sum":
            return out.sum()
        return out.reshape(x.shape)


def _call(module):
    def call(args):
        (x, w) = args
        module._parameters["weight"] = w  # as the runtime binds a caller's parameter
        return module(x)

    return call


def _stream(device):
    return "stream"


def test_a_recorded_call_is_replayed_without_its_module(launcher):
    module = Scale()
    x, w = torch.randn(3, 1, 8), torch.randn(8)
    out, replay = fastlaunch.record(_call(module), (x, w), stream=_stream)
    assert torch.equal(out, x * w * 2)
    assert fastlaunch.verified(_call(module), (x, w), replay) == ""
    before = module.forwards
    y, v = torch.randn(3, 1, 8), torch.randn(8)
    got = replay((y, v))
    assert module.forwards == before  # no Python wrapper ran
    assert got.shape == (3, 1, 8) and torch.equal(got, y * v * 2)
    assert replay((y, v)).data_ptr() != got.data_ptr()  # a fresh output for every call
    assert launcher[-1] == "stream"


def test_a_strided_slice_is_replayed_on_its_own_layout(launcher):
    """A KV cache's ``cache[:, :end]`` is read through its strides: the replay is checked on
    copies that keep them (a clone would be dense, a layout the replay never serves)."""
    module = Scale()
    x, w = torch.randn(3, 12)[:, :8], torch.randn(8)
    out, replay = fastlaunch.record(_call(module), (x, w), stream=_stream)
    seen = []

    def call(args):
        seen.append(args[0].stride())
        return _call(module)(args)

    assert fastlaunch.verified(call, (x, w), replay) == ""
    assert seen == [(12, 1)]  # checked on the layout it serves
    y = torch.randn(3, 12)[:, :8]
    before = module.forwards
    assert torch.equal(replay((y, w)), y * w * 2) and module.forwards == before


def test_a_call_that_computes_besides_its_launches_is_not_replayed(launcher):
    x, w = torch.randn(4, 8), torch.randn(8)
    for extra, words in (("sum", "aten.sum"), ("contiguous", "aten.")):
        with pytest.raises(fastlaunch.Refused, match="besides its launches") as err:
            fastlaunch.record(_call(Scale(extra)), (x, w), stream=_stream)
        assert words in str(err.value)
        assert err.value.output is not None  # the call was served all the same


def test_a_call_without_launches_and_aliased_arguments_are_refused(launcher):
    class Torch(torch.nn.Module):
        def forward(self, x):
            return torch.empty_like(x)

    with pytest.raises(fastlaunch.Refused, match="no Triton launch"):
        fastlaunch.record(lambda a: Torch()(a[0]), (torch.randn(2, 8),), stream=_stream)
    x = torch.randn(8, 8)
    with pytest.raises(fastlaunch.Refused, match="share memory") as err:
        fastlaunch.record(_call(Scale()), (x, x[0]), stream=_stream)
    assert err.value.retry  # another call of the signature may not alias


def test_other_strides_or_alignment_take_the_module_path(launcher):
    x, w = torch.randn(4, 8), torch.randn(8)
    _, replay = fastlaunch.record(_call(Scale()), (x, w), stream=_stream)
    assert replay.admits((torch.randn(4, 8), torch.randn(8)))
    assert not replay.admits((torch.randn(8, 4).t(), w))  # same shape, other strides
    odd = torch.randn(4 * 8 + 1)[1:].view(4, 8)  # same strides, pointer off by 4 bytes
    assert not replay.admits((odd, w))


def test_the_runtime_serves_a_signature_by_its_replay_after_the_first_call(launcher):
    class Softmaxish(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Scale()
            self.forwards = 0

        def forward(self, x):
            self.forwards += 1
            return self.inner(x)

    kind = ops.KINDS["softmax"]
    x = torch.randn(2, 3, 8)
    module = Softmaxish()
    call = ops._KernelCall(kind, module, [], kind.bind(x), (x,), replay=True)
    call.fast_tries = 1
    first = call((x,))
    assert call.fast is not None, call.fast_reason
    assert ops._launch_route(call) == "launch replay"
    n = module.forwards
    second = call((x,))
    assert module.forwards == n and torch.equal(first, second)
    other = torch.randn(8, 3, 2).permute(2, 1, 0)  # same shape, other strides: the module
    assert torch.equal(call((other,)), other * module.inner.weight * 2)
    assert module.forwards == n + 1
    off = ops._KernelCall(kind, Softmaxish(), [], kind.bind(x), (x,), replay=False)
    off((x,))
    assert ops._launch_route(off) == "kernel module (not on a GPU runtime)"


def test_queries_that_make_no_tensor_are_not_computations(launcher):
    """A wrapper that works out its output dtype (``torch.promote_types``, as the templates do)
    is still only its launches."""

    class Promoting(Scale):
        def forward(self, x):
            torch.promote_types(x.dtype, self.weight.dtype)
            return super().forward(x)

    x, w = torch.randn(4, 8), torch.randn(8)
    out, replay = fastlaunch.record(_call(Promoting()), (x, w), stream=_stream)
    assert torch.equal(replay((x, w)), out)


def test_a_replay_that_cannot_be_checked_is_not_used_and_the_kernel_still_serves(
    launcher, monkeypatch
):
    """Checking a replay runs the call twice more on copies; where that fails (no memory for
    the copies, say) the signature keeps the module's path, not the reference."""

    def no_memory(call, args, replay):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(fastlaunch, "verified", no_memory)
    kind = ops.KINDS["softmax"]
    x = torch.randn(2, 8)
    module = Scale()
    call = ops._KernelCall(kind, module, [], kind.bind(x), (x,), replay=True)
    out = call((x,))
    assert torch.equal(out, x * module.weight * 2)
    assert call.fast is None and "could not be checked: OutOfMemoryError" in call.fast_reason
    assert call((x,)) is not None and call.fast_tries == 0
