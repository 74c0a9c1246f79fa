"""The failures chart: a ``FailureHistogram`` as stacked SVG bars, drawn on the server.

``failure_chart(histogram)`` gives every rectangle's place, size and color (one color per
errorCode, the same on every page) and the axis labels; the template only writes them
out, so the page needs no script and no inline style.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from llamon_agent.a2a.stores.failures import FailureHistogram
from llamon_agent.core.codes import ErrorCode

__all__ = ["CODE_COLORS", "Bar", "Chart", "failure_chart"]

CODE_COLORS: Final = {
    ErrorCode.INVALID_INPUT.value: "#e6a23c",
    ErrorCode.AUTH_REQUIRED.value: "#9b59b6",
    ErrorCode.NOT_FOUND.value: "#7f8c8d",
    ErrorCode.UPSTREAM_UNAVAILABLE.value: "#d9534f",
    ErrorCode.UPSTREAM_TIMEOUT.value: "#f0ad4e",
    ErrorCode.RATE_LIMITED.value: "#5bc0de",
    ErrorCode.GUARDRAIL_BLOCKED.value: "#2c7be5",
    ErrorCode.INTERNAL_ERROR.value: "#343a40",
}
"""errorCode -> bar color."""
_OTHER: Final = "#aaaaaa"

WIDTH: Final = 720
HEIGHT: Final = 180
_LEFT: Final = 36
_BOTTOM: Final = 22
_TOP: Final = 8


@dataclass(frozen=True)
class Bar:
    """One colored rectangle: ``count`` failures of ``code`` in the slice from ``start``."""

    x: float
    y: float
    width: float
    height: float
    color: str
    code: str
    count: int
    start: str


@dataclass(frozen=True)
class Chart:
    """What the template draws: the bars, the legend and the axis labels."""

    width: int
    height: int
    plot_left: int
    plot_bottom: int
    bars: list[Bar]
    legend: list[tuple[str, str, int]]
    top_count: int
    first_label: str
    last_label: str
    total: int


def _label(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%m-%d %H:%M")


def failure_chart(histogram: FailureHistogram) -> Chart:
    """The stacked bars of ``histogram`` (codes ordered as ``histogram.codes()``)."""
    codes = histogram.codes()
    totals = [sum(bucket.values()) for bucket in histogram.counts]
    top = max(totals, default=0) or 1
    slices = max(len(histogram.counts), 1)
    plot_width = WIDTH - _LEFT - 4
    plot_height = HEIGHT - _BOTTOM - _TOP
    step = plot_width / slices
    bars: list[Bar] = []
    for index, bucket in enumerate(histogram.counts):
        start = histogram.start + timedelta(seconds=histogram.width * index)
        base = float(HEIGHT - _BOTTOM)
        for code in codes:
            count = bucket.get(code, 0)
            if not count:
                continue
            height = plot_height * count / top
            base -= height
            bars.append(
                Bar(
                    x=round(_LEFT + index * step + 1, 2),
                    y=round(base, 2),
                    width=round(max(step - 2, 1), 2),
                    height=round(height, 2),
                    color=CODE_COLORS.get(code, _OTHER),
                    code=code,
                    count=count,
                    start=_label(start),
                )
            )
    legend = [
        (code, CODE_COLORS.get(code, _OTHER), sum(b.get(code, 0) for b in histogram.counts))
        for code in codes
    ]
    return Chart(
        width=WIDTH,
        height=HEIGHT,
        plot_left=_LEFT,
        plot_bottom=HEIGHT - _BOTTOM,
        bars=bars,
        legend=legend,
        top_count=max(totals, default=0),
        first_label=_label(histogram.start),
        last_label=_label(histogram.end),
        total=histogram.total,
    )
