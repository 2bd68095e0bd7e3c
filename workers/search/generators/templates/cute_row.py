"""Row kernels in CuTe DSL (the ``cute`` back end, issue 15): RMSNorm, LayerNorm and softmax over
the last dimension, and the cross-entropy of rows of logits (a loss per row from an online
(max, sum of exp) exchange, then one CTA sums the losses into the mean or the sum), one CTA or
one thread-block cluster per row.

A candidate compiles one kernel per case shape (``cute.compile`` with the shape static), so the
launch is chosen per case in Python (``_ke_plan``): the widest vector of 16 bytes or less that
divides the row (128-bit ``ld.global.v4`` where the row allows it), ``threads`` per CTA, and
the fewest CTAs (1 to ``max_cluster``) whose registers hold the row at ``max_per_thread``
elements a thread. Held in registers, the row is read once; a cluster's CTAs combine their
partial sums through distributed shared memory (Hopper's cluster barrier, ``mapa`` and
``ld.shared::cluster``), the way QuACK keeps long rows in one pass. A row longer than that is
read again by a loop that is not unrolled (the looped softmax reads it twice). Partial
vectors at the row's end are masked per vector (a row of 80 with 128 threads reads 20 vectors
of 4). Names assigned in a dynamic loop are that loop's own (``j1``, ``v1``): the DSL carries
a name assigned in a dynamic loop across it, so it must not be reused.

Two launch parameters came from reading the first H200 runs against QuACK (docs/benchmarks.md,
"Two back ends on the H200") and the SASS (``nvdisasm`` of the cubin): ``prefetch`` loads a
kept row whole before using any of it (all 128-bit loads issued back to back, unpredicated when
the row fills every thread), and ``online`` makes softmax exchange (max, sum of exp) pairs once
instead of a max and then a sum (one cluster barrier round instead of two; a looped row read
twice, not three times). The exchange's second cluster barrier is a relaxed arrive: its reads
are already used, so it needs no GPU-wide memory barrier. ``max_cluster`` 16 is Hopper's
non-portable cluster size, which keeps 262,144-column rows on chip.

From the H200 sweep of session 32 (the per-case tuner, ``workers/search/tune_cute.py``): the
long bf16 rows were issue-bound, so ``exp`` is one multiply and the hardware's ``exp2``, and a
kept softmax row's exps are computed once; ``exchange`` 1 reduces a cluster without a cluster
barrier (each warp's partial stored into every CTA's shared memory by ``st.async``, counted by
that CTA's mbarrier), as QuACK does. Every launch parameter can differ per case shape: the
kernels take one launch tuple as a constexpr, and ``_KE_TABLE`` (``render(op, {"table":
...})``) maps a shape ``"rows,n,dtype"`` to its own parameters.

From QuACK's SASS read beside ours (session 33): softmax takes its exps against the warp's max
as one FFMA and MUFU.EX2 (``ex2(x log2 e - max log2 e)``; a row whose max times log2 e would
overflow, one masked with the dtype's lowest value, keeps the subtract-then-multiply form,
where the FFMA form gives NaN), a row that fills every thread compiles no bounds tests, and
``stage`` stages a kept row in shared memory by ``cp.async`` (2: read again from there at each
use, so no register holds the row across the reduction; it won the norms' longest rows).
``occupancy`` asks ptxas to fit that many CTAs an SM.

From the H200 runs of session 34: ``pack`` sends an online softmax's (max, sum) pair to a peer
CTA as one 64-bit ``st.async`` (QuACK's; it closed most of the last gap on 262,144-column bf16
rows), ``cache`` reads the row evict-first and writes the output streaming (it won the
catalog's bf16 softmax rows of 1,024 to 8,192), ``order`` puts a cluster along the grid's y
(QuACK's grid; no measurable effect), and ``stage`` 3 keeps a row in registers in its own
dtype (a bf16 row in half the registers), converted at each use. ``reread`` reads the row from
global memory at each use, the reads before the last keeping it in L2 (an evict-last policy),
as compile's own RMSNorm kernel does for 8,192 columns (not yet timed).

``render(op, params)`` writes a complete candidate (``BACKEND = "cute"``, ``ModelNew`` with the
catalog problem's constructor). The compute core: no Django here.
"""

from __future__ import annotations

OPS = ("rms_norm", "softmax", "layer_norm", "cross_entropy")
# The defaults won most long-row cases in the H200 sweep of session 32 (docs/benchmarks.md); the
# per-case tuner (workers/search/tune_cute.py) writes a table of each case's own.
DEFAULTS = {
    "threads": 256,
    "max_per_thread": 64,
    "max_cluster": 16,
    "prefetch": 1,
    "online": 1,
    "exchange": 1,
    "stage": 0,
    "occupancy": 0,
    "order": 0,
    "pack": 0,
    "cache": 0,
    "reread": 0,
}
SPACE = {
    "threads": [64, 128, 256, 512, 1024],
    "max_per_thread": [16, 32, 64, 128],
    # 16 CTAs is Hopper's non-portable cluster size (the launch allows it explicitly)
    "max_cluster": [1, 2, 4, 8, 16],
    # 1: a row kept in registers is loaded whole before any of it is used (every load in
    # flight at once); 0: each vector is used as it arrives (the layout first run on the H200)
    "prefetch": [0, 1],
    # softmax only. 1: one exchange of (max, sum of exp) pairs, merged online (a looped row is
    # read twice); 0: the max, then the sum (two exchanges; a looped row is read three times)
    "online": [0, 1],
    # with a cluster. 0: each CTA's partial through its shared memory between two cluster
    # barriers; 1: each warp's partial sent to every CTA by st.async and counted by that CTA's
    # mbarrier (no cluster barrier in the exchange, no GPU-wide memory barrier)
    "exchange": [0, 1],
    # a kept, prefetched row. 0: loaded into the registers directly; 1: by cp.async into shared
    # memory (no register waits on the loads), then into the registers; 2: into shared memory,
    # read from there at each use (no row held in registers across the reduction, so more CTAs
    # fit an SM; RMSNorm and LayerNorm as QuACK does; the online softmax computes its exps
    # twice); 3: kept in registers in its own dtype, converted at each use (a bf16 row in half
    # the registers; the online softmax computes its exps twice). Cross-entropy and the
    # two-exchange softmax keep their exps in the registers: they read 2 as 1 and 3 as 0
    "stage": [0, 1, 2, 3],
    # CTAs an SM must hold (ptxas caps the registers to fit them; 0: its own choice). With a
    # cluster per row, how many clusters run at once decides how many waves the rows take
    "occupancy": [0, 2, 3, 4],
    # with a cluster. 0: the grid's x is the CTA's rank in its cluster, y the row; 1: x is the
    # row, y the rank (QuACK's grid: the cluster along y)
    "order": [0, 1],
    # an online softmax's exchange by st.async (cross-entropy's too). 0: the max and the sum
    # as two 32-bit stores a peer; 1: packed as one 64-bit store (QuACK's)
    "pack": [0, 1],
    # cache hints on the row's traffic. bit 0: the row read streaming (ld.global.cs, evicted
    # first; cp.async .cg where the row is staged); bit 1: the output written streaming
    # (st.global.cs). 0: the default (.ca loads, write-back stores)
    "cache": [0, 1, 2, 3],
    # 1: the row is not held on chip but read from global memory at each use, the reads
    # before the last keeping it in L2 (an evict-last policy) and the last evicting it first,
    # one CTA a row: what compile's RMSNorm does for 8,192 columns (little held in registers
    # across the reduction, so more rows in flight an SM)
    "reread": [0, 1],
}

