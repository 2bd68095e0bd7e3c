"""Compile two CuTe DSL kernels for a GPU that this host does not have (issue 15's AOT question).

    python scripts/cute_aot_probe.py --site /tmp/cute                # sm_90a, no GPU needed
    python scripts/cute_aot_probe.py --site /tmp/cute --export       # also the C export (.h/.o)
    python scripts/cute_aot_probe.py --arch sm_100a --json out.json

``--site`` is a ``pip install --target`` folder holding ``nvidia-cutlass-dsl`` (see
docs/cute_dsl.md); without it the package must already be importable. The kernels are an
elementwise add and a two-CTA cluster row sum that reads its partner's shared memory (the
Hopper feature the back end is wanted for). For each it prints the PTX ``.version``/``.target``
lines, the PTX and cubin sizes, the SM the cubin's ELF header names, and the registers,
barriers and spills that the DSL's built-in ptxas reports. Exit status 1 when a kernel does not
compile or its PTX or cubin is for another architecture. Nothing here needs a GPU or libcuda:
that is the point. The gates' own tests are tests/workers/test_cute_backend.py.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ctypes.util
import io
import json
import operator
import os
import re
import site
import struct
import sys
import tempfile
import time

ANSI = re.compile(r"\x1b\[[0-9;]*m")
PTXAS = {
    "registers": r"Used (\d+) registers",
    "spill_stores": r"(\d+) bytes spill stores",
    "spill_loads": r"(\d+) bytes spill loads",
    "barriers": r"used (\d+) barriers",
}
THREADS, CLUSTER, N = 128, 2, 4096
WARPS = THREADS // 32
# The DSL re-executes kernel bodies against their module's globals, so the DSL modules must be
# globals here, not locals of the function that imports them; set by _import_dsl.
cutlass = cute = llvm = T = None


def _import_dsl(site_dir: str | None) -> None:
    global cutlass, cute, llvm, T
    if site_dir:
        # addsitedir runs the package's .pth, which puts dsl_packages/ on sys.path;
        # PYTHONPATH alone would skip it (pip --target does not process .pth files).
        site.addsitedir(os.path.abspath(site_dir))
    import cutlass
    import cutlass.cute as cute
    from cutlass._mlir.dialects import llvm
    from cutlass.cutlass_dsl import T


def _kernels() -> dict:
    """The two probe kernels, defined once the DSL is importable."""
    from cutlass.cute.runtime import make_fake_compact_tensor

    @cute.kernel
    def add_kernel(g_a: cute.Tensor, g_b: cute.Tensor, g_c: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        i = bidx * THREADS + tidx
        if i < cute.size(g_a):
            g_c[i] = g_a[i] + g_b[i]

    @cute.jit
    def add(m_a: cute.Tensor, m_b: cute.Tensor, m_c: cute.Tensor):
        blocks = (cute.size(m_a) + THREADS - 1) // THREADS
        add_kernel(m_a, m_b, m_c).launch(grid=(blocks, 1, 1), block=(THREADS, 1, 1))

    @cute.kernel
    def rowsum_cluster_kernel(g_x: cute.Tensor, g_y: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, row, _ = cute.arch.block_idx()
        rank = cute.arch.block_idx_in_cluster()
        smem = cutlass.utils.SmemAllocator()
        warp_sums = smem.allocate_tensor(cutlass.Float32, cute.make_layout(WARPS), 16)
        partial = smem.allocate_array(cutlass.Float32, 1, byte_alignment=16)
        v = cute.arch.warp_reduction(g_x[row, bidx * THREADS + tidx], operator.add)
        if tidx % 32 == 0:
            warp_sums[tidx // 32] = v
        cute.arch.sync_threads()
        if tidx == 0:
            s = warp_sums[0]
            for w in cutlass.range_constexpr(1, WARPS):
                s = s + warp_sums[w]
            cute.make_tensor(partial, cute.make_layout(1))[0] = s
        cute.arch.cluster_arrive()
        cute.arch.cluster_wait()
        if rank == 0 and tidx == 0:
            total = cute.make_tensor(partial, cute.make_layout(1))[0]
            for r in cutlass.range_constexpr(1, CLUSTER):
                # A DSMEM tensor has no load in 4.8.1 ("doesn't support load and store"):
                # load through the mapa'd pointer instead (ld.shared::cluster).
                remote = cute.arch.map_dsmem_ptr(partial, r)
                total = total + cutlass.Float32(llvm.load(T.f32(), remote.to_llvm_ptr()))
            g_y[row] = total
        # Keep every CTA's shared memory alive until rank 0 has read it.
        cute.arch.cluster_arrive()
        cute.arch.cluster_wait()

    @cute.jit
    def rowsum_cluster(m_x: cute.Tensor, m_y: cute.Tensor):
        rows = cute.size(m_x, mode=[0])
        rowsum_cluster_kernel(m_x, m_y).launch(
            grid=(CLUSTER, rows, 1), block=(THREADS, 1, 1), cluster=(CLUSTER, 1, 1)
        )

    f32 = cutlass.Float32
    return {
        "add": (add, [make_fake_compact_tensor(f32, (N,)) for _ in range(3)]),
        "rowsum_cluster": (
            rowsum_cluster,
            [
                make_fake_compact_tensor(f32, (64, CLUSTER * THREADS), stride_order=(1, 0)),
                make_fake_compact_tensor(f32, (64,)),
            ],
        ),
    }


def _cubin_sm(cubin: bytes) -> int | None:
    """The SM number in a cubin's ELF header (ABI 7 keeps it in the low byte, ABI 8 above it)."""
    if cubin[:4] != b"\x7fELF":
        return None
    abi = cubin[8]
    flags = struct.unpack_from("<I", cubin, 48)[0]  # e_flags of a 64-bit ELF
    return (flags >> 8) & 0xFFFF if abi >= 8 else flags & 0xFF


