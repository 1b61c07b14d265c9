"""How does each run's verdict timeline look? ``loopcore replay --plot FILE.png``.

One horizontal lane per run, a marker per call coloured by what the detector
would have said just before it. matplotlib is an optional extra (``plot``) and
is imported only here; the figure is drawn with the Agg canvas, without
pyplot, so no GUI backend or global state is involved.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from ..formats._text import printable
from .options import UsageError

if TYPE_CHECKING:
    from .report import Report, RunReport

__all__ = ["MAX_LANES", "check_target", "draw", "require_matplotlib"]

#: Lanes beyond this make an unreadable picture; runs with verdicts are drawn first.
MAX_LANES = 40

MISSING = "--plot needs matplotlib: pip install 'loopcore[plot]'"

#: (label, colour, marker, size) per kind of call, in legend order.
STYLES = (
    ("no verdict", "#aab2bd", "o", 10),
    ("warning", "#f0a202", "o", 22),
    ("block", "#d7263d", "s", 26),
    ("post-compaction abort", "#111111", "X", 60),
)


def require_matplotlib() -> None:
    """Raise the replay's usage error when matplotlib cannot be imported."""
    try:
        import matplotlib.figure  # noqa: F401
    except ImportError:
        raise UsageError(MISSING) from None


def check_target(path: str) -> None:
    """Raise the replay's usage error now when the PNG could not be written at the end."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"--plot: cannot write {path}: Is a directory")
    if not os.path.isdir(folder):
        raise UsageError(f"--plot: cannot write {path}: No such file or directory")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"--plot: cannot write {path}: Permission denied")


def _lane_label(run: RunReport) -> str:
    session = "-" if run.session is None else printable(str(run.session))
    if len(session) > 14:
        session = session[:12] + "…"
    return f"{session} {printable(run.run_id or '-')}"


def draw(path: str, report: Report, runs: list[RunReport]) -> None:
    """Write the timeline PNG; raises ``OSError`` when the file cannot be written."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    table = report.traces.table
    result = report.result
    # Lanes: runs with verdicts first, each group in trace order.
    chosen = sorted(range(len(runs)), key=lambda i: (not runs[i].flagged, i))[:MAX_LANES]
    keys = [(runs[i].session, runs[i].run_id) for i in chosen]
    scope_ids = {key: s for s, key in enumerate(table.scopes)}

    lanes = max(len(chosen), 1)
    figure = Figure(figsize=(11, 1.6 + 0.32 * lanes), layout="constrained")
    axes = figure.add_subplot()
    kinds: list[Any] = [[], [], [], []]  # per style: (x, y) points
    for lane, key in enumerate(keys):
        rows = np.flatnonzero(table.scope == scope_ids[key])
        x = np.arange(1, len(rows) + 1)
        levels = result.level[rows]
        for kind in range(3):
            hits = levels == kind
            kinds[kind].append((x[hits], np.full(int(hits.sum()), lane)))
        aborted = result.aborted[rows]
        kinds[3].append((x[aborted], np.full(int(aborted.sum()), lane)))
    for (_, colour, marker, size), points in zip(STYLES, kinds, strict=True):
        if points:
            xs = np.concatenate([p[0] for p in points])
            ys = np.concatenate([p[1] for p in points])
            axes.scatter(xs, ys, s=size, c=colour, marker=marker, linewidths=0, zorder=2)
    axes.set_yticks(range(len(keys)), [_lane_label(runs[i]) for i in chosen], fontsize=8)
    axes.set_ylim(len(keys) - 0.5 if keys else 0.5, -0.5)
    axes.set_xlabel("call number within the run")
    axes.grid(axis="x", color="#e5e8ec", zorder=0)
    title = f"loopcore replay: what loop detection would have done ({len(runs)} runs)"
    if len(runs) > len(chosen):
        title += f"\nshowing {len(chosen)} of {len(runs)} runs, those with verdicts first"
    axes.set_title(title, fontsize=10)
    handles = [
        Line2D([], [], linestyle="", marker=marker, color=colour, markersize=7, label=label)
        for label, colour, marker, _ in STYLES
    ]
    figure.legend(handles=handles, loc="outside lower center", ncols=4, fontsize=8, frameon=False)
    figure.savefig(path, format="png", dpi=110)