_HEAD = """\"\"\"{title} in CuTe DSL, one CTA or one cluster per row (templates/cute_row.py).\"\"\"

import math
import operator

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
import torch.nn as nn
from cutlass._mlir.dialects import llvm, vector
from cutlass.cute.nvgpu import cpasync
from cutlass.cute.runtime import from_dlpack
from cutlass.cutlass_dsl import T

BACKEND = "cute"
THREADS = {threads}
MAX_PER_THREAD = {max_per_thread}
MAX_CLUSTER = {max_cluster}
PREFETCH = {prefetch}
ONLINE = {online}
EXCHANGE = {exchange}
STAGE = {stage}
OCCUPANCY = {occupancy}
ORDER = {order}
PACK = {pack}
CACHE = {cache}
REREAD = {reread}
# Launch parameters per case shape ("rows,n,dtype", as the per-case tuner found them); a shape
# not in the table takes the constants above.
_KE_TABLE = {table}
# The largest finite float32, negated: "no value yet" in an online softmax (-inf - -inf is NaN).
LOWEST = -3.4028234663852886e38
LOG2E = 1.4426950408889634
# The most bytes of a row staged in one CTA's shared memory.
STAGE_BYTES = 200 * 1024
# Below this a max times log2 e overflows float32 (x * log2 e - max * log2 e would be NaN).
SHIFT_SAFE = -2.0e38


def _ke_params(rows, n, dtype):
    \"\"\"The launch parameters for ``rows`` rows of ``n`` of ``dtype``: the table's, else the
    module's.\"\"\"
    p = {{"threads": THREADS, "max_per_thread": MAX_PER_THREAD, "max_cluster": MAX_CLUSTER,
         "prefetch": PREFETCH, "online": ONLINE, "exchange": EXCHANGE, "stage": STAGE,
         "occupancy": OCCUPANCY, "order": ORDER, "pack": PACK, "cache": CACHE,
         "reread": REREAD}}
    p.update(_KE_TABLE.get(f"{{rows}},{{n}},{{str(dtype).removeprefix('torch.')}}", {{}}))
    return p


def _ke_plan(n, itemsize, rows, p=None):
    \"\"\"(vector width, vectors per thread, whether the row stays in registers, CTAs per row)
    for ``rows`` rows of ``n`` under the parameters ``p``: the fewest CTAs (a thread-block
    cluster) that hold the row in registers, else one CTA that reads it twice (as with
    ``reread``).\"\"\"
    p = p or _ke_params(rows, n, None)
    threads = p["threads"]
    vec = 16 // itemsize
    while vec > 1 and n % vec:
        vec //= 2
    nvec = n // vec
    if p["reread"]:  # read at each use, through L2
        return vec, max(1, math.ceil(nvec / threads)), False, 1
    cluster = 1
    while cluster <= p["max_cluster"] and (cluster == 1 or rows <= 65535):
        per = max(1, math.ceil(nvec / (threads * cluster)))
        if per * vec <= p["max_per_thread"]:
            return vec, per, True, cluster
        cluster *= 2
    return vec, max(1, math.ceil(nvec / threads)), False, 1


def _ke_stage(p, vec, per, keep, itemsize):
    \"\"\"Where a kept row is kept in its own dtype under the parameters ``p``: nowhere unless
    it is kept and prefetched; in registers (3); in shared memory (1, 2) only in vectors
    cp.async can move (4, 8 or 16 bytes) and where the row fits an SM's shared memory (227 KB
    on Hopper, less the reduction's buffers).\"\"\"
    if not (keep and p["prefetch"]):
        return 0
    if p["stage"] == 3:  # in registers
        return 3
    if vec * itemsize < 4:
        return 0
    return p["stage"] if per * p["threads"] * vec * itemsize <= STAGE_BYTES else 0


def _ke_exps_kept(stage):
    \"\"\"The staging of a kernel whose exps replace the row in float32 registers (cross-entropy,
    the two-exchange softmax): shared memory then registers (1) or none.\"\"\"
    return 1 if stage in (1, 2) else 0


def _ke_launch_of(x):
    \"\"\"Everything a kernel is compiled with for the rows ``x`` (2-d): its plan, whether every
    kept vector lies inside the row (no bounds tests), and the kernel's parameters.\"\"\"
    rows, n = x.shape
    p = _ke_params(rows, n, x.dtype)
    vec, per, keep, cluster = _ke_plan(n, x.element_size(), rows, p)
    even = keep and n // vec == per * p["threads"] * cluster
    stage = _ke_stage(p, vec, per, keep, x.element_size())
    return (vec, per, keep, cluster, even, p["threads"], p["prefetch"], p["online"],
            p["exchange"], stage, p["occupancy"], p["order"] if cluster > 1 else 0,
            p["pack"] if cluster > 1 and p["exchange"] else 0, p["cache"], p["reread"])


@cute.jit
def _ke_send(value, slot, mbar, peer):
    \"\"\"``value`` (a float) into ``slot`` of CTA ``peer`` of the cluster, counted by that
    CTA's mbarrier ``mbar``: an ``st.async``, with no barrier and no fence.\"\"\"
    to = cutlass.Int32(cute.arch.map_dsmem_ptr(slot, peer).toint())
    bar = cutlass.Int32(cute.arch.map_dsmem_ptr(mbar, peer).toint())
    cute.arch.inline_ptx(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 "
        "[{{$r0}}], {{$r1}}, [{{$r2}}];",
        read_only_args=[to, cutlass.Float32(value), bar],
    )


@cute.jit
def _ke_send_pair(a, b, slot, mbar, peer):
    \"\"\"The pair (``a``, ``b``) into ``slot`` and the float after it in CTA ``peer``, as one
    64-bit ``st.async`` counted by that CTA's mbarrier ``mbar`` (QuACK packs its online
    softmax's max and sum so).\"\"\"
    to = cutlass.Int32(cute.arch.map_dsmem_ptr(slot, peer).toint())
    bar = cutlass.Int32(cute.arch.map_dsmem_ptr(mbar, peer).toint())
    both = vector.from_elements(
        T.vector(2, T.f32()), [cutlass.Float32(a).ir_value(), cutlass.Float32(b).ir_value()]
    )
    cute.arch.inline_ptx(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [{{$r0}}], {{$r1}}, [{{$r2}}];",
        read_only_args=[to, cutlass.Int64(llvm.bitcast(T.i64(), both)), bar],
    )


@cute.jit
def _ke_post(values, xch, cluster: cutlass.Constexpr, threads: cutlass.Constexpr):
    \"\"\"Each warp's ``values`` (equal over its lanes) to its slots in every CTA of the cluster;
    returns once this CTA has received every CTA's (its mbarrier counted the bytes). The first
    exchange waits for the cluster to have started: the preamble initialised the mbarriers.
    A pair is sent as one 64-bit store where ``xch`` packs (its values side by side, slot
    ``2 i`` and ``2 i + 1``; else value ``v`` of slot ``i`` is at ``i + v width``).\"\"\"
    xbuf, mbar, stage, pack = xch
    tidx, _, _ = cute.arch.thread_idx()
    warps = threads // 32
    width = warps * cluster
    base = stage * 2 * width
    if cutlass.const_expr(stage == 0):
        cute.arch.cluster_wait()
    if tidx == 0:
        cute.arch.mbarrier_arrive_and_expect_tx(mbar + stage, len(values) * width * 4)
    lane = tidx % 32
    if lane < cluster:
        at = (tidx // 32) * cluster + cute.arch.block_idx_in_cluster()
        if cutlass.const_expr(pack and len(values) == 2):
            _ke_send_pair(values[0], values[1], xbuf.iterator + (base + 2 * at), mbar + stage, lane)
        else:
            for v in cutlass.range_constexpr(len(values)):
                _ke_send(values[v], xbuf.iterator + (base + at + v * width), mbar + stage, lane)
    cute.arch.mbarrier_wait(mbar + stage, 0)
    return base, width


@cute.jit
def _ke_xreduce(value, op, identity, xch, cluster: cutlass.Constexpr, threads: cutlass.Constexpr):
    \"\"\"``value`` combined over the cluster without a cluster barrier (an exchange as QuACK
    does it): each warp's value goes straight to every CTA (``_ke_post``), and each warp
    combines all of them, a lane per slot, then by shuffles.\"\"\"
    value = cute.arch.warp_reduction(value, op)
    base, width = _ke_post((value,), xch, cluster, threads)
    lane = cute.arch.thread_idx()[0] % 32
    total = identity
    for i in cutlass.range_constexpr((width + 31) // 32):
        if lane + i * 32 < width:
            total = op(total, xch[0][base + lane + i * 32])
    return cute.arch.warp_reduction(total, op)


@cute.jit
def _ke_reduce(value, op, smem, slot, identity, cluster: cutlass.Constexpr, xch,
               threads: cutlass.Constexpr):
    \"\"\"``value`` combined over the CTA (a warp shuffle, then the warps' partials in shared
    memory) and, with a cluster, over its CTAs through distributed shared memory; every thread
    gets the result. ``xch`` (buffer, mbarriers, stage) where the cluster exchanges by
    ``st.async`` (``exchange``), else None (two cluster barriers).\"\"\"
    tidx, _, _ = cute.arch.thread_idx()
    if cutlass.const_expr(cluster > 1 and xch is not None):
        total = _ke_xreduce(value, op, identity, xch, cluster, threads)
    else:
        value = cute.arch.warp_reduction(value, op)
        cute.arch.sync_threads()
        if tidx % 32 == 0:
            smem[tidx // 32] = value
        cute.arch.sync_threads()
        total = identity
        for w in cutlass.range_constexpr(threads // 32):
            total = op(total, smem[w])
        if cutlass.const_expr(cluster > 1):
            if tidx == 0:
                cute.make_tensor(slot, cute.make_layout(1))[0] = total
            cute.arch.cluster_arrive()
            cute.arch.cluster_wait()
            total = identity
            for r in cutlass.range_constexpr(cluster):
                remote = cute.arch.map_dsmem_ptr(slot, r)
                total = op(total, cutlass.Float32(llvm.load(T.f32(), remote.to_llvm_ptr())))
            # every CTA has read every slot before any CTA writes its slot again (or exits);
            # the reads are used above, so they are done: a relaxed arrive (no GPU-wide
            # barrier)
            cute.arch.cluster_arrive_relaxed(aligned=True)
            cute.arch.cluster_wait()
    return total


def _ke_fmax(a, b):
    \"\"\"max(a, b) in one FMNMX that keeps a NaN (a NaN in the row makes its softmax NaN).\"\"\"
    return cute.arch.fmax(a, b, nan=True)


def _ke_exp(x):
    \"\"\"exp(x) as one multiply and the hardware's approximate exp2 (MUFU.EX2), as QuACK does:
    the precise expf is ~10 instructions an element, which made long bf16 rows issue-bound.\"\"\"
    return cute.math.exp2(x * LOG2E, fastmath=True)


@cute.jit
def _ke_merge(m1, s1, m2, s2):
    \"\"\"Two (max, sum of exp(x - max)) pairs as one.\"\"\"
    m = _ke_fmax(m1, m2)
    return m, s1 * _ke_exp(m1 - m) + s2 * _ke_exp(m2 - m)


@cute.jit
def _ke_pair_shuffle(top, acc):
    for i in cutlass.range_constexpr(5):
        other_top = cute.arch.shuffle_sync_bfly(top, offset=16 >> i)
        other_acc = cute.arch.shuffle_sync_bfly(acc, offset=16 >> i)
        top, acc = _ke_merge(top, acc, other_top, other_acc)
    return top, acc


@cute.jit
def _ke_reduce_pair(top, acc, smem, smem2, slot, slot2, lowest, cluster: cutlass.Constexpr,
                    xch, threads: cutlass.Constexpr, warp_agrees: cutlass.Constexpr):
    \"\"\"The row's (max, sum of exp(x - max)) from each thread's, merged over the warp, the CTA
    and the cluster in one exchange (an online softmax's); every thread gets the result.
    ``warp_agrees``: the pair is already the warp's (no merge over the warp first).\"\"\"
    tidx, _, _ = cute.arch.thread_idx()
    if cutlass.const_expr(not warp_agrees):
        top, acc = _ke_pair_shuffle(top, acc)
    if cutlass.const_expr(cluster > 1 and xch is not None):
        base, width = _ke_post((top, acc), xch, cluster, threads)
        lane = tidx % 32
        top = lowest
        acc = cutlass.Float32(0.0)
        for i in cutlass.range_constexpr((width + 31) // 32):
            if lane + i * 32 < width:
                at = lane + i * 32
                if cutlass.const_expr(xch[3]):
                    far_top, far_acc = xch[0][base + 2 * at], xch[0][base + 2 * at + 1]
                else:
                    far_top, far_acc = xch[0][base + at], xch[0][base + at + width]
                top, acc = _ke_merge(top, acc, far_top, far_acc)
        top, acc = _ke_pair_shuffle(top, acc)
    else:
        cute.arch.sync_threads()
        if tidx % 32 == 0:
            smem[tidx // 32] = top
            smem2[tidx // 32] = acc
        cute.arch.sync_threads()
        top = lowest
        acc = cutlass.Float32(0.0)
        for w in cutlass.range_constexpr(threads // 32):
            top, acc = _ke_merge(top, acc, smem[w], smem2[w])
        if cutlass.const_expr(cluster > 1):
            if tidx == 0:
                cute.make_tensor(slot, cute.make_layout(1))[0] = top
                cute.make_tensor(slot2, cute.make_layout(1))[0] = acc
            cute.arch.cluster_arrive()
            cute.arch.cluster_wait()
            top = lowest
            acc = cutlass.Float32(0.0)
            for r in cutlass.range_constexpr(cluster):
                far_top = llvm.load(T.f32(), cute.arch.map_dsmem_ptr(slot, r).to_llvm_ptr())
                far_acc = llvm.load(T.f32(), cute.arch.map_dsmem_ptr(slot2, r).to_llvm_ptr())
                top, acc = _ke_merge(top, acc, cutlass.Float32(far_top), cutlass.Float32(far_acc))
            # every CTA has read every slot before any CTA exits (the reads are used above, so
            # they are done: no release needed, and no GPU-wide memory barrier)
            cute.arch.cluster_arrive_relaxed(aligned=True)
            cute.arch.cluster_wait()
    return top, acc


@cute.jit
def _ke_where(cluster: cutlass.Constexpr, order: cutlass.Constexpr):
    \"\"\"(the row, this CTA's rank in its cluster) of one CTA or one cluster per row.\"\"\"
    if cutlass.const_expr(cluster > 1 and order):
        row, cta, _ = cute.arch.block_idx()
        return row, cta
    if cutlass.const_expr(cluster > 1):
        cta, row, _ = cute.arch.block_idx()
        return row, cta
    row, _, _ = cute.arch.block_idx()
    return row, 0


def _ke_inside(j, nvec, even):
    \"\"\"Whether the kept vector ``j`` lies in the row: always, where the row fills every thread
    (``even``: the test is not compiled, a branch a vector less).\"\"\"
    return True if even else j < nvec


def _ke_hinted(g, vec, hint, load):
    \"\"\"A copy atom for one vector of ``g`` with a streaming cache hint (``ld.global.cs``
    where ``load``, else ``st.global.cs``), or None (no hint: the compiler's own vector copy).\"\"\"
    if not hint:
        return None
    bits = vec * g.element_type.width
    if load:
        mode = cute.nvgpu.LoadCacheMode.STREAMING
        return cute.make_copy_atom(cute.nvgpu.CopyG2ROp(), g.element_type,
                                   num_bits_per_copy=bits, load_cache_mode=mode)
    mode = cute.nvgpu.StoreCacheMode.STREAMING
    return cute.make_copy_atom(cute.nvgpu.CopyR2GOp(), g.element_type, num_bits_per_copy=bits,
                               store_cache_mode=mode)


def _ke_kept_in_l2(g, vec):
    \"\"\"A copy atom for one vector of ``g`` whose loads keep it in L2 (an evict-last policy
    made by ``createpolicy``), with the policy: for a row read again later.\"\"\"
    atom = cute.make_copy_atom(cute.nvgpu.CopyG2ROp(), g.element_type,
                               num_bits_per_copy=vec * g.element_type.width)
    policy = cute.arch.inline_ptx(
        "createpolicy.fractional.L2::evict_last.b64 {{$w0}}, 1.0;",
        write_only_types=[cutlass.Int64],
    )
    return atom, policy


def _ke_global(rows, g, vec):
    \"\"\"``rows`` (vectors of ``g``) with its address in the global space, as the hinted and
    the asynchronous copies need (a host tensor traced for a compile-only check comes in as a
    generic one).\"\"\"
    ptr = cute.make_ptr(g.element_type, rows.iterator.toint(), cute.AddressSpace.gmem,
                        assumed_align=vec * g.element_type.width // 8)
    return cute.make_tensor(ptr, rows.layout)


def _ke_load(tile, dtype, ld=None):
    \"\"\"The vector ``tile`` in float32, loaded by ``ld`` (a copy atom, or an atom and its
    cache policy), else the compiler's own vector copy.\"\"\"
    frag = cute.make_rmem_tensor((cute.size(tile),), dtype)
    if ld is None:
        cute.autovec_copy(tile, frag)
    elif isinstance(ld, tuple):
        cute.copy(ld[0], tile, frag, cache_policy=ld[1])
    else:
        cute.copy(ld, tile, frag)
    return frag.load().to(cutlass.Float32)


def _ke_raw(tile, ld=None):
    frag = cute.make_rmem_tensor((cute.size(tile),), tile.element_type)
    if ld is None:
        cute.autovec_copy(tile, frag)
    else:
        cute.copy(ld, tile, frag)
    return frag.load()


def _ke_kept(staged, k, at, dtype):
    \"\"\"The row's k-th kept vector from where it is kept in its own dtype (``staged``: shared
    memory, at slot ``at``; or registers, at ``k``), in float32.\"\"\"
    row, in_smem = staged
    return _ke_load(row[(None, at if in_smem else k)], dtype)


def _ke_first(regs, k, tile, dtype, prefetch, staged=None, at=None, ld=None):
    \"\"\"The row's k-th kept vector: from where it is kept in its own dtype and read again at
    each use (``staged``), from the registers the prefetch filled, else loaded now.\"\"\"
    if staged is not None:
        return _ke_kept(staged, k, at, dtype)
    if prefetch:
        return regs[None, k].load()
    v = _ke_load(tile, dtype, ld)
    regs[None, k].store(v)
    return v


def _ke_reread(staged):
    \"\"\"Before a kept row is read again from where it is kept in its own dtype: in shared
    memory, an empty asm that clobbers memory, so that no compiler keeps the first read in
    registers instead (none did without it, with the DSL 4.8.1; this keeps it so); in
    registers, ``_ke_launder``.\"\"\"
    if staged is not None and staged[1]:
        llvm.inline_asm(None, [], "", "~{{memory}}", has_side_effects=True)
    _ke_launder(staged)


def _ke_launder(staged):
    \"\"\"A row kept in registers in its own dtype passed word by word through an asm ``mov``
    the compiler cannot see through: each later use converts it again, where ptxas would
    otherwise keep the first conversion's float32 values live (RMSNorm over 262,144 bf16
    columns, 64 a thread: 121 registers without it, 81 with it).\"\"\"
    if staged is not None and not staged[1]:
        words = cute.recast_tensor(staged[0], cutlass.Int32)
        for i in range(cute.size(words)):
            word = words[i].ir_value()
            words[i] = cutlass.Int32(
                llvm.inline_asm(T.i32(), [word], "mov.b32 $0, $1;", "=r,r", has_side_effects=True)
            )


def _ke_again(regs, k, staged, at, dtype):
    \"\"\"The row's k-th kept vector once more: from where it is kept in its own dtype
    (``staged``), else the float32 registers.\"\"\"
    if staged is not None:
        return _ke_kept(staged, k, at, dtype)
    return regs[None, k].load()


def _ke_store(value, tile, st=None):
    out = cute.make_rmem_tensor((cute.size(tile),), tile.element_type)
    out.store(value.to(tile.element_type))
    if st is None:
        cute.autovec_copy(out, tile)
    else:
        cute.copy(st, out, tile)


_COMPILED = {{}}


def _ke_run(jit_fn, x, tensors, scalars):
    \"\"\"Run ``jit_fn`` on the rows ``x`` (2-d, contiguous), ``tensors`` after it (the output
    last) and ``scalars``, on the current stream: compiled once per shape with its plan.\"\"\"
    launch = _ke_launch_of(x)
    align = launch[0] * x.element_size()
    if x.data_ptr() % align:  # a view that starts inside a vector: copy it
        x = x.clone()
    stream = torch.cuda.current_stream(x.device).cuda_stream if x.is_cuda else 0
    args = [from_dlpack(t, assumed_align=align) for t in (x, *tensors)]
    args += [*scalars, cuda.CUstream(stream)]
    key = (jit_fn.__name__, x.dtype, tuple(x.shape), x.device.type)
    fn = _COMPILED.get(key)
    if fn is None:
        fn = _COMPILED[key] = cute.compile(jit_fn, *args, launch)
    fn(*args)


@cute.jit
def _ke_launch(kernel, rows, launch: cutlass.Constexpr, stream):
    cluster, threads, occupancy = launch[3], launch[5], launch[10]
    # at least ``occupancy`` CTAs an SM (nvvm.minctasm: ptxas fits the registers to them); the
    # shared memory carve-out is given so that the compile asks no device for it
    fit = {{"min_blocks_per_mp": occupancy, "preferred_smem_carveout": 100}} if occupancy else {{}}
    if cutlass.const_expr(cluster > 1 and launch[11]):  # the cluster along y
        kernel.launch(grid=(rows, cluster, 1), block=(threads, 1, 1), cluster=(1, cluster, 1),
                      stream=stream, **fit)
    elif cutlass.const_expr(cluster > 1):
        kernel.launch(grid=(cluster, rows, 1), block=(threads, 1, 1), cluster=(cluster, 1, 1),
                      stream=stream, **fit)
    else:
        kernel.launch(grid=(rows, 1, 1), block=(threads, 1, 1), stream=stream, **fit)
"""

