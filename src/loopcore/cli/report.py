"""What did the replay find in each run? The report model built from a ``ScanResult``.

A ``Hit`` is one notable call (first warning, first block, abort) with where it
was read; a ``RunReport`` is one run (scope); a ``Tally`` counts the runs a
configuration warns, blocks and aborts. Nothing here prints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from .._rules import COMPACTION_LOOP_PERSISTED, DETECTORS, abort_summary
from ..batch import ScanResult, ScopeSummary
from ..formats import Traces

__all__ = ["Hit", "Report", "RunReport", "Tally", "tally"]


@dataclass(frozen=True)
class Hit:
    """One notable call of a run: where it is and what was decided."""

    call: int  # 1-based position within its run
    index: int  # position in the whole trace
    file: str
    line: int
    tool: str
    detector: str | None
    count: int
    message: str | None = None


@dataclass(frozen=True)
class RunReport:
    """What the replay found in one run (one scope)."""

    file: str  # where the run's first call was read
    session: Hashable
    run_id: str | None
    calls: int
    first_warning: Hit | None
    first_block: Hit | None
    aborted: Hit | None
    detectors: tuple[str, ...]
    saved: int
    #: every detector that fired, with the run's call number where it first did
    fired: tuple[tuple[str, int], ...] = ()

    @property
    def flagged(self) -> bool:
        return bool(self.first_warning or self.first_block or self.aborted)


class Report:
    """Turns trace indices into hits (call number, file, line, tool)."""

    def __init__(self, traces: Traces, result: ScanResult) -> None:
        self.traces = traces
        self.result = result
        self.pos = result.positions()

    def hit(self, index: int | None, message: bool = False) -> Hit | None:
        if index is None:
            return None
        traces, result = self.traces, self.result
        table = traces.table
        return Hit(
            call=int(self.pos[index]) + 1,
            index=index,
            file=traces.files[int(traces.file_index[index])].path,
            line=int(traces.lines[index]),
            tool=table.name(int(table.tool_hash[index])),
            detector=DETECTORS[int(result.detector[index])],
            count=int(result.count[index]),
            message=result.verdict(index).message if message else None,
        )

    def abort(self, index: int | None) -> Hit | None:
        hit = self.hit(index)
        if hit is None:
            return None
        window = self.result.config.post_compaction_guard.window_size
        return dataclasses.replace(
            hit,
            detector=COMPACTION_LOOP_PERSISTED,
            count=window,
            message=abort_summary(hit.tool, window),
        )

    def runs(self) -> list[RunReport]:
        table = self.traces.table
        summaries: list[ScopeSummary] = self.result.scopes()
        # scopes() lists the scopes with calls in order of their first call.
        firsts = np.sort(np.unique(table.scope, return_index=True)[1])
        out = []
        for summary, first in zip(summaries, firsts.tolist(), strict=True):
            out.append(
                RunReport(
                    file=self.traces.files[int(self.traces.file_index[first])].path,
                    session=summary.session,
                    run_id=summary.run_id,
                    calls=summary.calls,
                    first_warning=self.hit(summary.first_warning),
                    first_block=self.hit(summary.first_block, message=True),
                    aborted=self.abort(summary.aborted_at),
                    detectors=summary.detectors,
                    saved=summary.saved,
                    fired=tuple(
                        (name, int(self.pos[index]) + 1)
                        for name, index in zip(summary.detectors, summary.first_fired, strict=True)
                    ),
                )
            )
        return out


@dataclass(frozen=True)
class Tally:
    """How many runs a configuration warns, blocks and aborts, and the calls it saves."""

    runs_warned: int
    runs_blocked: int
    runs_aborted: int
    calls_saved: int

    @property
    def would_block(self) -> bool:
        return bool(self.runs_blocked or self.runs_aborted)


def tally(result: ScanResult) -> Tally:
    """The ``Tally`` of a scan (whole-array totals: cheap for every value of a sweep)."""
    totals = result.totals()
    return Tally(totals.runs_warned, totals.runs_blocked, totals.runs_aborted, totals.calls_saved)
