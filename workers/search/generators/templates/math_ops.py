"""Pointwise math the Triton language has no single call for, written from its core ops so
that a kernel computes the same on the GPU and under the interpreter (``libdevice`` has no
interpreter implementation: its calls return nothing there).

``MATH_EXPR`` gives each op's kernel expression over its arguments' names; ``helpers(ops)`` the
``@triton.jit`` functions those expressions call, written once at the top of a candidate.
Accuracy against torch's float32 over random and edge values (the correctness gate's
infinities and 1e4-scaled inputs included): about 1 ulp for tanh, atan, atan2, erfinv, hypot,
log1p and expm1; round is exact (half to even).
"""

from __future__ import annotations

_INF = 'float("inf")'
_LN2 = "0.6931471805599453"

_SOURCE = """
@triton.jit
def _ke_log1p(x):
    # log(1 + x) without losing x where it is small (Kahan): the rounding of 1 + x cancels.
    u = 1.0 + x
    return tl.where(u == 1.0, x, tl.where(u == float("inf"), u, tl.log(u) * (x / (u - 1.0))))


@triton.jit
def _ke_expm1(x):
    # exp(x) - 1 without losing x where it is small (Kahan); above, no cancellation.
    u = tl.exp(x)
    d = u - 1.0
    small = tl.where(u == 1.0, x, d * (x / tl.log(u)))
    return tl.where(tl.abs(x) < 0.5, small, d)


@triton.jit
def _ke_tanh(x):
    # Cephes' tanhf: an odd polynomial below 0.625 (no cancellation near 0), else
    # 1 - 2 / (e^2|x| + 1), which keeps the last bits near +-1.
    a = tl.abs(x)
    z = x * x
    p = (((-5.70498872745e-3 * z + 2.06390887954e-2) * z - 5.37397155531e-2) * z
         + 1.33314422036e-1) * z - 3.33332819422e-1
    big = 1.0 - 2.0 / (tl.exp(2.0 * a) + 1.0)
    return tl.where(a < 0.625, x + x * z * p, tl.where(x < 0.0, -big, big))


@triton.jit
def _ke_atan(x):
    # Cephes' atanf: reduced to [0, tan(pi/8)], then an odd polynomial (about 1 ulp).
    a = tl.abs(x)
    big = a > 2.414213562373095
    mid = a > 0.4142135623730950
    t = tl.where(big, -1.0 / a, tl.where(mid, (a - 1.0) / (a + 1.0), a))
    y0 = tl.where(big, 1.5707963267948966, tl.where(mid, 0.7853981633974483, 0.0))
    z = t * t
    p = (((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z
         - 3.33329491539e-1) * z * t + t
    r = y0 + p
    return tl.where(x < 0.0, -r, tl.where(x == x, r, x))


@triton.jit
def _ke_atan2(y, x):
    # atan(y / x) placed in its quadrant by the signs (of zeros too, as torch: atan2(0, -0) is
    # pi); both infinite: the corner's diagonal.
    pi = 3.141592653589793
    sy = (y < 0.0) | ((y == 0.0) & (1.0 / y < 0.0))
    sx = (x < 0.0) | ((x == 0.0) & (1.0 / x < 0.0))
    r = _ke_atan(y / x)
    r = tl.where(sx, tl.where(sy, r - pi, r + pi), r)
    both_inf = (tl.abs(x) == float("inf")) & (tl.abs(y) == float("inf"))
    zero = (x == 0.0) & (y == 0.0)
    mag = tl.where(zero, tl.where(sx, pi, 0.0), tl.where(sx, 2.356194490192345,
                                                          0.7853981633974483))
    r = tl.where(zero | both_inf, tl.where(sy, -mag, mag), r)
    return tl.where((x != x) | (y != y), x + y, r)


@triton.jit
def _ke_erfinv(x):
    # Giles' single-precision approximation (2010).
    w = -tl.log((1.0 - x) * (1.0 + x))
    lo = w < 5.0
    wl = w - 2.5
    pl = 2.81022636e-08
    pl = 3.43273939e-07 + pl * wl
    pl = -3.5233877e-06 + pl * wl
    pl = -4.39150654e-06 + pl * wl
    pl = 0.00021858087 + pl * wl
    pl = -0.00125372503 + pl * wl
    pl = -0.00417768164 + pl * wl
    pl = 0.246640727 + pl * wl
    pl = 1.50140941 + pl * wl
    wh = tl.sqrt(w) - 3.0
    ph = -0.000200214257
    ph = 0.000100950558 + ph * wh
    ph = 0.00134934322 + ph * wh
    ph = -0.00367342844 + ph * wh
    ph = 0.00573950773 + ph * wh
    ph = -0.0076224613 + ph * wh
    ph = 0.00943887047 + ph * wh
    ph = 1.00167406 + ph * wh
    ph = 2.83297682 + ph * wh
    r = tl.where(lo, pl, ph) * x
    return tl.where(tl.abs(x) == 1.0, x * float("inf"), r)


@triton.jit
def _ke_hypot(x, y):
    # sqrt(x^2 + y^2) scaled by the larger, so neither square overflows; inf wins over NaN.
    a = tl.abs(x)
    b = tl.abs(y)
    hi = tl.maximum(a, b)
    lo = tl.minimum(a, b)
    r = lo / hi
    h = tl.where(hi == 0.0, 0.0, hi * tl.sqrt(1.0 + r * r))
    h = tl.where((a != a) | (b != b), a + b, h)
    return tl.where((a == float("inf")) | (b == float("inf")), float("inf"), h)


@triton.jit
def _ke_fmod(x, y):
    # C's fmod (the dividend's sign), exact: libdevice's on a GPU (Triton's float % there is
    # x - trunc(x / y) * y, off by y where the quotient rounds); numpy's fmod when interpreted.
    if _KE_INTERPRETED:
        return x % y
    else:
        return _ke_libdevice.fmod(x, y)


@triton.jit
def _ke_round(x):
    # Half to even, as torch.round: x - floor(x) is exact below 2^23, where floats stop
    # having fractions.
    f = tl.floor(x)
    d = x - f
    even = f * 0.5 == tl.floor(f * 0.5)
    r = tl.where(d > 0.5, f + 1.0, tl.where(d < 0.5, f, tl.where(even, f, f + 1.0)))
    return tl.where(tl.abs(x) >= 8388608.0, x, r)
"""
# name -> its source, in the order written (callees before their callers)
_HELPERS = {
    block.split("def ", 1)[1].split("(", 1)[0]: "@triton.jit\n" + block.strip() + "\n"
    for block in _SOURCE.split("@triton.jit")
    if block.strip()
}
# Module-level lines a helper reads (the interpreter has no libdevice: its calls return None).
_PREAMBLE = {
    "_ke_fmod": (
        "import os as _ke_os\n\n"
        "from triton.language.extra import libdevice as _ke_libdevice\n\n"
        '_KE_INTERPRETED = tl.constexpr(_ke_os.environ.get("TRITON_INTERPRET", "0") == "1")\n'
    )
}