_PREAMBLE = """
    vec, per, keep, cluster, even, threads, prefetch, online, exchange, stage, _ = launch[:11]
    order, pack, cache, reread = launch[11:]
    tidx, _, _ = cute.arch.thread_idx()
    row, cta = _ke_where(cluster, order)
    n = cute.size(g_x, mode=[1])
    nvec = n // vec
    first = cta * (per * threads) + tidx
    x_row = cute.zipped_divide(g_x[row, None], (vec,))
    ld = _ke_hinted(g_x, vec, cache & 1, True)
    # a row read again from global memory: the reads but the last keep it in L2 (``ld_keep``)
    ld_keep = ld
    if cutlass.const_expr(reread):
        ld = _ke_hinted(g_x, vec, 1, True)
        ld_keep = _ke_kept_in_l2(g_x, vec)
    if cutlass.const_expr(ld is not None):
        x_row = _ke_global(x_row, g_x, vec)
    smem = cutlass.memory.SmemAllocator()
    partial = smem.allocate_tensor(cutlass.Float32, cute.make_layout(threads // 32), 16)
    slot = smem.allocate_array(cutlass.Float32, 1, byte_alignment=16)
    regs = cute.make_rmem_tensor((vec, per if keep else 1), cutlass.Float32)
    xch0 = None
    xch1 = None
    if cutlass.const_expr(cluster > 1 and exchange):
        # two stages of (two values of each warp of each CTA), and an mbarrier a stage
        xbuf = smem.allocate_tensor(
            cutlass.Float32, cute.make_layout(4 * (threads // 32) * cluster), 16
        )
        mbar = smem.allocate_array(cutlass.Int64, 2, byte_alignment=8)
        if tidx < 2:
            cute.arch.mbarrier_init(mbar + tidx, 1)
        cute.arch.mbarrier_init_fence()
        cute.arch.cluster_arrive_relaxed()
        xch0 = (xbuf, mbar, 0, pack)
        xch1 = (xbuf, mbar, 1, pack)"""
