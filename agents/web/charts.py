"""Small inline SVG charts: a build's tier climb and a backpass funnel with its alarm line.

Only numbers and fixed labels reach the SVG, and every label is escaped, so
nothing a poster wrote can become markup. No script, no library: a chart is
a few rectangles and a polyline the page draws at first paint.
"""

from __future__ import annotations

from html import escape
from typing import Any

W, H, PAD = 360, 140, 28


def _num(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if number == number and abs(number) != float("inf") else 0.0


def tier_climb(iterations: list[dict[str, Any]]) -> str:
    """Tests passing per grind iteration, as a line over the total, one colour band per tier."""
    if not iterations:
        return ""
    total = max(1.0, *(_num(i.get("total")) for i in iterations))
    n = len(iterations)
    step = (W - 2 * PAD) / max(1, n - 1)
    points, marks = [], []
    for index, item in enumerate(iterations):
        x = PAD + index * step
        y = H - PAD - (_num(item.get("passing")) / total) * (H - 2 * PAD)
        points.append(f"{x:.1f},{y:.1f}")
        label = escape(
            f"tier {item.get('tier', '?')} · iteration {item.get('iteration', index + 1)}: "
            f"{int(_num(item.get('passing')))}/{int(_num(item.get('total')))} passing"
        )
        marks.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3"><title>{label}</title></circle>')
    top = H - PAD - (H - 2 * PAD)
    return (
        f'<svg class="chart tier" viewBox="0 0 {W} {H}" role="img" '
        f'aria-label="tests passing per iteration">'
        f'<line class="goal" x1="{PAD}" y1="{top}" x2="{W - PAD}" y2="{top}"/>'
        f'<text x="{W - PAD}" y="{top - 4}" text-anchor="end">{int(total)} total</text>'
        f'<polyline points="{" ".join(points)}"/>{"".join(marks)}'
        f'<text x="{PAD}" y="{H - 8}">iteration 1</text>'
        f'<text x="{W - PAD}" y="{H - 8}" text-anchor="end">{n}</text></svg>'
    )


FUNNEL_BARS = (
    ("traces_found", "traces"),
    ("traces_analyzed", "analysed"),
    ("items_returned", "items"),
    ("items_dropped", "dropped"),
    ("items_kept", "kept"),
    ("new_lines", "new lines"),
    ("corroborations", "corroborated"),
)


def funnel(data: dict[str, Any]) -> str:
    """The funnel's counts as bars, and the drop rate against its alarm line."""
    counts = [(label, _num(data.get(key))) for key, label in FUNNEL_BARS]
    biggest = max(1.0, *(value for _, value in counts))
    bar_w = (W - 2 * PAD) / len(counts)
    bars = []
    for index, (label, value) in enumerate(counts):
        height = value / biggest * (H - 2 * PAD)
        x = PAD + index * bar_w
        bars.append(
            f'<rect x="{x + 2:.1f}" y="{H - PAD - height:.1f}" width="{bar_w - 4:.1f}" '
            f'height="{height:.1f}"><title>{escape(label)}: {int(value)}</title></rect>'
            f'<text x="{x + bar_w / 2:.1f}" y="{H - PAD + 12}" text-anchor="middle">'
            f"{escape(label)}</text>"
        )
    rate, alarm = _num(data.get("drop_rate")), _num(data.get("drop_warn_rate") or 0.10)
    scale = max(alarm * 2, rate, 0.01)
    rate_w = rate / scale * (W - 2 * PAD)
    alarm_x = PAD + alarm / scale * (W - 2 * PAD)
    alarmed = " alarm" if rate > alarm else ""
    return (
        f'<svg class="chart funnel" viewBox="0 0 {W} {H + 40}" role="img" '
        f'aria-label="backpass funnel">{"".join(bars)}'
        f'<rect class="rate{alarmed}" x="{PAD}" y="{H + 8}" width="{rate_w:.1f}" height="12"/>'
        f'<line class="alarm-line" x1="{alarm_x:.1f}" y1="{H + 2}" x2="{alarm_x:.1f}" y2="{H + 26}"/>'
        f'<text x="{PAD}" y="{H + 36}">drop rate {rate:.1%} · alarm above {alarm:.0%}</text></svg>'
    )


def per_day(days: list[tuple[str, float, float]]) -> str:
    """Tokens per UTC day as stacked bars (in below, out above), one per day, with titles."""
    if not days:
        return ""
    biggest = max(1.0, *(_num(i) + _num(o) for _, i, o in days))
    bar_w = (W - 2 * PAD) / len(days)
    bars = []
    for index, (day, tokens_in, tokens_out) in enumerate(days):
        x = PAD + index * bar_w
        h_in = _num(tokens_in) / biggest * (H - 2 * PAD)
        h_out = _num(tokens_out) / biggest * (H - 2 * PAD)
        label = escape(f"{day}: {int(_num(tokens_in))} in, {int(_num(tokens_out))} out")
        bars.append(
            f'<g class="day"><title>{label}</title>'
            f'<rect class="in" x="{x + 2:.1f}" y="{H - PAD - h_in:.1f}" '
            f'width="{max(1.0, bar_w - 4):.1f}" height="{h_in:.1f}"/>'
            f'<rect class="out" x="{x + 2:.1f}" y="{H - PAD - h_in - h_out:.1f}" '
            f'width="{max(1.0, bar_w - 4):.1f}" height="{h_out:.1f}"/></g>'
        )
    first, last = escape(days[0][0]), escape(days[-1][0])
    return (
        f'<svg class="chart days" viewBox="0 0 {W} {H}" role="img" '
        f'aria-label="tokens per day">{"".join(bars)}'
        f'<text x="{PAD}" y="{H - 8}">{first}</text>'
        f'<text x="{W - PAD}" y="{H - 8}" text-anchor="end">{last}</text>'
        f'<text x="{PAD}" y="{PAD - 8}">{int(biggest)} tokens</text></svg>'
    )
