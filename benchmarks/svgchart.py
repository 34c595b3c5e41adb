"""A small log-log line chart written as SVG text by hand (no plotting dependency)."""

from __future__ import annotations

import math
from dataclasses import dataclass

WIDTH, HEIGHT = 640, 380
LEFT, RIGHT, TOP, BOTTOM = 70, 170, 40, 50  # margins around the plot area
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b")


@dataclass
class Series:
    label: str
    points: list[tuple[float, float]]  # (x, y), both > 0
    dashed: bool = False


def _ticks(low: float, high: float) -> list[float]:
    """1, 2, 5 times powers of ten inside [low, high]."""
    out = []
    for exponent in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1):
        for m in (1, 2, 5):
            v = m * 10.0 ** exponent
            if low <= v <= high:
                out.append(v)
    return out


def _label(v: float, powers: bool = False) -> str:
    """``1e4`` for a power of ten on the x axis; plain ``2,000`` or ``0.5`` otherwise."""
    if powers:
        return f"1e{round(math.log10(v))}"
    return f"{v:,.0f}" if v >= 1 else f"{v:g}"


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def line_chart(series: list[Series], title: str, x_label: str, y_label: str) -> str:
    xs = [x for s in series for x, _ in s.points]
    ys = [y for s in series for _, y in s.points]
    x0, x1 = min(xs), max(xs)
    # whole decades, with room so no line runs along the frame
    y0 = 10.0 ** math.floor(math.log10(min(ys) / 1.5))
    y1 = 10.0 ** math.ceil(math.log10(max(ys) * 1.5))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        span = math.log10(x1) - math.log10(x0) or 1.0
        return LEFT + (math.log10(x) - math.log10(x0)) / span * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - (math.log10(y) - math.log10(y0)) / (
            math.log10(y1) - math.log10(y0)) * plot_h

    parts = [
        (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">'),
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        (f'<text x="{WIDTH / 2:.0f}" y="22" text-anchor="middle" font-size="14">'
        f"{_escape(title)}</text>"),
    ]
    for x in [x for x in _ticks(x0, x1) if math.isclose(math.log10(x) % 1, 0, abs_tol=1e-9)]:
        parts.append(f'<line x1="{px(x):.1f}" y1="{TOP}" x2="{px(x):.1f}" '
                     f'y2="{TOP + plot_h}" stroke="#e0e0e0"/>')
        parts.append(f'<text x="{px(x):.1f}" y="{TOP + plot_h + 18}" text-anchor="middle">'
                     f"{_label(x, powers=True)}</text>")
    for y in _ticks(y0, y1):
        parts.append(f'<line x1="{LEFT}" y1="{py(y):.1f}" x2="{LEFT + plot_w}" '
                     f'y2="{py(y):.1f}" stroke="#e0e0e0"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end">'
                     f"{_label(y)}</text>")
    parts += [
        (f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="#444"/>'),
        (f'<text x="{LEFT + plot_w / 2:.0f}" y="{HEIGHT - 12}" text-anchor="middle">'
        f"{_escape(x_label)}</text>"),
        (f'<text transform="translate(18 {TOP + plot_h / 2:.0f}) rotate(-90)" '
        f'text-anchor="middle">{_escape(y_label)}</text>'),
    ]
    for i, s in enumerate(series):
        color = "#555" if s.dashed else COLORS[i % len(COLORS)]
        points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s.points)
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        parts.append(f'<polyline points="{points}" fill="none" stroke="{color}" '
                     f'stroke-width="2"{dash}/>')
        if not s.dashed:
            parts += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3.5" fill="{color}"/>'
                      for x, y in s.points]
        ly = TOP + 14 + 20 * i
        lx = LEFT + plot_w + 14
        parts.append(f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 24}" y2="{ly - 4}" '
                     f'stroke="{color}" stroke-width="2"{dash}/>')
        parts.append(f'<text x="{lx + 30}" y="{ly}">{_escape(s.label)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
