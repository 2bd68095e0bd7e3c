"""Gate 1 — static checks on the candidate's source (AST only; nothing is executed).

Each finding names its rule (``workers.constants.RULE_*``) and line. The checks look for what a
kernel must have (``ModelNew``, ``@triton.jit`` functions that are launched) and for ways to
cheat the measurement: calling the reference, catching a failure and falling back, threads,
side streams, patching timers or torch, dynamic code, starting processes.

A torch compute call outside a kernel (``torch.relu``, ``F.silu``, ``x.softmax()``, ``@``) is a
warning, not a rejection: the source cannot tell a fallback that does the work from one behind a
guard that no case takes (``if K == 0: ...``), and hiding the name (``getattr``) defeats it
anyway. The torch-op recorder decides, on every case the candidate runs: the compile gate on the
workload cases, the correctness gate on every case and trial (``torch_compute_in_forward``).
"""

from __future__ import annotations

import ast
import time
from dataclasses import dataclass, field

from workers import constants as C

# torch functions (torch.X, F.X, torch.nn.functional.X) that do the work a kernel should do.
TORCH_COMPUTE = frozenset(
    """matmul mm bmm addmm baddbmm einsum tensordot dot outer linear bilinear softmax log_softmax
    softmin layer_norm rms_norm group_norm batch_norm instance_norm normalize relu relu6 gelu silu
    sigmoid tanh elu selu celu leaky_relu hardtanh hardswish hardsigmoid mish softplus softsign
    tanhshrink logsigmoid exp exp2 expm1 log log2 log1p sum mean var std var_mean std_mean norm max
    min amax amin argmax argmin logsumexp cumsum cumprod prod sort topk add sub subtract mul
    multiply div divide true_divide pow sqrt rsqrt abs clamp clip where erf erfc maximum minimum
    scaled_dot_product_attention conv1d conv2d conv3d conv_transpose1d conv_transpose2d
    conv_transpose3d avg_pool1d avg_pool2d avg_pool3d max_pool1d max_pool2d max_pool3d dropout
    cross_entropy nll_loss mse_loss l1_loss smooth_l1_loss huber_loss kl_div cosine_similarity
    pairwise_distance cdist triplet_margin_loss hinge_embedding_loss square reciprocal neg sign
    cos sin tan fmod remainder lerp addcmul addcdiv glu frobenius_norm""".split()
)
# Tensor methods that do the work (x.sum(), x.softmax(...)); kept narrower than TORCH_COMPUTE so
# that ordinary Python methods (list.sort, set.add) are not mistaken for torch work.
TENSOR_METHOD_COMPUTE = frozenset(
    """matmul mm bmm softmax log_softmax sum mean var std norm exp log sigmoid tanh relu amax amin
    argmax argmin logsumexp cumsum cumprod prod sqrt rsqrt pow abs clamp clamp_ erf square
    reciprocal baddbmm addmm""".split()
)
THREAD_MODULES = frozenset({"threading", "_thread", "multiprocessing", "concurrent", "asyncio"})
PROCESS_MODULES = frozenset({"subprocess", "pty"})
PROCESS_CALLS = frozenset({"system", "popen", "fork", "forkpty", "spawnl", "spawnv", "execv"})
STREAM_NAMES = frozenset({"Stream", "stream", "set_stream", "ExternalStream", "StreamContext"})
DYNAMIC_CALLS = frozenset({"exec", "eval", "compile", "__import__", "globals", "breakpoint"})
# Modules whose attributes a candidate must not rebind (timers, torch, triton, builtins).
PATCH_ROOTS = frozenset(
    {"torch", "triton", "tl", "time", "timeit", "builtins", "math", "np", "numpy", "os", "sys",
     "cute", "cutlass"}
)  # fmt: skip
# torch internals that switch off the gates' instrumentation while they are in effect: the
# dispatch mode that records torch compute and poisons allocations, the function mode that
# records host reads. A candidate has no use for them.
INSTRUMENTATION_ESCAPES = frozenset(
    """_DisableTorchDispatch _disable_current_modes _pop_mode_temporarily _pop_mode _push_mode
    _unset_dispatch_mode _set_dispatch_mode _get_dispatch_mode _ExcludeDispatchKeyGuard
    _IncludeDispatchKeyGuard _ForceDispatchKeyGuard _PreserveDispatchKeyGuard
    _dispatch_tls_set_dispatch_key_excluded _dispatch_tls_set_dispatch_key_included
    _dispatch_tls_local_exclude_set _dispatch_tls_local_include_set DisableTorchFunction
    DisableTorchFunctionSubclass _DisableFuncTorch _RestorePythonTLSSnapshot
    _set_torch_function_mode _pop_torch_function_stack _push_on_torch_function_stack
    _len_torch_function_stack _EnablePythonDispatcher _DisablePythonDispatcher
    _AutoDispatchBelowAutograd _AutoDispatchBelowADInplaceOrView _python_dispatch
    _disabled_torch_function_impl _disabled_torch_dispatch_impl _disable_profiler
    _TorchDispatchModeKey DispatchKey DispatchKeySet""".split()
)
CUTE_KERNEL = frozenset({"cutlass.cute.kernel"})
CUTE_JIT = frozenset({"cutlass.cute.jit"})


