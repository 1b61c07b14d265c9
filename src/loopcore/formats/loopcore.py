"""How is a loopcore event log read? One ``CallTableBuilder.add_event`` mapping per line."""

from __future__ import annotations

from typing import Any

from ._fast import read_fast, use_fast
from ._reader import DECODER, PROGRESS_EVERY, SKIP, Lines, Reader, Tick, parse

__all__ = ["EventReader"]


class EventReader(Reader):
    """loopcore's own format: every line is one ``add_event`` mapping."""

    def take(self, number: int, event: dict[str, Any]) -> None:
        try:
            row = self.builder.add_event(event)
        except (TypeError, ValueError) as exc:
            self.report(number, str(exc))
            return
        if row is not None:
            self.row_lines.append(number)

    def run(self, lines: Lines, tick: Tick) -> int:
        """Read the remaining lines; returns the number of the last one."""
        if use_fast():
            return read_fast(lines, tick, self.builder, self.row_lines, self.line)
        return self.run_reference(lines, tick)

    def line(self, number: int, line: bytes) -> None:
        """One line read the reference way (``json``, then ``add_event``)."""
        try:
            event = DECODER.decode(line.decode())
        except (ValueError, RecursionError):
            event = parse(line, number, self.report)  # a blank line, a BOM, or a report
            if event is SKIP:
                return
        if type(event) is not dict:
            parse(line, number, self.report)
            return
        self.take(number, event)

    def run_reference(self, lines: Lines, tick: Tick) -> int:
        """``run`` through ``json`` and ``add_event``, line by line: what the fast path is
        measured and tested against."""
        # The hot loop of a large replay: names bound locally, blank and bad lines
        # handled only on the exception path.
        decode = DECODER.decode
        add = self.builder.add_event
        keep = self.row_lines.append
        report = self.report
        number = 0
        for number, line in lines:
            try:
                event = decode(line.decode())
            except (ValueError, RecursionError):
                event = parse(line, number, report)  # a blank line, a BOM, or a report
                if event is SKIP:
                    continue
            if type(event) is not dict:
                parse(line, number, report)
                continue
            try:
                row = add(event)
            except (TypeError, ValueError) as exc:
                report(number, str(exc))
                continue
            if row is not None:
                keep(number)
            if not number % PROGRESS_EVERY:
                tick()
        return number

    def finish(self) -> None:
        pass
