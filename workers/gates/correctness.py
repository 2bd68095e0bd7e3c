"""Gate 3 — correctness (runs in the sandbox child).

For every workload case and edge case, several seeded trials with fresh inputs. Each trial runs
the candidate twice on the same inputs, the first time with fresh allocations poisoned with NaN
(int max), the second with a finite sentinel (int min): an element still holding the poison both
times was never written, and two runs that differ are a race. Inputs must come back unmodified,
no output may alias an input, shapes and dtypes must match the reference's, NaN/inf must match
the reference's, and values must meet the contract's tolerance (bitwise for ``exact``) against
the reference computed in higher precision for reduced dtypes. On the first trial the inputs are
also refreshed in place and the candidate rerun, which catches results cached by address.
Every run records torch ops: torch compute outside a Triton kernel, on any case, rejects.
"""

from __future__ import annotations

import contextlib
import time

import torch

from workers import constants as C
from workers import cute_dsl
from workers.contract import problem as P
from workers.instrument import OpCensus, TorchOpMode, _sentinel

REDUCED = (torch.float16, torch.bfloat16)


class CaseFailure(Exception):
    def __init__(self, rule: str, reason: str, **evidence):
        super().__init__(reason)
        self.rule = rule
        self.reason = reason
        self.evidence = evidence


class CaseSkip(Exception):
    pass