_PREAMBLE_Y = (
    _PREAMBLE
    + """
    y_row = cute.zipped_divide(g_y[row, None], (vec,))
    st = _ke_hinted(g_y, vec, cache & 2, False)
    if cutlass.const_expr(st is not None):
        y_row = _ke_global(y_row, g_y, vec)"""
)

_PREFETCH = """
    staged = None
    if cutlass.const_expr(stage == 3):
        # the row kept in registers in its own dtype (a bf16 row in half the registers of
        # float32), converted at each use
        raw = cute.make_rmem_tensor((vec, per), g_x.element_type)
        for k in cutlass.range_constexpr(per):
            jp = first + k * threads
            if _ke_inside(jp, nvec, even):
                raw[None, k].store(_ke_raw(x_row[(None, jp)], ld))
        staged = (raw, False)
    elif cutlass.const_expr(stage):
        # the row into shared memory by cp.async (no register waits on a load), then from there
        # into the registers (1), or read from there at each use (2: QuACK's load path; the
        # registers hold no row across the reduction, so more CTAs fit an SM)
        x_smem = smem.allocate_tensor(
            g_x.element_type, cute.make_layout((vec, per * threads)), 16
        )
        # .cg (cached in L2 only) where the row is read streaming
        mode = cpasync.LoadCacheMode.GLOBAL if cache & 1 else cpasync.LoadCacheMode.ALWAYS
        g2s = cute.make_copy_atom(
            cpasync.CopyG2SOp(mode), g_x.element_type,
            num_bits_per_copy=vec * g_x.element_type.width,
        )
        x_global = _ke_global(x_row, g_x, vec)
        for k in cutlass.range_constexpr(per):
            jp = first + k * threads
            if _ke_inside(jp, nvec, even):
                cute.copy(g2s, x_global[(None, jp)], x_smem[(None, k * threads + tidx)])
        cute.arch.cp_async_commit_group()
        cute.arch.cp_async_wait_group(0)
        if cutlass.const_expr(stage == 2):
            staged = (x_smem, True)
        else:
            for k in cutlass.range_constexpr(per):
                jp = first + k * threads
                if _ke_inside(jp, nvec, even):
                    v = _ke_load(x_smem[(None, k * threads + tidx)], g_x.element_type)
                    regs[None, k].store(v)
    elif cutlass.const_expr(keep and prefetch):
        # every load of the row in flight before the first use of any
        for k in cutlass.range_constexpr(per):
            jp = first + k * threads
            if cutlass.const_expr(even):
                regs[None, k].store(_ke_load(x_row[(None, jp)], g_x.element_type, ld))
            else:
                if jp < nvec:
                    regs[None, k].store(_ke_load(x_row[(None, jp)], g_x.element_type, ld))"""