@dataclass(frozen=True)
class Finding:
    rule: str
    line: int
    message: str

    def to_dict(self) -> dict:
        return {"rule": self.rule, "line": self.line, "message": self.message}


@dataclass(frozen=True)
class StaticResult:
    passed: bool
    findings: tuple[Finding, ...] = ()
    warnings: tuple[Finding, ...] = ()
    kernels: tuple[str, ...] = ()
    wall_s: float = 0.0
    evidence: dict = field(default_factory=dict)
    backend: str = C.BACKEND_TRITON

    @property
    def rule(self) -> str | None:
        return self.findings[0].rule if self.findings else None

    @property
    def reason(self) -> str:
        if not self.findings:
            label = C.BACKEND_LABELS[self.backend].replace(" DSL", "")
            reason = f"{len(self.kernels)} {label} kernel(s): {', '.join(self.kernels)}"
            if self.warnings:
                reason += f"; warning {_summary(self.warnings)}"
            return reason
        return _summary(self.findings)


def _summary(findings) -> str:
    f = findings[0]
    more = f" (+{len(findings) - 1} more)" if len(findings) > 1 else ""
    return f"[{f.rule}] line {f.line}: {f.message}{more}"


def _dotted(node) -> str:
    """``torch.nn.functional.softmax`` for an Attribute/Name chain, '' otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if isinstance(node, ast.Call):  # super().forward, torch.cuda.Stream()...
        inner = _dotted(node.func)
        if inner:
            parts.append(inner + "()")
            return ".".join(reversed(parts))
    return ""


def _is_triton_jit(dec) -> bool:
    name = _dotted(dec.func if isinstance(dec, ast.Call) else dec)
    return name in {"triton.jit", "jit", "triton.autotune", "autotune", "triton.heuristics"}


def _reference_calls(problem_source: str | None) -> set[str]:
    """Names of the torch functions/methods the reference's forward calls."""
    if not problem_source:
        return set()
    try:
        tree = ast.parse(problem_source)
    except SyntaxError:
        return set()
    names = set()
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and cls.name == "Model":
            for node in ast.walk(cls):
                if isinstance(node, ast.Call):
                    dotted = _dotted(node.func)
                    if dotted.startswith(("torch.", "F.", "nn.functional.")):
                        names.add(dotted.rsplit(".", 1)[-1])
    return names & (TORCH_COMPUTE | TENSOR_METHOD_COMPUTE)