def _tensors(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        flat = []
        for o in out:
            flat.extend(_tensors(o))
        return flat
    return []


@contextlib.contextmanager
def _ieee_convolutions():
    """The reference's float32 convolutions in IEEE products, as its matrix products are
    (cuDNN takes TF32 by default, about 1e-3 off: every correct float32 convolution would miss
    the contract's 1e-4 against it). Timing leaves the user's default alone."""
    cudnn = torch.backends.cudnn
    before = cudnn.allow_tf32
    cudnn.allow_tf32 = False
    try:
        yield
    finally:
        cudnn.allow_tf32 = before


def _max_finite(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest finite |a - b|, in flat chunks (float64 temporaries of bounded size)."""
    flat_a, flat_b, worst = a.reshape(-1), b.reshape(-1), 0.0
    for start in range(0, flat_a.numel(), C.COMPARE_CHUNK):
        part = slice(start, start + C.COMPARE_CHUNK)
        d = (flat_a[part].double() - flat_b[part].double()).abs()
        d = d[torch.isfinite(d)]
        worst = max(worst, float(d.max()) if d.numel() else 0.0)
    return worst


def _rounded_once(inputs: list) -> list:
    """``inputs`` with every floating element moved by one relative rounding of its dtype up,
    down or not at all (a fixed pattern)."""
    out = []
    for t in inputs:
        if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel():
            sign = torch.arange(t.numel(), device=t.device).reshape(t.shape) % 3 - 1
            t = t * (1.0 + torch.finfo(t.dtype).eps * sign.to(t.dtype))
        out.append(t)
    return out


def _equal_nan(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        same = (a == b) | (torch.isnan(a) & torch.isnan(b))
        return bool(same.all())
    return torch.equal(a, b)


def _storages(tensors) -> set:
    ptrs = set()
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.numel():
            ptrs.add(t.untyped_storage().data_ptr())
    return ptrs


class CaseChecker:
    def __init__(self, job, case: dict, args: dict, index: int):
        self.job = job
        self.case = case
        self.args = args
        self.device = job.device
        self.dtype = P.DTYPES.get(case["dtype"]) if case.get("dtype") else None
        self.seed = int(args.get("seed", 0))
        self.index = index
        tol = args.get("tolerance")
        self.exact = tol == C.EXACT
        self.tolerance = tol if isinstance(tol, dict) else dict(C.DEFAULT_TOLERANCE)
        self.deterministic = args.get("deterministic", True)
        self.recorder = job.state.recorder
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.expected = None
        self.previous_out = None
        self.initial: dict = {}  # id(model) -> its buffers as built (see build)
        self.ref_state = None

    # models and runs ---------------------------------------------------------------------
    def build(self, candidate: bool = True):
        """The reference models (a higher-precision one where the case has it) and, with
        ``candidate``, the candidate's model."""
        high_dtype = None
        if self.device == "cpu":
            high_dtype = torch.float64
        elif self.dtype in REDUCED:
            high_dtype = torch.float32
        try:
            high, ref, _ = P.make_models(
                self.job.problem,
                None,
                self.case["overrides"],
                self.dtype,
                self.seed,
                self.device,
                high_dtype,
                train=self.job.train,
            )
        except Exception as exc:  # noqa: BLE001 - the reference rejects this case
            raise CaseSkip(
                f"reference model rejects this case: {type(exc).__name__}: {exc}"
            ) from exc
        cand = self._candidate_model() if candidate else None
        self.high, self.ref, self.cand = high, ref, cand
        # Each model's buffers as built (the reference's own and the candidate's copy of them):
        # every call starts from them, so a forward that updates state in place (BatchNorm's
        # running statistics in training mode) sees the same state however often it runs.
        self.initial = {
            id(m): {k: b.detach().clone() for k, b in m.named_buffers()}
            for m in (high, ref, cand)
            if m is not None
        }

    def _candidate_model(self):
        try:
            _, _, cand = P.make_models(
                self.job.problem,
                self.job.candidate,
                self.case["overrides"],
                self.dtype,
                self.seed,
                self.device,
                None,
                train=self.job.train,
            )
        except Exception as exc:  # noqa: BLE001
            raise CaseFailure(
                C.RULE_RUNTIME, f"ModelNew() failed: {type(exc).__name__}: {exc}"
            ) from exc
        return cand

    def _reset(self, model) -> None:
        with torch.no_grad():
            for k, b in model.named_buffers():
                start = self.initial.get(id(model), {}).get(k)
                if start is not None and start.shape == b.shape:
                    b.copy_(start)

    def _state(self, model) -> dict:
        """The buffers the last call changed: name -> (value after, value before)."""
        start = self.initial.get(id(model), {})
        return {
            k: (b.detach().clone(), start[k])
            for k, b in model.named_buffers()
            if k in start and not _equal_nan(b.detach(), start[k].to(b.dtype))
        }

    def inputs(self, seed):
        return P.make_inputs(
            self.job.problem,
            self.case["overrides"],
            self.dtype,
            seed,
            self.device,
            self.case.get("transform"),
        )

    def _sync(self):
        if self.device == "cuda":
            torch.cuda.synchronize()

    def reference(self, inputs):
        model = self.high if (self.high is not None and not self.exact) else self.ref
        dtype = next((p.dtype for p in model.parameters()), None) if model is self.high else None
        if model is self.high:
            dtype = torch.float64 if self.device == "cpu" else torch.float32
            args = [
                t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                for t in inputs
            ]
        else:
            args = inputs
        self._reset(model)
        try:
            with torch.no_grad(), _ieee_convolutions():
                out = [t.detach().clone() for t in _tensors(model(*args))]
        except Exception as exc:  # noqa: BLE001
            raise CaseSkip(f"reference rejects this case: {type(exc).__name__}: {exc}") from exc
        self._sync()
        self.ref_state = self._state(model)
        return out

    def expected_layout(self, inputs):
        if self.expected is None:
            if self.high is None or self.exact:
                outs = self.reference(inputs)
            else:
                try:
                    with torch.no_grad():
                        outs = _tensors(self.ref(*inputs))
                except Exception:  # noqa: BLE001 - some CPU ops lack reduced-dtype kernels
                    outs = [
                        o.to(self.dtype) if o.is_floating_point() else o
                        for o in self.reference(inputs)
                    ]
            self.expected = [(tuple(o.shape), o.dtype) for o in outs]
        return self.expected

    def candidate(self, inputs, poison: int):
        mode = TorchOpMode(self.recorder, poison_variant=poison)
        census = OpCensus(self.recorder)
        self._reset(self.cand)
        try:
            with census, torch.no_grad(), mode, mode.host_reads():
                out = self.cand(*inputs)
            self._sync()
        except Exception as exc:  # noqa: BLE001
            raise CaseFailure(
                C.RULE_RUNTIME, f"forward raised {type(exc).__name__}: {str(exc)[:400]}"
            ) from exc
        if mode.compute_ops:
            # The compile gate checks the workload cases once; a fallback behind a guard that
            # only an edge case or a later trial takes shows here.
            ops = ", ".join(f"{k} x{v}" for k, v in sorted(mode.compute_ops.items()))
            raise CaseFailure(
                C.RULE_TORCH_COMPUTE,
                f"forward runs torch compute ops outside Triton kernels ({ops})",
                ops=dict(mode.compute_ops),
            )
        hidden = census.missed(mode.compute_ops)
        if hidden:
            raise CaseFailure(C.RULE_INSTRUMENTATION_ESCAPE, hidden)
        outs = _tensors(out)
        _check_plain(outs)
        return outs, out

    # checks ------------------------------------------------------------------------------
    def check_layout(self, outs, inputs):
        _check_plain(outs)
        expected = self.expected_layout(inputs)
        if len(outs) != len(expected):
            raise CaseFailure(
                C.RULE_SHAPE, f"returned {len(outs)} tensor(s), expected {len(expected)}"
            )
        for i, (o, (shape, dtype)) in enumerate(zip(outs, expected, strict=True)):
            if tuple(o.shape) != shape:
                raise CaseFailure(
                    C.RULE_SHAPE, f"output {i} has shape {tuple(o.shape)}, expected {shape}"
                )
            if o.dtype != dtype:
                raise CaseFailure(C.RULE_DTYPE, f"output {i} has dtype {o.dtype}, expected {dtype}")
            if o.device.type != torch.device(self.device).type:
                raise CaseFailure(
                    C.RULE_SHAPE, f"output {i} is on {o.device}, expected {self.device}"
                )

    def check_state(self, ref_state: dict, label: str) -> None:
        """The buffers the candidate's forward left, against the reference's: each one the
        reference updates must be updated to within the outputs' tolerance (an integer counter
        exactly), and none it leaves alone may change."""
        cand_state = self._state(self.cand)
        for name in sorted(set(ref_state) | set(cand_state)):
            if name not in cand_state:
                raise CaseFailure(
                    C.RULE_STATE,
                    f"buffer {name} is left as it was; the reference's forward updates it "
                    f"({label})",
                )
            if name not in ref_state:
                raise CaseFailure(
                    C.RULE_STATE,
                    f"buffer {name} is changed by the forward; the reference leaves it ({label})",
                )
            after, _ = cand_state[name]
            try:
                self.compare([after], [ref_state[name][0]], label)
            except CaseFailure as exc:
                said = exc.reason.removeprefix("output 0: ").removeprefix("output 0 ")
                raise CaseFailure(
                    C.RULE_STATE, f"buffer {name} after the forward: {said}", **exc.evidence
                ) from exc

    def own_error(self, inputs, refs) -> list[float]:
        """What a correct kernel may be off by on this edge case: with large magnitudes,
        cancellation makes even the reference miss a fixed tolerance, so a candidate is allowed
        twice the larger of torch's own worst error in the case dtype (against the
        high-precision reference) and the backward error: how far the reference itself moves
        when every input moves by one rounding of its dtype. A kernel that sums in another order
        than torch (a split reduction, a dot in blocks) is about that far off where the terms
        cancel; on a GPU a float32 case has no higher-precision reference, so this is its bar."""
        errs = [0.0] * len(refs)
        if self.exact:
            return errs
        if self.high is not None:
            try:
                with torch.no_grad():
                    low = _tensors(self.ref(*inputs))
            except Exception:  # noqa: BLE001 - no kernel for this dtype on this device
                low = []
            for k, (lo, r) in enumerate(zip(low, refs, strict=False)):
                errs[k] = _max_finite(lo, r)
        moved = self.reference(_rounded_once(inputs))
        for k, (m, r) in enumerate(zip(moved, refs, strict=False)):
            if m.is_floating_point() and m.shape == r.shape:
                errs[k] = max(errs[k], _max_finite(m, r))
        return errs

    def own_dtype_outputs(self, inputs) -> list | None:
        """The reference's outputs computed in the case's own dtype (torch's answer as a user
        runs it), where the comparison is against a higher-precision reference; else None.

        An element may match either. Where a function jumps (a rounding in a quantiser, a
        floor, a comparison), an input within one rounding of the jump lands on either side:
        the float64 reference of a float32 case and torch's own float32 disagree there by a
        whole step, and a kernel that computes exactly what torch computes must not fail for
        it (an int8 absmax quantiser: 2 of 1M elements one step from the float64 answer)."""
        if self.high is None or self.exact:
            return None
        self._reset(self.ref)
        try:
            with torch.no_grad(), _ieee_convolutions():
                return [t.detach().clone() for t in _tensors(self.ref(*inputs))]
        except Exception:  # noqa: BLE001 - no kernel for this dtype on this device
            return None

    def compare_outputs(self, outs, refs, inputs, label: str, allowance=None) -> None:
        """:meth:`compare`; a mismatch is judged again element by element against either
        reference (:meth:`own_dtype_outputs`) before it fails the case."""
        try:
            self.compare(outs, refs, label, allowance)
        except CaseFailure as exc:
            own = self.own_dtype_outputs(inputs) if exc.rule == C.RULE_MISMATCH else None
            if own is None:
                raise
            self.compare(outs, refs, label, allowance, also=own)

    def compare(self, outs, refs, label: str, allowance=None, also=None):
        """Each output against its reference; with ``also`` (:meth:`own_dtype_outputs`), an
        element within tolerance of either passes."""
        also = also or [None] * len(refs)
        for i, (o, r, a) in enumerate(zip(outs, refs, also, strict=True)):
            if o.numel() == 0:
                continue
            if self.exact or not o.is_floating_point():
                r_cast = r.to(o.dtype)
                if not _equal_nan(o, r_cast):
                    diff = (o.double() - r_cast.double()).abs()
                    diff = torch.nan_to_num(diff, nan=float("inf"))
                    raise CaseFailure(
                        C.RULE_MISMATCH,
                        f"output {i} differs bitwise from the reference ({label}); "
                        f"max abs diff {float(diff.max()):.3g}",
                        index=_first_index(diff > 0),
                    )
                continue
            tol = self.tolerance.get(str(o.dtype).replace("torch.", ""), {"atol": 0, "rtol": 0})
            if tol == C.EXACT:
                tol = {"atol": 0.0, "rtol": 0.0}
            extra = 2.0 * allowance[i] if allowance else 0.0
            if a is not None and (a.shape != o.shape or not a.is_floating_point()):
                a = None
            self._compare_float(i, o, r, tol, extra, label, a)

    def _compare_float(self, i: int, o, r, tol: dict, extra: float, label: str, alt=None) -> None:
        """Output ``i`` against its reference within ``tol`` (+ ``extra``), in flat chunks of
        ``C.COMPARE_CHUNK`` elements: the float64 temporaries stay near a GB whatever the
        output's size (a 4 GiB float32 output compared whole took 48 GB and ran an 80 GB card
        out of memory). Counts, the first bad index and the worst errors are the whole
        output's."""
        shape = o.shape
        flat_o, flat_r = o.reshape(-1), torch.broadcast_to(r, shape).reshape(-1)
        flat_a = alt.reshape(-1) if alt is not None else None
        counts = {"nan": 0, "inf": 0, "bad": 0}
        first: dict[str, int] = {}
        max_abs = max_rel = 0.0
        for start in range(0, flat_o.numel(), C.COMPARE_CHUNK):
            part = slice(start, start + C.COMPARE_CHUNK)
            chunk_o, chunk_r = flat_o[part], flat_r[part]
            c, ref = chunk_o.double(), chunk_r.double()
            c_nan, r_nan = torch.isnan(c), torch.isnan(ref)
            # Where the output's dtype can hold it: a reference value beyond that dtype's range
            # (a float64 reference of an fp32 product that overflows) is inf there, as a
            # correctly rounded output is.
            ref_out = chunk_r.to(o.dtype).double()
            c_inf, r_inf = torch.isinf(c), torch.isinf(ref_out)
            finite = torch.isfinite(ref) & torch.isfinite(c)
            diff = torch.where(finite, (c - ref).abs(), torch.zeros_like(c))
            rel = diff / torch.clamp(ref.abs(), min=max(tol["atol"], 1e-30))
            masks = {
                "nan": c_nan & ~r_nan,
                "inf": (c_inf | r_inf | r_nan) & ~((c == ref_out) | (c_nan & r_nan)),
                "bad": diff > tol["atol"] + tol["rtol"] * ref.abs() + extra,
            }
            if flat_a is not None:  # torch's own answer in the case dtype, element by element
                own = flat_a[part].double()
                near = (c - own).abs() <= tol["atol"] + tol["rtol"] * own.abs() + extra
                masks["bad"] &= ~(near & torch.isfinite(own))
                del own, near
            for key, mask in masks.items():
                count = int(mask.sum())
                if count and key not in first:
                    first[key] = start + int(torch.nonzero(mask)[0])
                counts[key] += count
            max_abs = max(max_abs, float(diff.max()))
            max_rel = max(max_rel, float(rel.max()))
            del c, ref, c_nan, r_nan, ref_out, c_inf, r_inf, finite, diff, rel, masks

        def index(key: str) -> list[int]:
            return [int(k) for k in torch.unravel_index(torch.tensor(first[key]), shape)]

        if counts["nan"]:
            raise CaseFailure(
                C.RULE_NAN,
                f"output {i} has {counts['nan']} NaN where the reference has none ({label})",
                index=index("nan"),
            )
        if counts["inf"]:
            raise CaseFailure(
                C.RULE_NONFINITE,
                f"output {i}: {counts['inf']} inf/NaN position(s) differ from the "
                f"reference ({label})",
                index=index("inf"),
            )
        self.max_abs = max(self.max_abs, max_abs)
        self.max_rel = max(self.max_rel, max_rel)
        if counts["bad"]:
            both = (
                " of both references (higher precision and the case dtype)"
                if alt is not None
                else ""
            )
            raise CaseFailure(
                C.RULE_MISMATCH,
                f"output {i}: {counts['bad']} of {o.numel()} elements outside "
                f"atol={tol['atol']:g} rtol={tol['rtol']:g}{both} ({label}); max abs err "
                f"{max_abs:.3g}",
                index=index("bad"),
                max_abs_err=max_abs,
            )

    def trial(self, t: int):
        seed = self.seed * 1_000_003 + self.index * 7919 + t
        inputs = self.inputs(seed)
        originals = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
        # The candidate runs before the reference: no answer to these inputs exists in the
        # process while it runs (one that walks the frames above it finds none to copy).
        out_a, _ = self.candidate(inputs, poison=0)
        if _storages(out_a) & _storages(inputs):
            raise CaseFailure(C.RULE_ALIASING, "an output shares memory with an input")
        _check_unchanged(inputs, originals)
        out_a = [o.clone() for o in out_a]
        out_b, _ = self.candidate(inputs, poison=1)  # its buffers: one call's, as after out_a
        out_b = [o.clone() for o in out_b]
        _check_unchanged(inputs, originals)
        refs = self.reference(inputs)
        ref_state = self.ref_state
        if self.case.get("transform") == "inf" and any(
            bool(torch.isnan(r).any()) for r in refs if r.is_floating_point()
        ):
            raise CaseSkip("the reference is undefined (NaN) for infinite inputs")
        self.check_layout(out_a, inputs)
        if ref_state or self._state(self.cand):
            self.check_state(ref_state, f"trial {t}")
        for i, (a, b) in enumerate(zip(out_a, out_b, strict=True)):
            s0, s1 = _sentinel(a.dtype, 0), _sentinel(a.dtype, 1)
            if s0 is None or a.numel() == 0:
                continue
            first = torch.isnan(a) if a.is_floating_point() else a == s0
            unwritten = first & (b == torch.tensor(s1, dtype=b.dtype, device=b.device))
            if bool(unwritten.any()):
                raise CaseFailure(
                    C.RULE_UNWRITTEN,
                    f"output {i}: {int(unwritten.sum())} of {a.numel()} elements never written",
                    index=_first_index(unwritten),
                )
        for i, (a, b) in enumerate(zip(out_a, out_b, strict=True)):
            if self.deterministic and not _equal_nan(a, b):
                diff = torch.nan_to_num((a.double() - b.double()).abs(), nan=float("inf"))
                raise CaseFailure(
                    C.RULE_NONDETERMINISTIC,
                    f"output {i} differs between two runs on the same inputs "
                    f"(max diff {float(diff.max()):.3g}): a race or randomness",
                    index=_first_index(diff > 0),
                )
        allowance = None
        if self.case.get("transform") == "large":
            allowance = self.own_error(inputs, refs)
        try:
            self.compare_outputs(out_a, refs, inputs, f"trial {t}", allowance)
        except CaseFailure as exc:
            if self.previous_out is not None and all(
                _equal_nan(a, p) for a, p in zip(out_a, self.previous_out, strict=False)
            ):
                raise CaseFailure(
                    C.RULE_STALE, "returned the previous trial's result for new inputs"
                ) from exc
            raise
        self.previous_out = out_a
        if t == 0 and self.case["kind"] == C.CASE_WORKLOAD:
            fresh = self.inputs(seed + 500_009)
            with torch.no_grad():
                for dst, src in zip(inputs, fresh, strict=True):
                    if isinstance(dst, torch.Tensor) and dst.is_floating_point():
                        dst.copy_(src)
            refreshed = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
            out_c, _ = self.candidate(inputs, poison=0)
            out_c = [o.clone() for o in out_c]
            _check_unchanged(inputs, refreshed)
            refs2 = self.reference(inputs)
            try:
                self.compare_outputs(out_c, refs2, inputs, "inputs refreshed in place")
            except CaseFailure as exc:
                if all(_equal_nan(c, a) for c, a in zip(out_c, out_a, strict=True)):
                    raise CaseFailure(
                        C.RULE_STALE,
                        "returned the same result after the inputs changed in place "
                        "(result cached across calls)",
                    ) from exc
                raise


def _check_unchanged(inputs, originals) -> None:
    for i, (now, before) in enumerate(zip(inputs, originals, strict=True)):
        if isinstance(now, torch.Tensor) and not _equal_nan(now, before):
            raise CaseFailure(C.RULE_INPUT_MUTATED, f"input {i} was modified by the forward")


def _check_plain(outs) -> None:
    """Every output a plain tensor: a subclass decides what each torch function returns for it,
    the gates' comparisons included, and could compute the answer there, outside the forward
    and its timing."""
    for i, o in enumerate(outs):
        if type(o) is not torch.Tensor:
            raise CaseFailure(
                C.RULE_TENSOR_SUBCLASS,
                f"output {i} is a {type(o).__module__}.{type(o).__qualname__}, a subclass of "
                "torch.Tensor; a kernel's outputs are plain tensors",
            )


def _first_index(mask: torch.Tensor):
    idx = torch.nonzero(mask.reshape(mask.shape) if mask.dim() else mask.reshape(1))
    return idx[0].tolist() if len(idx) else None


def check_case(job, case: dict, args: dict, index: int) -> dict:
    start = time.perf_counter()
    record = {
        "name": case["name"],
        "kind": case["kind"],
        "weight": case["weight"],
        "dtype": case.get("dtype"),
        "overrides": case["overrides"],
        "status": C.PASSED,
        "skip_reason": None,
        "rule": None,
        "reason": None,
        "max_abs_err": None,
        "max_rel_err": None,
        "trials": 0,
    }
    if case.get("scaled_for_interpreter"):
        record["scaled_for_interpreter"] = case["scaled_for_interpreter"]
    if case.get("transform"):
        record["transform"] = case["transform"]
    checker = CaseChecker(job, case, args, index)
    trials = int(args.get("trials", C.DEFAULT_TRIALS))
    if case["kind"] == C.CASE_EDGE:
        trials = min(trials, C.EDGE_TRIALS)
    try:
        checker.build()
        for t in range(trials):
            checker.trial(t)
            record["trials"] = t + 1
    except CaseSkip as exc:
        record["status"] = C.SKIPPED
        record["skip_reason"] = str(exc)[:500]
    except CaseFailure as exc:
        record["status"] = C.FAILED
        record["rule"] = exc.rule
        record["reason"] = exc.reason
        record["evidence"] = {k: v for k, v in exc.evidence.items() if v is not None}
    record["max_abs_err"] = checker.max_abs
    record["max_rel_err"] = checker.max_rel
    record["wall_s"] = time.perf_counter() - start
    return record


def run(job, args: dict) -> dict:
    if cute_dsl.uses_cute(job.backend) and job.device != "cuda":
        # Nothing runs a CuTe kernel without a GPU (no interpreter): compiled, not verified.
        return {
            "status": C.FAILED,
            "rule": C.RULE_NEEDS_GPU,
            "reason": "a CuTe DSL kernel has no CPU interpreter: it compiled for "
            f"{cute_dsl.arch_name(job.state.cute.arch)}, and its correctness and timing need "
            "the cuda platform",
            "cases": [],
        }
    records = []
    failed = None
    for index, case in enumerate(job.cases):
        if failed is not None:
            records.append(
                {
                    "name": case["name"],
                    "kind": case["kind"],
                    "weight": case["weight"],
                    "status": C.SKIPPED,
                    "skip_reason": f"not run: case {failed['name']} failed",
                }
            )
            continue
        record = check_case(job, case, args, index)
        records.append(record)
        if record["status"] == C.FAILED:
            failed = record
    if failed is not None:
        return {
            "status": C.FAILED,
            "rule": failed["rule"],
            "reason": f"case {failed['name']}: {failed['reason']}",
            "cases": records,
            "evidence": {"case": failed["name"], **failed.get("evidence", {})},
        }
    passed = sum(r["status"] == C.PASSED for r in records)
    skipped = sum(r["status"] == C.SKIPPED for r in records)
    worst = max((r["max_abs_err"] or 0.0 for r in records), default=0.0)
    return {
        "status": C.PASSED,
        "rule": None,
        "reason": f"{passed} case(s) passed, {skipped} skipped; max abs err {worst:.3g}",
        "cases": records,
        "evidence": {"trials": int(args.get("trials", C.DEFAULT_TRIALS))},
    }