def _prefetch_vector(name):
    """A kept row's vector parameter (the weight, the bias) loaded whole in its own dtype right
    after the row, so its loads overlap the reduction instead of following it; only where it
    costs at most 32 registers a thread."""
    return f"""
    {name}_keep = keep and prefetch and per * vec * g_{name}.element_type.width <= 1024
    {name}_regs = cute.make_rmem_tensor((vec, per if {name}_keep else 1), g_{name}.element_type)
    if cutlass.const_expr({name}_keep):
        for k in cutlass.range_constexpr(per):
            jp = first + k * threads
            if cutlass.const_expr(even):
                {name}_regs[None, k].store(_ke_raw({name}_all[(None, jp)]))
            else:
                if jp < nvec:
                    {name}_regs[None, k].store(_ke_raw({name}_all[(None, jp)]))"""


def _kept_vector(name):
    """``name`` set to the k-th vector of a kept row's vector parameter (in float32), from its
    registers or loaded now."""
    pad = " " * 16
    return (
        f"\n{pad}if cutlass.const_expr({name}_keep):\n"
        f"{pad}    {name} = {name}_regs[None, k].load().to(cutlass.Float32)\n"
        f"{pad}else:\n"
        f"{pad}    {name} = _ke_load({name}_all[(None, j)], g_{name}.element_type)"
    )


def _kept_exps(indent: int, shift: str, body: list[str]) -> str:
    """A kept softmax row's exps against the warp's max ``top``, then ``body`` with each as
    ``e``: one FFMA and MUFU.EX2 (``x log2 e - top log2 e``) unless ``top log2 e`` would
    overflow float32 (a row masked with the dtype's lowest value), where the FFMA form gives
    NaN and the subtract-then-multiply form is used. The branch (uniform over the warp) holds
    the whole loop, so each form is one loop."""
    pad = " " * indent

    def loop(exp: str) -> str:
        lines = [
            "for k in cutlass.range_constexpr(per):",
            "    j = first + k * threads",
            "    if _ke_inside(j, nvec, even):",
            "        v = _ke_again(regs, k, staged, k * threads + tidx, g_x.element_type)",
            f"        e = {exp}",
            *("        " + line for line in body),
        ]
        return "".join(f"\n{pad}    {line}" for line in lines)

    return (
        f"\n{pad}if top > SHIFT_SAFE:"
        f"\n{pad}    # exp(x - top) as ex2(x * log2 e - top * log2 e): one FFMA and MUFU.EX2"
        f"\n{pad}    {shift} = top * LOG2E"
        + loop(f"cute.math.exp2(v * LOG2E - {shift}, fastmath=True)")
        + f"\n{pad}else:"
        f"\n{pad}    # top * log2 e would overflow (a row masked with the dtype's lowest value)"
        + loop("_ke_exp(v - top)")
    )