class _Checker(ast.NodeVisitor):
    def __init__(self, reference_ops: set[str]):
        self.findings: list[Finding] = []
        self.warnings: list[Finding] = []
        self.aliases: dict[str, str] = {}  # local name -> module path
        self.jit_names: set[str] = set()
        self.launched: set[str] = set()
        self.reference_ops = reference_ops
        self.in_jit = 0
        # The cute back end (workers.cute_dsl): @cute.kernel functions, the @cute.jit
        # functions that launch them, and the module's BACKEND declaration.
        self.cute_kernels: set[str] = set()
        self.cute_jits: set[str] = set()
        self.cute_launched: set[str] = set()
        self.cute_called: set[str] = set()
        self.cute_launch_seen = False
        self.in_cute = 0
        self.backend: tuple[str, int] | None = None  # (declared value, line)

    def add(self, rule, node, message):
        self.findings.append(Finding(rule, getattr(node, "lineno", 0), message))

    def warn_torch(self, node, what):
        self.warnings.append(
            Finding(
                C.RULE_TORCH_FALLBACK,
                getattr(node, "lineno", 0),
                f"{what} outside a kernel: rejected at run time if it does work on any case",
            )
        )

    def _module_of(self, dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        base = self.aliases.get(head, head)
        return f"{base}.{rest}" if rest else base

    # imports ---------------------------------------------------------------------------
    def _check_import(self, module: str, node):
        top = module.split(".")[0]
        if top in THREAD_MODULES:
            self.add(C.RULE_THREAD, node, f"imports {module}: no threads or extra processes")
        elif top in PROCESS_MODULES:
            self.add(C.RULE_PROCESS_SPAWN, node, f"imports {module}: no subprocesses")
        elif top == "importlib":
            self.add(C.RULE_DYNAMIC_CODE, node, f"imports {module}: no dynamic imports")

    def visit_Import(self, node):
        for alias in node.names:
            self._check_import(alias.name, node)
            self._escape(alias.name, node)
            self.aliases[(alias.asname or alias.name).split(".")[0]] = (
                alias.name if alias.asname else alias.name.split(".")[0]
            )
        self.generic_visit(node)

    def _escape(self, name: str, node) -> None:
        parts = set(name.split("."))
        hit = parts & INSTRUMENTATION_ESCAPES
        if hit:
            self.add(
                C.RULE_INSTRUMENTATION_ESCAPE,
                node,
                f"reaches {sorted(hit)[0]} ({name}): torch internals that switch off the gates' "
                "recording of torch compute",
            )

    def visit_Attribute(self, node):
        if node.attr in INSTRUMENTATION_ESCAPES:
            self._escape(_dotted(node) or node.attr, node)
            if _dotted(node):
                return  # the chain is said once, at its last name
        self.generic_visit(node)

    def visit_ImportFrom(self, node):
        module = node.module or ""
        self._check_import(module, node)
        for alias in node.names:
            full = f"{module}.{alias.name}" if module else alias.name
            self._check_import(full, node)
            self._escape(full, node)
            self.aliases[alias.asname or alias.name] = full
            if alias.name in {"Model", "get_inputs"} and not module.startswith(("torch", "triton")):
                self.add(C.RULE_REFERENCE_FALLBACK, node, f"imports {alias.name} from {module}")
        self.generic_visit(node)

    # definitions ------------------------------------------------------------------------
    def _decorator_module(self, dec) -> str:
        dotted = _dotted(dec.func if isinstance(dec, ast.Call) else dec)
        return self._module_of(dotted) if dotted else ""

    def visit_FunctionDef(self, node):
        is_jit = any(_is_triton_jit(d) for d in node.decorator_list)
        cute = {self._decorator_module(d) for d in node.decorator_list}
        if cute & (CUTE_KERNEL | CUTE_JIT):
            (self.cute_kernels if cute & CUTE_KERNEL else self.cute_jits).add(node.name)
            self.in_jit += 1
            self.in_cute += 1
            self.generic_visit(node)
            self.in_jit -= 1
            self.in_cute -= 1
        elif is_jit:
            self.jit_names.add(node.name)
            self.in_jit += 1
            self.generic_visit(node)
            self.in_jit -= 1
        else:
            self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Try(self, node):
        self.add(
            C.RULE_TRY_EXCEPT,
            node,
            "try/except: a kernel that fails must fail visibly, not fall back",
        )
        self.generic_visit(node)

    visit_TryStar = visit_Try

    # assignments (monkey patching) -------------------------------------------------------
    def _check_target(self, target, node):
        if isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._check_target(t, node)
            return
        if isinstance(target, ast.Attribute):
            dotted = _dotted(target)
            root = dotted.split(".")[0]
            module = self._module_of(dotted)
            if root in PATCH_ROOTS or module.split(".")[0] in PATCH_ROOTS:
                self.add(C.RULE_MONKEY_PATCH, node, f"rebinds {dotted}")

    def visit_Assign(self, node):
        for t in node.targets:
            self._check_target(t, node)
            if isinstance(t, ast.Name) and t.id == "BACKEND" and node.col_offset == 0:
                value = node.value.value if isinstance(node.value, ast.Constant) else None
                self.backend = (value, node.lineno)
        self.generic_visit(node)

    def visit_AugAssign(self, node):
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_AnnAssign(self, node):
        self._check_target(node.target, node)
        self.generic_visit(node)

    def visit_Delete(self, node):
        for t in node.targets:
            self._check_target(t, node)
        self.generic_visit(node)

    def visit_Global(self, node):
        self.generic_visit(node)

    # expressions -----------------------------------------------------------------------
    def visit_BinOp(self, node):
        if isinstance(node.op, ast.MatMult) and not self.in_jit:
            self.warn_torch(node, "uses the @ operator")
        self.generic_visit(node)

    def visit_Subscript(self, node):
        # kernel[grid](...) is handled in visit_Call; record the subscripted jit name here too.
        self.generic_visit(node)

    def visit_Call(self, node):
        func = node.func
        if isinstance(func, ast.Subscript):
            name = _dotted(func.value)
            if name:
                self.launched.add(name.split(".")[-1])
        if self.in_cute and isinstance(func, ast.Attribute) and func.attr == "launch":
            self.cute_launch_seen = True
            if isinstance(func.value, ast.Call):
                self.cute_launched.add(_dotted(func.value.func).split(".")[-1])
        if self.in_cute and isinstance(func, ast.Name):
            self.cute_called.add(func.id)  # k = kernel(...); ...; k.launch(...)
        dotted = _dotted(func)
        module = self._module_of(dotted) if dotted else ""
        last = dotted.rsplit(".", 1)[-1] if dotted else ""
        if dotted in DYNAMIC_CALLS or module in {"builtins.exec", "builtins.eval"}:
            self.add(C.RULE_DYNAMIC_CODE, node, f"calls {dotted}()")
        elif dotted == "getattr" and len(node.args) >= 2 and self._torch_object(node.args[0]):
            name = node.args[1]
            if not isinstance(name, ast.Constant):
                self.add(
                    C.RULE_INSTRUMENTATION_ESCAPE,
                    node,
                    f"getattr() on {_dotted(node.args[0])} with a computed name: torch's "
                    "attributes are named in the source",
                )
            elif isinstance(name.value, str):
                self._escape(f"{_dotted(node.args[0])}.{name.value}", node)
        elif dotted in {"setattr", "delattr"} and node.args:
            target = _dotted(node.args[0])
            root = self._module_of(target).split(".")[0] if target else ""
            if root in PATCH_ROOTS or target.split(".")[0] in PATCH_ROOTS:
                self.add(C.RULE_MONKEY_PATCH, node, f"{dotted}() on {target}")
        elif module.startswith(("os.", "pty.")) and last in PROCESS_CALLS | {"posix_spawn"}:
            self.add(C.RULE_PROCESS_SPAWN, node, f"calls {dotted}()")
        elif last in STREAM_NAMES and (".cuda." in f".{module}." or module.startswith("torch.")):
            self.add(C.RULE_SIDE_STREAM, node, f"calls {dotted}(): work must stay on one stream")
        elif last in {"Thread", "ThreadPoolExecutor", "ProcessPoolExecutor", "Process"}:
            self.add(C.RULE_THREAD, node, f"calls {dotted}()")
        elif self.in_cute and module.split(".")[0] == "torch":
            self.add(
                C.RULE_TORCH_FALLBACK,
                node,
                f"calls {dotted}() inside a CuTe kernel or jit function: only the DSL runs there",
            )
        elif not self.in_jit and dotted:
            self._check_torch_work(node, dotted, module, last)
        self.generic_visit(node)

    def _torch_object(self, node) -> bool:
        dotted = _dotted(node)
        return bool(dotted) and self._module_of(dotted).split(".")[0] == "torch"

    def _check_torch_work(self, node, dotted, module, last):
        if dotted in {"Model", "super().forward"} or module.endswith(".Model"):
            self.add(C.RULE_REFERENCE_FALLBACK, node, f"calls the reference {dotted}()")
            return
        torchy = module.startswith(("torch.", "torch.nn.functional.")) or dotted.startswith(
            ("F.", "nn.functional.")
        )
        if torchy and (last in TORCH_COMPUTE or last in self.reference_ops):
            if module.startswith(("torch.nn.functional.", "torch.")) or dotted.startswith("F."):
                self.warn_torch(node, f"calls {dotted}()")
                return
        if torchy and module.startswith("torch.nn.") and last[:1].isupper():
            # nn.Linear(...) etc. as a layer is fine for holding weights; calling it is caught
            # at run time by the compile gate's torch-op recorder.
            return
        if (
            not torchy
            and isinstance(node.func, ast.Attribute)
            and last in (TENSOR_METHOD_COMPUTE | self.reference_ops)
            and _dotted(node.func.value).split(".")[0] not in {"tl", "triton", "math", "np"}
        ):
            self.warn_torch(node, f"calls .{last}() on a tensor")


def check_static(candidate_source: str, problem_source: str | None = None) -> StaticResult:
    """Run every static rule on the candidate; the first finding is the reason. Warnings (torch
    compute outside a kernel) are kept in the evidence and do not fail the gate."""
    start = time.perf_counter()
    try:
        tree = ast.parse(candidate_source)
    except SyntaxError as exc:
        finding = Finding(C.RULE_SYNTAX, exc.lineno or 0, f"does not parse: {exc.msg}")
        return StaticResult(False, (finding,), wall_s=time.perf_counter() - start)
    checker = _Checker(_reference_calls(problem_source))
    checker.visit(tree)
    findings = list(checker.findings)
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    if "ModelNew" not in classes:
        findings.insert(0, Finding(C.RULE_NO_MODEL_NEW, 0, "defines no class ModelNew"))
    backend, kernels = _kernel_findings(checker, findings)
    return StaticResult(
        passed=not findings,
        findings=tuple(findings),
        warnings=tuple(checker.warnings),
        kernels=kernels,
        wall_s=time.perf_counter() - start,
        evidence={
            "backend": backend,
            "kernels": list(kernels),
            "findings": [f.to_dict() for f in findings],
            "warnings": [w.to_dict() for w in checker.warnings],
        },
        backend=backend,
    )


def _kernel_findings(checker: _Checker, findings: list) -> tuple[str, tuple[str, ...]]:
    """The declared back end (``BACKEND``, Triton when absent) and its launched kernels; what
    is missing or does not match becomes a finding. ``"cute+triton"`` must have both: CuTe
    kernels launched from ``@cute.jit`` functions and launched Triton kernels."""
    declared, line = checker.backend or (C.BACKEND_TRITON, 0)
    if declared not in C.BACKENDS:
        allowed = ", ".join(repr(b) for b in C.BACKENDS)
        findings.append(
            Finding(C.RULE_NO_KERNEL, line, f"BACKEND = {declared!r}: one of {allowed}")
        )
        return C.BACKEND_TRITON, ()
    kernels: tuple[str, ...] = ()
    if declared in (C.BACKEND_CUTE, C.BACKEND_MIXED):
        kernels += _cute_kernels(checker, findings, declared, line)
    elif checker.cute_kernels and not checker.jit_names:
        findings.append(
            Finding(
                C.RULE_NO_KERNEL,
                0,
                'defines @cute.kernel functions: declare BACKEND = "cute" at module level',
            )
        )
        return C.BACKEND_TRITON, ()
    if declared in (C.BACKEND_TRITON, C.BACKEND_MIXED):
        kernels += _triton_kernels(checker, findings)
    return declared, tuple(sorted(kernels))


def _cute_kernels(checker: _Checker, findings: list, declared: str, line: int) -> tuple:
    launched = checker.cute_launched | (checker.cute_called if checker.cute_launch_seen else set())
    kernels = tuple(sorted(checker.cute_kernels & launched))
    if not checker.cute_kernels:
        findings.append(
            Finding(C.RULE_NO_KERNEL, line, f"declares BACKEND = {declared!r} but no @cute.kernel")
        )
    elif not kernels or not checker.cute_jits:
        findings.append(
            Finding(
                C.RULE_KERNEL_NOT_LAUNCHED,
                0,
                f"no kernel(...).launch(...) of {', '.join(sorted(checker.cute_kernels))} "
                "in a @cute.jit function",
            )
        )
    return kernels


def _triton_kernels(checker: _Checker, findings: list) -> tuple:
    if not checker.jit_names:
        findings.append(Finding(C.RULE_NO_KERNEL, 0, "defines no @triton.jit kernel"))
    elif not (checker.jit_names & checker.launched):
        findings.append(
            Finding(
                C.RULE_KERNEL_NOT_LAUNCHED,
                0,
                f"no kernel[grid](...) launch of {', '.join(sorted(checker.jit_names))}",
            )
        )
    return tuple(sorted(checker.jit_names & checker.launched))
