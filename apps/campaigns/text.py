"""Plain values as a reader wants them: numbers at 3 significant digits in free text, region
scopes and GPU targets in words, and distinct labels for compiled kernels and their IR stages.

Pure functions of their arguments (no database); templates reach them through the `readable`
template filters, selectors call them directly.
"""

import re

# A decimal with more digits than anyone reads (e.g. a CI printed by repr: 7.481234567890123).
_LONG_DECIMAL = re.compile(r"(?<![\w.])(-?\d+\.\d{4,})(?:[eE]([-+]?\d+))?(?![\w.])")

IR_STAGES = {
    "ttir": "Triton IR (TTIR)",
    "ttgir": "Triton GPU IR (TTGIR)",
    "llir": "LLVM IR",
    "ptx": "PTX",
}


def sig3(value: float) -> str:
    """A number at 3 significant digits, without exponents for everyday sizes."""
    if value == 0 or 1e-4 <= abs(value) < 1e3:
        return f"{value:.3g}"
    if 1e3 <= abs(value) < 1e7:
        return f"{value:.0f}"
    return f"{value:.2e}"


def numbers_readable(text: str) -> str:
    """Free text with every long decimal rounded to 3 significant digits."""
    if not text:
        return text

    def short(match: re.Match) -> str:
        return sig3(float(match.group(0)))

    return _LONG_DECIMAL.sub(short, str(text))


def gpu_target(target) -> str:
    """``["cuda", 90, 64]`` as ``sm_90``; anything else as given (or "—")."""
    if isinstance(target, list | tuple) and len(target) >= 2 and target[0] == "cuda":
        return f"sm_{target[1]}"
    if isinstance(target, list | tuple) and len(target) >= 2:
        return f"{target[0]} {target[1]}"
    return str(target) if target else "—"


def scope_text(scope: dict | None) -> str:
    """A region's scope in words: dtypes, constant ranges, and each input's dimension ranges."""
    if not isinstance(scope, dict) or not scope:
        return "—"
    parts = []
    dtypes = scope.get("dtypes") or []
    if dtypes:
        parts.append(", ".join(dtypes))
    for name, span in sorted((scope.get("constants") or {}).items()):
        lo, hi = (list(span) + [None, None])[:2]
        parts.append(f"{name} {lo}" if lo == hi else f"{name} {lo}–{hi}")
    for i, dims in enumerate(scope.get("inputs") or [], start=1):
        if not dims:
            parts.append(f"input {i}: any shape")
            continue
        shape = " × ".join(str(lo) if lo == hi else f"{lo}–{hi}" for lo, hi in dims)
        parts.append(f"input {i}: {shape}")
    return " · ".join(parts) if parts else "—"


def specialisation_labels(artifacts: list[dict]) -> list[str]:
    """One label per compiled specialisation, distinct even when a kernel was compiled several
    times: its name, then what differs (constexprs, options, argument dtypes), then its number."""

    def spec(a: dict) -> str:
        bits = [f"{k}={v}" for k, v in sorted((a.get("constexprs") or {}).items())]
        bits += [f"{k}={v}" for k, v in sorted((a.get("options") or {}).items())]
        dtypes = [t for t in (a.get("signature") or {}).values() if t != "constexpr"]
        if dtypes:
            bits.append("(" + ", ".join(dtypes) + ")")
        return " ".join(bits)

    names = [a.get("kernel", "kernel") for a in artifacts]
    specs = [spec(a) for a in artifacts]
    labels = []
    for i, (name, s) in enumerate(zip(names, specs, strict=True)):
        same_name = [j for j, n in enumerate(names) if n == name]
        label = name if len(same_name) == 1 else f"{name} [{s}]" if s else name
        twins = [j for j in same_name if specs[j] == s]
        if len(same_name) > 1 and len(twins) > 1:
            label += f" #{twins.index(i) + 1} of {len(twins)}"
        labels.append(label)
    return labels


def scaled_text(scaled: dict | None) -> str:
    """What the interpreter shrank in a case (``{"orig": ..., "used": ...}``), e.g.
    ``dim 4096 → 1024``; "" when it ran the shapes asked."""
    if not isinstance(scaled, dict):
        return ""
    orig, used = scaled.get("orig") or {}, scaled.get("used") or {}
    return ", ".join(f"{k} {v} → {used.get(k)}" for k, v in orig.items() if k in used)
