"""The ``cute`` back end: kernels written in NVIDIA's CuTe DSL (``nvidia-cutlass-dsl``) beside
Triton ones (issue 15; what was found about the DSL without a GPU is in docs/cute_dsl.md).

A candidate declares its back end with a module constant, ``BACKEND = "cute"`` (``"triton"``
when absent), defines ``@cute.kernel`` functions launched from ``@cute.jit`` ones, and compiles
those with ``cute.compile`` before calling the result. The sandbox child imports the DSL before
any untrusted code (its import runs ``ldconfig`` and fills the DSL's caches) and installs a
:class:`CuteRecorder` in place of ``cutlass.cute.compile``. Every compile then:

- targets the architecture the gate names (``--gpu-arch``: the device's on cuda, ``sm_90a`` for
  the ahead-of-time compile on a host without a GPU, where the DSL would silently pick
  ``sm_100a``), whatever architecture the candidate asked for;
- keeps the PTX and cubin and reads registers and spills from ptxas's report, as the Triton
  path does;
- hands back a launcher that records each call as a launch of the candidate (what the compile
  gate requires of every case) and, in compile-only mode (``interpret``: nothing can run a CuTe
  kernel without a GPU), does not call it.

The compute core: no Django here.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import re
import shlex
import struct

from workers import constants as C
from workers.gates.artifacts import cap_ir, ptxas_report

# Options of ``cute.compile`` that the gate decides, not the candidate.
_GATE_OPTIONS = {"--gpu-arch", "--dump-dir"}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


_DECLARED = re.compile(r"""^BACKEND\s*=\s*["']([A-Za-z_+]+)["']""", re.MULTILINE)


def declared_backend(source: str) -> str:
    """The back end a candidate's source declares (``BACKEND = "cute"``, or ``"cute+triton"``
    for one that dispatches each case to either), Triton otherwise: what the portal shows. The
    static gate checks that the declaration matches the kernels."""
    m = _DECLARED.search(source or "")
    return m.group(1) if m and m.group(1) in C.BACKENDS else C.BACKEND_TRITON


def uses_cute(backend: str) -> bool:
    """Whether a back end needs the DSL (and, to check or time it, a GPU)."""
    return backend in (C.BACKEND_CUTE, C.BACKEND_MIXED)


def available() -> bool:
    """Whether the DSL is installed here (``nvidia-cutlass-dsl``, pinned in requirements)."""
    try:
        return importlib.util.find_spec("cutlass") is not None
    except (ImportError, ValueError):
        return False


def arch_name(arch: int) -> str:
    """``sm_90a`` for Hopper and later (the DSL's cluster and TMA features need the ``a``
    target), ``sm_80`` before it."""
    return f"sm_{arch}a" if arch >= 90 else f"sm_{arch}"


def clean_error(exc: BaseException) -> str:
    """The DSL's error text without its terminal colours."""
    return _ANSI.sub("", f"{type(exc).__name__}: {exc}").strip()


# What a reviewer looks for in a memory-bound kernel's PTX, counted over the whole text (the
# report keeps a capped copy): 128-bit global loads and stores, warp shuffles, and Hopper's
# cluster features (the cluster barrier, distributed shared memory through mapa).
PTX_FEATURES = {
    "ld_global_v4": "ld.global.v4",
    "st_global_v4": "st.global.v4",
    "shfl": "shfl.sync",
    "cluster_barrier": "barrier.cluster.arrive",
    "dsmem_map": "mapa",
    "st_async": "st.async",  # a store into another CTA's shared memory, counted by its mbarrier
    "mbarrier_wait": "mbarrier.try_wait",
}


def ptx_features(ptx: str) -> dict:
    """How often each of :data:`PTX_FEATURES` occurs in ``ptx`` (its instructions, not its
    comments)."""
    code = "\n".join(line.split("//", 1)[0] for line in (ptx or "").splitlines())
    return {name: code.count(token) for name, token in PTX_FEATURES.items()}


class CompileFailed(RuntimeError):
    """``cute.compile`` refused a candidate's kernel (tracing, NVVM, ptxas): the compile gate's
    failure, with the DSL's message."""


class CuteRecorder:
    """Stands in for ``cutlass.cute.compile`` in the sandbox child (see the module's doc)."""

    def __init__(self):
        self.installed = False
        self.original = None
        self.arch: int = C.DEFAULT_AOT_TARGET[1]
        self.folder: str | None = None  # where the PTX/cubin are written (the job's folder)
        self.compile_only = False
        self.active = False  # recording launches (the compile gate's forward)
        self.launches: list[dict] = []
        self.artifacts: dict[str, dict] = {}  # by compiled function key

    def install(self) -> None:
        if self.installed:
            return
        import cutlass.cute as cute

        self.original = cute.compile
        cute.compile = _Compile(self, self.original)
        self.installed = True

    def reset(self, *, arch: int, folder: str, compile_only: bool) -> None:
        """A new job: its architecture, its folder, whether calls may run."""
        self.arch, self.folder, self.compile_only = arch, folder, compile_only
        self.active = False
        self.launches = []
        self.artifacts = {}

    def options(self, asked: str | None) -> str:
        """The candidate's options with the architecture and the dump folder the gate's."""
        kept = []
        words = shlex.split(asked or "")
        skip = False
        for word in words:
            if skip:
                skip = False
                continue
            name = word.split("=", 1)[0]
            if name in _GATE_OPTIONS:
                skip = "=" not in word
                continue
            if name in ("--keep-ptx", "--keep-cubin"):
                continue
            kept.append(word)
        folder = os.path.join(self.folder or ".", "cute")
        os.makedirs(folder, exist_ok=True)
        ours = [f"--gpu-arch {arch_name(self.arch)}", "--keep-ptx", "--keep-cubin"]
        ours.append(f"--dump-dir {shlex.quote(folder)}")
        return " ".join(ours + [shlex.quote(w) for w in kept])

    def compiled(self, fn, compiled) -> _Launcher:
        name = getattr(fn, "__name__", None) or type(fn).__name__
        artifact = self._artifact(name, compiled)
        key = f"cute:{name}:{artifact.get('cubin_sha256') or id(compiled)}"
        self.artifacts.setdefault(key, artifact)
        return _Launcher(self, compiled, name, key)

    def _artifact(self, name: str, compiled) -> dict:
        ptx = getattr(compiled, "__ptx__", None)
        cubin = getattr(compiled, "__cubin__", None)
        ptx = ptx if isinstance(ptx, str) and ptx.lstrip().startswith("//") else ""
        cubin = cubin if isinstance(cubin, bytes) else b""
        out = {
            "kernel": name,
            "backend": C.BACKEND_CUTE,
            "target": ["cuda", self.arch, 32],
            "arch": arch_name(self.arch),
            "ir": {"ptx": cap_ir(ptx)} if ptx else {},
            "ir_chars": {"ptx": len(ptx)} if ptx else {},
            "ptx_features": ptx_features(ptx),
            "ptx_target": next(
                (ln.split()[1] for ln in ptx.splitlines() if ln.startswith(".target")), None
            ),
            "cubin_sha256": hashlib.sha256(cubin).hexdigest() if cubin else None,
            "cubin_bytes": len(cubin),
            "cubin_sm": cubin_sm(cubin),
        }
        if cubin and len(cubin) <= C.CUBIN_INLINE_BYTES:
            out["cubin_b64"] = base64.b64encode(cubin).decode()
        if ptx and self.folder:
            out.update(ptxas_report(ptx, self.arch, self.folder))
        return out


class _Compile:
    """``cute.compile`` as the candidate sees it (also ``cute.compile[...](...)``)."""

    def __init__(self, recorder: CuteRecorder, inner):
        self._recorder, self._inner = recorder, inner

    def __call__(self, fn, *args, **kwargs):
        kwargs["options"] = self._recorder.options(kwargs.get("options"))
        try:
            compiled = self._inner(fn, *args, **kwargs)
        except Exception as exc:
            name = getattr(fn, "__name__", "?")
            raise CompileFailed(f"cute.compile({name}) failed: {clean_error(exc)}") from exc
        return self._recorder.compiled(fn, compiled)

    def __getitem__(self, item):
        return _Compile(self._recorder, self._inner[item])


class _Launcher:
    """A compiled CuTe function: each call is a launch of the candidate's; in compile-only mode
    it is recorded and not run."""

    def __init__(self, recorder: CuteRecorder, compiled, name: str, key: str):
        self._recorder, self._compiled, self._name, self._key = recorder, compiled, name, key

    def __call__(self, *args, **kwargs):
        recorder = self._recorder
        if recorder.active:
            recorder.launches.append(
                {"kernel": self._name, "key": self._key, "backend": C.BACKEND_CUTE}
            )
        if recorder.compile_only:
            return None
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._compiled, name)


def cubin_sm(cubin: bytes) -> int | None:
    """The SM number in a cubin's ELF header (ABI 7 keeps it in the low byte, ABI 8 above)."""
    if len(cubin) < 52 or cubin[:4] != b"\x7fELF":
        return None
    flags = struct.unpack_from("<I", cubin, 48)[0]
    return (flags >> 8) & 0xFFFF if cubin[8] >= 8 else flags & 0xFF