_RMS = (
    """

@cute.kernel
def _ke_rms_kernel(g_x: cute.Tensor, g_w: cute.Tensor, g_y: cute.Tensor, eps: cutlass.Float32,
                   launch: cutlass.Constexpr):"""
    + _PREAMBLE_Y
    + """
    w_all = cute.zipped_divide(g_w, (vec,))
    regs.fill(0.0)"""
    + _PREFETCH
    + _prefetch_vector("w")
    + """
    acc = cutlass.Float32(0.0)
    if cutlass.const_expr(keep):
        for k in cutlass.range_constexpr(per):
            j = first + k * threads
            if _ke_inside(j, nvec, even):
                at = k * threads + tidx
                v = _ke_first(regs, k, x_row[(None, j)], g_x.element_type, prefetch, staged, at, ld)
                acc = acc + (v * v).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
    else:
        for k in cutlass.range(per, unroll=4):
            j1 = first + k * threads
            if j1 < nvec:
                v1 = _ke_load(x_row[(None, j1)], g_x.element_type, ld_keep)
                acc = acc + (v1 * v1).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
    zero = cutlass.Float32(0.0)
    total = _ke_reduce(acc, operator.add, partial, slot, zero, cluster, xch0, threads)
    rstd = cute.math.rsqrt(total / cutlass.Float32(n) + eps)
    _ke_reread(staged)
    if cutlass.const_expr(keep):
        for k in cutlass.range_constexpr(per):
            j = first + k * threads
            if _ke_inside(j, nvec, even):
                v = _ke_again(regs, k, staged, k * threads + tidx, g_x.element_type)"""
    + _kept_vector("w")
    + """
                _ke_store(v * rstd * w, y_row[(None, j)], st)
    else:
        for k in cutlass.range(per, unroll=4):
            j2 = first + k * threads
            if j2 < nvec:
                v2 = _ke_load(x_row[(None, j2)], g_x.element_type, ld)
                w2 = _ke_load(w_all[(None, j2)], g_w.element_type)
                _ke_store(v2 * rstd * w2, y_row[(None, j2)], st)


@cute.jit
def _ke_rms(g_x: cute.Tensor, g_w: cute.Tensor, g_y: cute.Tensor, eps: cutlass.Float32,
            stream: cuda.CUstream, launch: cutlass.Constexpr):
    kernel = _ke_rms_kernel(g_x, g_w, g_y, eps, launch)
    _ke_launch(kernel, cute.size(g_x, mode=[0]), launch, stream)
"""
)

_LAYER = (
    """

@cute.kernel
def _ke_layer_kernel(g_x: cute.Tensor, g_w: cute.Tensor, g_b: cute.Tensor, g_y: cute.Tensor,
                     eps: cutlass.Float32, launch: cutlass.Constexpr):"""
    + _PREAMBLE_Y
    + """
    w_all = cute.zipped_divide(g_w, (vec,))
    b_all = cute.zipped_divide(g_b, (vec,))
    regs.fill(0.0)"""
    + _PREFETCH
    + _prefetch_vector("w")
    + _prefetch_vector("b")
    + """
    acc = cutlass.Float32(0.0)
    if cutlass.const_expr(keep):
        for k in cutlass.range_constexpr(per):
            j = first + k * threads
            if _ke_inside(j, nvec, even):
                at = k * threads + tidx
                v = _ke_first(regs, k, x_row[(None, j)], g_x.element_type, prefetch, staged, at, ld)
                acc = acc + v.reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
    else:
        for k in cutlass.range(per, unroll=4):
            j1 = first + k * threads
            if j1 < nvec:
                v1 = _ke_load(x_row[(None, j1)], g_x.element_type, ld_keep)
                acc = acc + v1.reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
    zero = cutlass.Float32(0.0)
    mean = _ke_reduce(acc, operator.add, partial, slot, zero, cluster, xch0, threads)
    mean = mean / cutlass.Float32(n)
    _ke_reread(staged)
    acc = cutlass.Float32(0.0)
    if cutlass.const_expr(keep):
        for k in cutlass.range_constexpr(per):
            j = first + k * threads
            if _ke_inside(j, nvec, even):
                d = _ke_again(regs, k, staged, k * threads + tidx, g_x.element_type) - mean
                acc = acc + (d * d).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
    else:
        for k in cutlass.range(per, unroll=4):
            j2 = first + k * threads
            if j2 < nvec:
                d2 = _ke_load(x_row[(None, j2)], g_x.element_type, ld_keep) - mean
                acc = acc + (d2 * d2).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
    var = _ke_reduce(acc, operator.add, partial, slot, zero, cluster, xch1, threads)
    rstd = cute.math.rsqrt(var / cutlass.Float32(n) + eps)
    _ke_reread(staged)
    if cutlass.const_expr(keep):
        for k in cutlass.range_constexpr(per):
            j = first + k * threads
            if _ke_inside(j, nvec, even):"""
    + _kept_vector("w")
    + _kept_vector("b")
    + """
                v = _ke_again(regs, k, staged, k * threads + tidx, g_x.element_type)
                _ke_store((v - mean) * rstd * w + b, y_row[(None, j)], st)
    else:
        for k in cutlass.range(per, unroll=4):
            j3 = first + k * threads
            if j3 < nvec:
                v3 = _ke_load(x_row[(None, j3)], g_x.element_type, ld)
                w3 = _ke_load(w_all[(None, j3)], g_w.element_type)
                b3 = _ke_load(b_all[(None, j3)], g_b.element_type)
                _ke_store((v3 - mean) * rstd * w3 + b3, y_row[(None, j3)], st)


@cute.jit
def _ke_layer(g_x: cute.Tensor, g_w: cute.Tensor, g_b: cute.Tensor, g_y: cute.Tensor,
              eps: cutlass.Float32, stream: cuda.CUstream, launch: cutlass.Constexpr):
    kernel = _ke_layer_kernel(g_x, g_w, g_b, g_y, eps, launch)
    _ke_launch(kernel, cute.size(g_x, mode=[0]), launch, stream)
"""
)

