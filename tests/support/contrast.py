"""WCAG contrast of two CSS colours as a browser reports them (``rgb(r, g, b)``)."""

import re


def luminance(rgb: str) -> float:
    """Relative luminance of ``rgb(r, g, b)`` / ``rgba(...)``."""
    r, g, b = (int(v) / 255 for v in re.findall(r"\d+", rgb)[:3])

    def lin(c):
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b)


def contrast(a: str, b: str) -> float:
    """The contrast ratio (1 to 21) between two colours."""
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)