def _signbit(y: str) -> str:
    return f"(({y} < 0.0) | (({y} == 0.0) & (1.0 / {y} < 0.0)))"


def _sinh(x: str) -> str:
    series = (
        f"{x} * (1.0 + {x} * {x} * (1.0 / 6.0 + {x} * {x} * (1.0 / 120.0 + {x} * {x} / 5040.0)))"
    )
    halves = f"tl.exp(tl.abs({x}) - {_LN2}) - tl.exp(-tl.abs({x}) - {_LN2})"
    return f"tl.where(tl.abs({x}) < 0.5, {series}, tl.where({x} < 0.0, -1.0, 1.0) * ({halves}))"


def _asinh(x: str) -> str:
    a = f"tl.abs({x})"
    small = f"_ke_log1p({a} + {x} * {x} / (1.0 + tl.sqrt(1.0 + {x} * {x})))"
    big = f"tl.log({a}) + {_LN2}"
    return f"tl.where({x} < 0.0, -1.0, 1.0) * tl.where({a} > 1e8, {big}, {small})"


def _remainder(x: str, y: str) -> str:
    r = f"_ke_fmod({x}, {y})"
    return f"tl.where(({r} != 0.0) & (({r} < 0.0) != ({y} < 0.0)), {r} + {y}, {r})"


def _fmax(x: str, y: str, pick: str) -> str:
    return f"tl.where({x} != {x}, {y}, tl.where({y} != {y}, {x}, tl.{pick}({x}, {y})))"