_SOFTMAX = (
    """

@cute.kernel
def _ke_softmax_kernel(g_x: cute.Tensor, g_y: cute.Tensor, launch: cutlass.Constexpr):"""
    + _PREAMBLE_Y
    + """
    partial2 = smem.allocate_tensor(cutlass.Float32, cute.make_layout(threads // 32), 16)
    slot2 = smem.allocate_array(cutlass.Float32, 1, byte_alignment=16)
    lowest = cutlass.Float32(LOWEST if online else -math.inf)
    regs.fill(lowest)
    # 2 and 3 (online only): the row is read from shared memory (2) or from registers in its
    # own dtype (3) for the max and again for the output, its exps computed twice (no float32
    # row in registers across the exchange); otherwise the exps replace the row in the
    # registers
    stage = stage if online else _ke_exps_kept(stage)"""
    + _PREFETCH
    + """
    top = lowest
    if cutlass.const_expr(keep):
        for k in cutlass.range_constexpr(per):
            j = first + k * threads
            if _ke_inside(j, nvec, even):
                at = k * threads + tidx
                v = _ke_first(regs, k, x_row[(None, j)], g_x.element_type, prefetch, staged, at, ld)
                top = cute.arch.fmax(top, v.reduce(cute.ReductionOp.MAX, lowest, 0), nan=True)
        if cutlass.const_expr(online):
            # the exps are taken against the warp's max: the pairs then agree over the warp and
            # merge without an exp a shuffle
            top = cute.arch.warp_reduction(top, _ke_fmax)
            _ke_launder(staged)  # a row kept in registers is converted again for its exps
    else:
        if cutlass.const_expr(not online):
            for k in cutlass.range(per, unroll=4):
                j3 = first + k * threads
                if j3 < nvec:
                    v3 = _ke_load(x_row[(None, j3)], g_x.element_type, ld_keep)
                    top = cute.math.max(top, v3.reduce(cute.ReductionOp.MAX, lowest, 0))
    # A kept row's exp is computed once: it replaces the row in the registers, and the output
    # is that times one scale per thread.
    if cutlass.const_expr(online):
        # each thread's (max, sum of exp(x - max)), then one exchange of the pairs
        acc = cutlass.Float32(0.0)
        if cutlass.const_expr(keep):"""
    + _kept_exps(
        12,
        "shift",
        [
            "if cutlass.const_expr(staged is None):",
            "    regs[None, k].store(e)",
            "acc = acc + e.reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)",
        ],
    )
    + """
            acc = cute.arch.warp_reduction(acc, operator.add)
        else:
            for k in cutlass.range(per, unroll=4):
                j6 = first + k * threads
                if j6 < nvec:
                    v6 = _ke_load(x_row[(None, j6)], g_x.element_type, ld_keep)
                    t6 = cute.math.max(top, v6.reduce(cute.ReductionOp.MAX, lowest, 0))
                    e6 = _ke_exp(v6 - t6)
                    acc = acc * _ke_exp(top - t6) + e6.reduce(
                        cute.ReductionOp.ADD, cutlass.Float32(0.0), 0
                    )
                    top = t6
        row_top, acc = _ke_reduce_pair(
            top, acc, partial, partial2, slot, slot2, lowest, cluster, xch0, threads, keep
        )
        inv = cutlass.Float32(1.0) / acc
        # the kept exps are relative to this thread's max (its warp's, for a kept row)
        scale = _ke_exp(top - row_top) * inv
    else:
        row_top = _ke_reduce(
            top, cute.math.max, partial, slot, lowest, cluster, xch0, threads
        )
        acc = cutlass.Float32(0.0)
        if cutlass.const_expr(keep):
            for k in cutlass.range_constexpr(per):
                j = first + k * threads
                if _ke_inside(j, nvec, even):
                    e = _ke_exp(regs[None, k].load() - row_top)
                    regs[None, k].store(e)
                    acc = acc + e.reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
        else:
            for k in cutlass.range(per, unroll=4):
                j4 = first + k * threads
                if j4 < nvec:
                    v4 = _ke_load(x_row[(None, j4)], g_x.element_type, ld_keep)
                    e4 = _ke_exp(v4 - row_top)
                    acc = acc + e4.reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
        inv = cutlass.Float32(1.0) / _ke_reduce(
            acc, operator.add, partial, slot, cutlass.Float32(0.0), cluster, xch1, threads
        )
        scale = inv
    if cutlass.const_expr(keep and staged is not None):
        # the exps again, from the row where it is kept in its own dtype (shared memory, or
        # registers)
        _ke_reread(staged)"""
    + _kept_exps(8, "shift2", ["_ke_store(e * scale, y_row[(None, j)], st)"])
    + """
    elif cutlass.const_expr(keep):
        for k in cutlass.range_constexpr(per):
            j = first + k * threads
            if _ke_inside(j, nvec, even):
                _ke_store(regs[None, k].load() * scale, y_row[(None, j)], st)
    else:
        for k in cutlass.range(per, unroll=4):
            j5 = first + k * threads
            if j5 < nvec:
                v5 = _ke_load(x_row[(None, j5)], g_x.element_type, ld)
                _ke_store(_ke_exp(v5 - row_top) * inv, y_row[(None, j5)], st)


@cute.jit
def _ke_softmax(g_x: cute.Tensor, g_y: cute.Tensor, stream: cuda.CUstream,
                launch: cutlass.Constexpr):
    kernel = _ke_softmax_kernel(g_x, g_y, launch)
    _ke_launch(kernel, cute.size(g_x, mode=[0]), launch, stream)
"""
)

_CE = (
    """

@cute.kernel
def _ke_ce_kernel(g_x: cute.Tensor, g_t: cute.Tensor, g_loss: cute.Tensor, g_valid: cute.Tensor,
                  launch: cutlass.Constexpr, ignore: cutlass.Constexpr,
                  smooth: cutlass.Constexpr):"""
    + _PREAMBLE
    + """
    partial2 = smem.allocate_tensor(cutlass.Float32, cute.make_layout(threads // 32), 16)
    slot2 = smem.allocate_array(cutlass.Float32, 1, byte_alignment=16)
    lowest = cutlass.Float32(LOWEST)
    regs.fill(lowest)
    stage = _ke_exps_kept(stage)  # a kept row stays in the registers"""
    + _PREFETCH
    + """
    top = lowest
    acc = cutlass.Float32(0.0)
    total = cutlass.Float32(0.0)  # the row's sum of logits, for label smoothing
    if cutlass.const_expr(keep):
        for k in cutlass.range_constexpr(per):
            j = first + k * threads
            if _ke_inside(j, nvec, even):
                v = _ke_first(regs, k, x_row[(None, j)], g_x.element_type, prefetch, ld=ld)
                top = cute.math.max(top, v.reduce(cute.ReductionOp.MAX, lowest, 0))
                if cutlass.const_expr(smooth > 0):
                    total = total + v.reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
        for k in cutlass.range_constexpr(per):
            j = first + k * threads
            if _ke_inside(j, nvec, even):
                e = _ke_exp(regs[None, k].load() - top)
                acc = acc + e.reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
    else:
        for k in cutlass.range(per, unroll=4):
            j1 = first + k * threads
            if j1 < nvec:
                v1 = _ke_load(x_row[(None, j1)], g_x.element_type, ld)
                t1 = cute.math.max(top, v1.reduce(cute.ReductionOp.MAX, lowest, 0))
                e1 = _ke_exp(v1 - t1)
                acc = acc * _ke_exp(top - t1) + e1.reduce(
                    cute.ReductionOp.ADD, cutlass.Float32(0.0), 0
                )
                top = t1
                if cutlass.const_expr(smooth > 0):
                    total = total + v1.reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
    top, acc = _ke_reduce_pair(
        top, acc, partial, partial2, slot, slot2, lowest, cluster, xch0, threads, False
    )
    if cutlass.const_expr(smooth > 0):
        total = _ke_reduce(
            total, operator.add, partial, slot, cutlass.Float32(0.0), cluster, xch1, threads
        )
    lse = top + cute.math.log(acc)
    if tidx + cta * threads == 0:  # the row's first thread writes its loss
        target = g_t[row]
        loss = cutlass.Float32(0.0)
        ok = cutlass.Float32(0.0)
        if target != ignore:
            x_t = g_x[row, cutlass.Int32(target)].to(cutlass.Float32)
            # label smoothing e: (1 - e)(lse - x_t) + e (lse - mean x)
            loss = lse - cutlass.Float32(1.0 - smooth) * x_t
            loss = loss - cutlass.Float32(smooth) * total / cutlass.Float32(n)
            ok = cutlass.Float32(1.0)
        g_loss[row] = loss
        g_valid[row] = ok


@cute.kernel
def _ke_ce_sum_kernel(g_loss: cute.Tensor, g_valid: cute.Tensor, g_out: cute.Tensor,
                      mean: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    rows = cute.size(g_loss, mode=[0])
    smem = cutlass.memory.SmemAllocator()
    partial = smem.allocate_tensor(cutlass.Float32, cute.make_layout(THREADS // 32), 16)
    slot = smem.allocate_array(cutlass.Float32, 1, byte_alignment=16)
    part = cutlass.Float32(0.0)
    seen = cutlass.Float32(0.0)
    for i in cutlass.range(tidx, rows, THREADS):
        part = part + g_loss[i]
        seen = seen + g_valid[i]
    zero = cutlass.Float32(0.0)
    whole = _ke_reduce(part, operator.add, partial, slot, zero, 1, None, THREADS)
    count = _ke_reduce(seen, operator.add, partial, slot, zero, 1, None, THREADS)
    if tidx == 0:
        if cutlass.const_expr(mean):
            g_out[0] = (whole / count).to(g_out.element_type)
        else:
            g_out[0] = whole.to(g_out.element_type)


@cute.jit
def _ke_ce(g_x: cute.Tensor, g_t: cute.Tensor, g_loss: cute.Tensor, g_valid: cute.Tensor,
           stream: cuda.CUstream, launch: cutlass.Constexpr, ignore: cutlass.Constexpr,
           smooth: cutlass.Constexpr):
    kernel = _ke_ce_kernel(g_x, g_t, g_loss, g_valid, launch, ignore, smooth)
    _ke_launch(kernel, cute.size(g_x, mode=[0]), launch, stream)


@cute.jit
def _ke_ce_sum(g_loss: cute.Tensor, g_valid: cute.Tensor, g_out: cute.Tensor,
               stream: cuda.CUstream, mean: cutlass.Constexpr):
    _ke_ce_sum_kernel(g_loss, g_valid, g_out, mean).launch(grid=(1, 1, 1), block=(THREADS, 1, 1),
                                                          stream=stream)


def _ke_ce_run(x, t, out, ignore, smooth, mean):
    \"\"\"The cross-entropy of the rows ``x`` (2-d, contiguous) against ``t`` into ``out`` (one
    element): a loss per row, then one CTA sums them (and counts the rows not ignored).\"\"\"
    rows = x.shape[0]
    # a zero-row call still sums (0 / 0: NaN for a mean, as torch gives)
    make = torch.empty if rows else torch.zeros
    loss = make(max(rows, 1), dtype=torch.float32, device=x.device)
    valid = make(max(rows, 1), dtype=torch.float32, device=x.device)
    stream = cuda.CUstream(torch.cuda.current_stream(x.device).cuda_stream if x.is_cuda else 0)
    if rows and x.shape[1]:
        launch = _ke_launch_of(x)
        align = launch[0] * x.element_size()
        if x.data_ptr() % align:
            x = x.clone()
        args = [from_dlpack(x, assumed_align=align)]
        args += [from_dlpack(a) for a in (t, loss, valid)] + [stream]
        key = ("ce", x.dtype, tuple(x.shape), x.device.type, ignore, smooth)
        fn = _COMPILED.get(key)
        if fn is None:
            fn = _COMPILED[key] = cute.compile(_ke_ce, *args, launch, ignore, smooth)
        fn(*args)
    args = [from_dlpack(a) for a in (loss, valid, out.view(1))] + [stream]
    key = ("ce_sum", out.dtype, loss.shape[0], x.device.type, mean)
    fn = _COMPILED.get(key)
    if fn is None:
        fn = _COMPILED[key] = cute.compile(_ke_ce_sum, *args, mean)
    fn(*args)
"""
)

