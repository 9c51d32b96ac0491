"""Printing a benchmark's results: one aligned row per measure, and the percentiles they quote."""

from __future__ import annotations

from collections.abc import Sequence


def print_table(rows: Sequence[Sequence[str]]) -> None:
    """Left-align the first column, then the rest separated by two spaces."""
    width = max(len(row[0]) for row in rows)
    for name, *values in rows:
        print(f"{name:<{width}}  " + "  ".join(values))


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank `q` quantile (0.5, 0.99) of `values`."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def goal_exit(met: bool, quick: bool) -> int:
    """A bench's exit status: 1 when a full run misses its goal, 0 otherwise.

    A --quick run is too short to judge a figure (three runs of a few hundred
    milliseconds on a shared machine), and CI runs every bench that way only to
    see that it still runs to its table (bench/quick.py); a full run on an idle
    machine can gate on its goal.
    """
    return 0 if met or quick else 1