def _compile(cute, name, fn, args, arch, out_dir) -> dict:
    opts = f"--gpu-arch {arch} --keep-ptx --keep-cubin --dump-dir {out_dir} remarks{{ptx}}"
    err = io.StringIO()
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stderr(err):
            compiled = cute.compile(fn, *args, options=opts)
    except Exception as exc:  # noqa: BLE001 - the probe reports every failure
        return {"kernel": name, "ok": False, "error": ANSI.sub("", str(exc)).strip()[:2000]}
    seconds = time.perf_counter() - t0
    ptx, cubin = compiled.__ptx__, compiled.__cubin__
    # With a missing --dump-dir the DSL writes nothing and returns the would-be paths.
    if not isinstance(cubin, bytes) or not ptx or not ptx.lstrip().startswith("//"):
        return {"kernel": name, "ok": False, "error": f"no PTX/cubin written to {out_dir}"}
    header = [ln for ln in ptx.splitlines() if ln.startswith((".version", ".target"))]
    report = ANSI.sub("", err.getvalue())
    found = {key: re.search(pattern, report) for key, pattern in PTXAS.items()}
    res = {key: int(m.group(1)) if m else None for key, m in found.items()}
    want = arch.removeprefix("sm_")
    sm = _cubin_sm(cubin)
    ok = f".target {arch}" in header and sm == int(want.rstrip("af"))
    return {
        "kernel": name,
        "ok": ok,
        "compile_s": round(seconds, 3),
        "ptx_header": header,
        "ptx_bytes": len(ptx),
        "cubin_bytes": len(cubin),
        "cubin_sm": sm,
        **res,
        "compiled": compiled,
    }


def _export(cute, compiled, out_dir: str) -> dict:
    """export_to_c, then load the object back: both without a GPU."""
    from cutlass.runtime import find_runtime_libraries

    # The object is linked in-process by an ORC JIT that resolves the CUDA wrappers
    # (_cudaLaunchKernelEx, ...) from the process: without libcute_dsl_runtime.so loaded
    # RTLD_GLOBAL it fails with "JIT session error: Symbols not found" (NVIDIA/cutlass#2859).
    for path in find_runtime_libraries(enable_tvm_ffi=False):
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    try:
        compiled.export_to_c(out_dir, "probe_add")
        module = cute.runtime.load_module(os.path.join(out_dir, "probe_add.o"))
        module.probe_add  # noqa: B018 - resolving the symbol is the check
    except Exception as exc:  # noqa: BLE001 - the probe reports every failure
        return {"ok": False, "error": ANSI.sub("", str(exc)).strip()[:2000]}
    sizes = {f: os.path.getsize(os.path.join(out_dir, f)) for f in ("probe_add.h", "probe_add.o")}
    return {"ok": True, "files": sizes, "loaded": True}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", help="a pip --target folder holding nvidia-cutlass-dsl")
    ap.add_argument("--arch", default="sm_90a", help="GPU architecture (default sm_90a)")
    ap.add_argument("--out", help="folder for PTX/cubin/export (default: a temporary one)")
    ap.add_argument("--export", action="store_true", help="also export_to_c and load it back")
    ap.add_argument("--json", help="write the results here as JSON")
    args = ap.parse_args()

    t0 = time.perf_counter()
    try:
        _import_dsl(args.site)
    except ImportError as exc:
        print(f"nvidia-cutlass-dsl is not importable ({exc}); pass --site", file=sys.stderr)
        return 2
    import_s = time.perf_counter() - t0
    libcuda = ctypes.util.find_library("cuda")
    # With no driver the loader takes the newest installed flavor (cu13 beats cu12), with one
    # the newest the driver supports; the flavor decides the PTX ISA and the cubin bytes.
    flavor = re.search(r"\.(cu\d+)\.", cutlass._mlir._mlir_libs._cutlass_ir.__file__)
    flavor = flavor.group(1) if flavor else "unknown"
    print(
        f"cutlass {cutlass.__version__} ({flavor}), import {import_s:.2f} s, "
        f"libcuda: {libcuda or 'absent'}"
    )

    out_dir = args.out or tempfile.mkdtemp(prefix="cute_aot_")
    os.makedirs(out_dir, exist_ok=True)  # the DSL silently writes nothing into a missing folder
    results = []
    for name, (fn, fake_args) in _kernels().items():
        r = _compile(cute, name, fn, fake_args, args.arch, out_dir)
        results.append(r)
        if not r["ok"]:
            print(f"{name}: FAILED {r.get('error') or r}")
            continue
        print(
            f"{name}: {' '.join(r['ptx_header'])}; PTX {r['ptx_bytes']} B, cubin "
            f"{r['cubin_bytes']} B (ELF sm_{r['cubin_sm']}); {r['registers']} registers, "
            f"{r['spill_stores']}/{r['spill_loads']} B spilled, {r['compile_s']} s"
        )
    export = None
    if args.export and results[0]["ok"]:
        export = _export(cute, results[0]["compiled"], out_dir)
        print(f"export_to_c + load_module: {export}")
    print(f"artifacts in {out_dir}")

    if args.json:
        clean = [{k: v for k, v in r.items() if k != "compiled"} for r in results]
        payload = {
            "cutlass": cutlass.__version__,
            "flavor": flavor,
            "arch": args.arch,
            "libcuda": libcuda,
            "import_s": round(import_s, 3),
            "kernels": clean,
            "export": export,
        }
        with open(args.json, "w") as fh:
            json.dump(payload, fh, indent=2)
    ok = all(r["ok"] for r in results) and (export is None or export["ok"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