_MODEL_RMS = """

class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty_like(x2)
        if x2.numel():
            w = self.weight.detach().to(x.dtype).contiguous()
            _ke_run(_ke_rms, x2, (w, y), (cutlass.Float32(self.eps),))
        return y.reshape(x.shape)
"""

_MODEL_SOFTMAX = """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty_like(x2)
        if x2.numel():
            _ke_run(_ke_softmax, x2, (y,), ())
        return y.reshape(x.shape)
"""

_MODEL_LAYER = """

class ModelNew(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x2 = x.reshape(-1, x.shape[-1]).contiguous()
        y = torch.empty_like(x2)
        if x2.numel():
            w = self.norm.weight.detach().to(x.dtype).contiguous()
            b = self.norm.bias.detach().to(x.dtype).contiguous()
            _ke_run(_ke_layer, x2, (w, b, y), (cutlass.Float32(self.norm.eps),))
        return y.reshape(x.shape)
"""

_MODEL_CE = """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x2 = logits.reshape(-1, logits.shape[-1]).contiguous()
        out = torch.empty((), dtype=x2.dtype, device=x2.device)
        _ke_ce_run(x2, targets.reshape(-1).contiguous(), out, -100, 0.0, True)
        return out
"""

_PARTS = {
    "cross_entropy": ("Cross-entropy of rows of logits", _CE, _MODEL_CE),
    "rms_norm": ("RMSNorm", _RMS, _MODEL_RMS),
    "softmax": ("Softmax over the last dimension", _SOFTMAX, _MODEL_SOFTMAX),
    "layer_norm": ("LayerNorm", _LAYER, _MODEL_LAYER),
}


def render(op: str, params: dict | None = None, *, model: str | None = None) -> str:
    """A complete cute candidate for the catalog problem ``op`` with launch ``params``;
    ``model`` replaces the catalog problem's ``ModelNew`` (the cute generator writes one with
    the reference's own constructor)."""
    if op not in _PARTS:
        raise ValueError(f"no CuTe row template for {op!r} (have {', '.join(OPS)})")
    p = {**DEFAULTS, **(params or {})}
    _check(p)
    table = {}
    for key, entry in sorted((p.get("table") or {}).items()):
        if not isinstance(entry, dict) or set(entry) - set(SPACE):
            raise ValueError(f"table[{key!r}]: a dict of {', '.join(SPACE)}")
        _check(entry)
        table[str(key)] = {k: int(v) for k, v in entry.items()}
    title, kernel, default = _PARTS[op]
    head = _HEAD.format(title=title, table=_table_text(table), **{k: p[k] for k in SPACE})
    return head + kernel + (default if model is None else model)


def _check(params: dict) -> None:
    for name, allowed in SPACE.items():
        if name in params and params[name] not in allowed:
            raise ValueError(f"{name}={params[name]!r}: one of {allowed}")


def _table_text(table: dict) -> str:
    if not table:
        return "{}"
    lines = [f"    {key!r}: {entry!r}," for key, entry in table.items()]
    return "{\n" + "\n".join(lines) + "\n}"


def main(argv=None) -> int:
    """``python -m workers.search.generators.templates.cute_row rms_norm --threads 128 >
    cand.py``: a candidate to evaluate (``python -m workers evaluate ... --candidate cand.py``)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("op", choices=OPS)
    for name, allowed in SPACE.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, choices=allowed,
                            default=DEFAULTS[name])  # fmt: skip
    parser.add_argument(
        "--table",
        help='launch parameters per case shape, as JSON {"rows,n,dtype": {"threads": 128, ...}} '
        "or the path of a tuner report (workers/search/tune_cute.py)",
    )
    args = parser.parse_args(argv)
    params = {name: getattr(args, name) for name in SPACE}
    if args.table:
        import json
        import os

        text = open(args.table).read() if os.path.exists(args.table) else args.table
        try:
            table = json.loads(text)
        except ValueError as exc:
            parser.error(f"--table: not JSON ({exc})")
        params["table"] = table["table"] if isinstance(table.get("table"), dict) else table
    try:
        print(render(args.op, params), end="")
    except ValueError as exc:
        parser.error(str(exc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
