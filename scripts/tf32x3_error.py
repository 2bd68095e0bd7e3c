"""How far ``tf32x3`` float32 products land from the exact product, emulated on the CPU, beside
IEEE float32 (issue 11; the matmul template's ``fp32_dot``).

Each operand is split as Hopper's ``cvt.rna.tf32`` does (round to nearest, ties away, 10
mantissa bits): ``hi = tf32(x)``, ``lo = tf32(x - hi)``; the product is ``lo_a @ hi_b + hi_a @
lo_b + hi_a @ hi_b``, each product of two TF32 values exact in float32 and summed in float32, as
the tensor cores do. The worst error is reported against a float64 reference, as a fraction of
the default float32 tolerance (atol + rtol * |ref|, both 1e-4): under 1 passes the correctness
gate without its allowance.

    python scripts/tf32x3_error.py            # the shapes below, a table on stdout
"""

from __future__ import annotations

import argparse

import torch

TOL = 1e-4
# (name, M, K, N, input distribution): KernelBench's nn.Linear layers (randn inputs, the
# layer's uniform(-1/sqrt(K), 1/sqrt(K)) weights, M cut to fit this machine) and its level-1
# products of uniform [0, 1) matrices (all terms positive: large sums, no cancellation).
SHAPES = [
    ("L2 linear 8192 -> 8192", 128, 8192, 1024, "linear"),
    ("L2 linear 16384 -> 16384", 64, 16384, 512, "linear"),
    ("L1 square 4096 (rand)", 128, 4096, 1024, "rand"),
    ("L1 large K 131072 (rand)", 32, 131072, 64, "rand"),
]


def tf32(x: torch.Tensor) -> torch.Tensor:
    """Round float32 to TF32 (10 mantissa bits), to nearest with ties away from zero."""
    bits = x.contiguous().view(torch.int32)
    rounded = (bits + 0x1000) & ~0x1FFF  # sign-magnitude: adding half an ulp rounds away
    return rounded.view(torch.float32)


def tf32x3(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a_hi, b_hi = tf32(a), tf32(b)
    a_lo, b_lo = tf32(a - a_hi), tf32(b - b_hi)
    return a_lo @ b_hi + a_hi @ b_lo + a_hi @ b_hi


def used(out: torch.Tensor, ref: torch.Tensor) -> tuple[float, float]:
    """(max abs error, max fraction of the tolerance used)."""
    err = (out.double() - ref).abs()
    return float(err.max()), float((err / (TOL + TOL * ref.abs())).max())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    g = torch.Generator().manual_seed(args.seed)
    print("| shape | M x K x N | fp32 max abs err | fp32 of tol | tf32x3 max abs err "
          "| tf32x3 of tol | one TF32 product of tol |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for name, m, k, n, dist in SHAPES:
        if dist == "linear":
            a = torch.randn(m, k, generator=g)
            bound = k**-0.5
            b = (torch.rand(k, n, generator=g) * 2 - 1) * bound
        else:
            a, b = torch.rand(m, k, generator=g), torch.rand(k, n, generator=g)
        ref = a.double() @ b.double()
        e32, f32 = used(a @ b, ref)
        e3, f3 = used(tf32x3(a, b), ref)
        _, f1 = used(tf32(a) @ tf32(b), ref)
        print(
            f"| {name} | {m} x {k} x {n} | {e32:.3g} | {f32:.4f} | {e3:.3g} | {f3:.4f} | {f1:.4f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