MATH_EXPR = {
    "eq": lambda a: f"{a[0]} == {a[1]}",
    "ne": lambda a: f"{a[0]} != {a[1]}",
    "and": lambda a: f"{a[0]} & {a[1]}",
    "or": lambda a: f"{a[0]} | {a[1]}",
    "xor": lambda a: f"{a[0]} ^ {a[1]}",
    "not": lambda a: f"{a[0]} == 0",
    "isnan": lambda a: f"{a[0]} != {a[0]}",
    "floor": lambda a: f"tl.floor({a[0]})",
    "ceil": lambda a: f"tl.ceil({a[0]})",
    "trunc": lambda a: f"tl.where({a[0]} < 0.0, tl.ceil({a[0]}), tl.floor({a[0]}))",
    "round": lambda a: f"_ke_round({a[0]})",
    "round_mul": lambda a: f"_ke_round({a[0]} * {a[1]}) / {a[1]}",  # decimals >= 0
    "round_div": lambda a: f"_ke_round({a[0]} / {a[1]}) * {a[1]}",  # decimals < 0
    "log1p": lambda a: f"_ke_log1p({a[0]})",
    "expm1": lambda a: f"_ke_expm1({a[0]})",
    "log10": lambda a: f"tl.log({a[0]}) * 0.4342944819032518",
    "erfc": lambda a: f"1.0 - tl.erf({a[0]})",
    "erfinv": lambda a: f"_ke_erfinv({a[0]})",
    "tan": lambda a: f"tl.sin({a[0]}) / tl.cos({a[0]})",
    "tanh": lambda a: f"_ke_tanh({a[0]})",
    # e^|x| / 2 without overflowing where e^|x| alone would (|x| in (88.7, 89.4])
    "cosh": lambda a: f"tl.exp(tl.abs({a[0]}) - {_LN2}) + tl.exp(-tl.abs({a[0]}) - {_LN2})",
    "sinh": lambda a: _sinh(a[0]),
    "asinh": lambda a: _asinh(a[0]),
    "acosh": lambda a: (
        f"tl.where({a[0]} > 1e8, tl.log({a[0]}) + {_LN2}, "
        f"_ke_log1p(({a[0]} - 1.0) + tl.sqrt(({a[0]} - 1.0) * ({a[0]} + 1.0))))"
    ),
    "atanh": lambda a: f"0.5 * _ke_log1p(2.0 * {a[0]} / (1.0 - {a[0]}))",
    "atan": lambda a: f"_ke_atan({a[0]})",
    "atan2": lambda a: f"_ke_atan2({a[0]}, {a[1]})",
    "asin": lambda a: f"_ke_atan({a[0]} / tl.sqrt((1.0 - {a[0]}) * (1.0 + {a[0]})))",
    "acos": lambda a: f"2.0 * _ke_atan(tl.sqrt((1.0 - {a[0]}) / (1.0 + {a[0]})))",
    "hypot": lambda a: f"_ke_hypot({a[0]}, {a[1]})",
    "fmod": lambda a: f"_ke_fmod({a[0]}, {a[1]})",
    "remainder": lambda a: _remainder(a[0], a[1]),  # Python's: the divisor's sign
    "fmax": lambda a: _fmax(a[0], a[1], "maximum"),
    "fmin": lambda a: _fmax(a[0], a[1], "minimum"),
    "signbit": lambda a: _signbit(a[0]),
    "copysign": lambda a: f"tl.where({_signbit(a[1])}, -tl.abs({a[0]}), tl.abs({a[0]}))",
    # torch's: the value where x is 0, else 0 below zero or for NaN, 1 above
    "heaviside": lambda a: (
        f"tl.where({a[0]} == 0.0, {a[1]}, tl.where(({a[0]} < 0.0) | ({a[0]} != {a[0]}), 0.0, 1.0))"
    ),
    "xlog1py": lambda a: (
        f"tl.where({a[1]} != {a[1]}, {a[1]}, "
        f"tl.where({a[0]} == 0.0, 0.0, {a[0]} * _ke_log1p({a[1]})))"
    ),
    # a number >= 0 to the power of x (pow(2.0, x)); 0 ** x: 1 at 0, 0 above, inf below
    "pow_base": lambda a: (
        f"tl.where({a[0]} == 0.0, tl.where({a[1]} == 0.0, 1.0, tl.where({a[1]} > 0.0, 0.0, "
        f"{_INF})), tl.exp2({a[1]} * tl.log2({a[0]})))"
    ),
}


def helpers(ops) -> str:
    """The helper functions the expressions of ``ops`` call, each once, callees first."""
    calls = set()
    for op in ops:
        expr = MATH_EXPR.get(op)
        if expr is not None:
            text = expr(["x", "y", "z"])
            calls |= {name for name in _HELPERS if name + "(" in text}
    for name in list(calls):  # and the helpers those call (atan2 calls atan)
        calls |= {o for o in _HELPERS if o != name and o + "(" in _HELPERS[name]}
    preamble = "".join(_PREAMBLE[name] + "\n\n" for name in _PREAMBLE if name in calls)
    return preamble + "".join(_HELPERS[name] + "\n\n" for name in _HELPERS if name in calls)
