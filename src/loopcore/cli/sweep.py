"""What did a ``--sweep`` compare? One row per value in force, and the ordering repairs named.

Each swept value is laid over the settings as written, and the config then
repairs its ordering (``criticalThreshold`` above ``warningThreshold``,
``globalCircuitBreakerThreshold`` above ``criticalThreshold``). So sweeping
``criticalThreshold`` from 5 while ``warningThreshold`` is 10 runs 5 to 10
as 11: those values are one configuration, shown as one row labelled 11 with
a note saying which values it stands for. A repair of another setting (a
swept ``warningThreshold`` pushing ``criticalThreshold`` up) is noted too.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from .._config import LoopDetectionConfig, config_mapping, overlay
from ..batch import ScanResult
from ..formats import Traces
from .options import Sweep
from .render import columns, dump, header, plural, summary
from .report import Tally, tally

__all__ = ["SweepRow", "notes", "sweep_rows", "write_sweep"]

#: The settings the ordering repair may change, each with the one it must exceed.
ORDERED = {
    "criticalThreshold": "warningThreshold",
    "globalCircuitBreakerThreshold": "criticalThreshold",
}


@dataclass(frozen=True)
class SweepRow:
    """One configuration of a sweep: the swept setting's value in force, and what it found."""

    value: object  # in force, after the ordering repair
    asked: tuple[int, ...]  # the swept values that came out as this configuration
    tally: Tally
    #: other settings the ordering repair changed, with their values in force
    raised: tuple[tuple[str, object], ...] = ()
    #: why the swept value itself was repaired, when it was
    why: str = ""


def _path(block: dict[str, Any]) -> list[str]:
    """The dotted path of the one setting a single-setting overlay holds."""
    path = []
    node: Any = block
    while isinstance(node, dict):
        (key,) = node
        path.append(key)
        node = node[key]
    return path


def _get(block: dict[str, Any], path: list[str], default: object = None) -> object:
    node: Any = block
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return default
        node = node[key]
    return node


def sweep_rows(
    spec: Sweep, block: dict[str, Any], results: Sequence[tuple[object, ScanResult]]
) -> list[SweepRow]:
    """The sweep's rows: swept values that are one configuration after repairs merged."""
    path = _path(overlay({}, {spec.setting: spec.values[0]}))
    name = ".".join(path)
    defaults = config_mapping(LoopDetectionConfig())
    rows: dict[object, SweepRow] = {}
    for value, (_, result) in zip(spec.values, results, strict=True):
        in_force_block = config_mapping(result.config)
        in_force = _get(in_force_block, path)
        written = overlay(block, {spec.setting: value})
        raised = tuple(
            (setting, in_force_block[setting])
            for setting in ORDERED
            if setting != name
            and in_force_block[setting] != written.get(setting, defaults[setting])
        )
        why = ""
        if in_force != value and name in ORDERED:
            floor = ORDERED[name]
            why = f"it must exceed {floor}, {in_force_block[floor]}"
        row = rows.get(in_force)
        if row is None:
            rows[in_force] = SweepRow(in_force, (value,), tally(result), raised, why)
        else:
            # The same configuration (repairs are monotonic): the first value's tally holds.
            asked = (*row.asked, value)
            rows[in_force] = SweepRow(in_force, asked, row.tally, row.raised, row.why or why)
    return list(rows.values())


def _span(values: Sequence[int]) -> str:
    """``5``, ``5 to 10``, ``5 to 11 step 2``, or ``5, 6, 9``."""
    if len(values) == 1:
        return str(values[0])
    step = values[1] - values[0]
    if step > 0 and all(b - a == step for a, b in itertools.pairwise(values)):
        return f"{values[0]} to {values[-1]}" + (f" step {step}" if step != 1 else "")
    return ", ".join(map(str, values))


def notes(spec: Sweep, rows: Sequence[SweepRow]) -> list[str]:
    """What the ordering repair did to the sweep, one sentence a line (none when nothing)."""
    out = []
    for row in rows:
        repaired = [value for value in row.asked if value != row.value]
        if not repaired:
            continue
        line = f"{spec.setting} {_span(repaired)} {'is' if len(repaired) == 1 else 'are'} "
        line += f"repaired to {row.value}" + (f" ({row.why})" if row.why else "")
        if len(row.asked) > 1:
            line += f", so their rows are merged into the row {row.value}"
        out.append(line)
    raised: dict[str, list[tuple[int, object]]] = {}
    for row in rows:
        for setting, value in row.raised:
            raised.setdefault(setting, []).extend((asked, value) for asked in row.asked)
    for setting, pairs in raised.items():
        asked = [a for a, _ in pairs]
        values = sorted({v for _, v in pairs if isinstance(v, int)})
        out.append(
            f"at {spec.setting} {_span(asked)} the ordering repair also raised {setting} "
            f"(to {_span(values)}: it must exceed {ORDERED[setting]})"
        )
    return out


def write_sweep(
    traces: Traces,
    config: LoopDetectionConfig,
    spec: Sweep,
    rows: Sequence[SweepRow],
    fmt: str,
    out: TextIO,
    err: TextIO,
) -> None:
    """One row per configuration swept: runs warned, blocked and aborted, and calls saved.

    The table says on stdout what the ordering repair did; JSON and CSV say it
    on stderr (JSON rows also carry the values each row stands for).
    """
    said = notes(spec, rows)
    if fmt != "table":
        for note in said:
            print(f"loopcore replay: --sweep: {note}", file=err)
    if fmt == "json":
        entries = []
        for row in rows:
            entry: dict[str, Any] = {"value": row.value, **row.tally.__dict__}
            if row.asked != (row.value,):
                entry["requested"] = list(row.asked)
            if row.raised:
                entry["repaired"] = dict(row.raised)
            entries.append(entry)
        document = {"summary": summary(traces, config), "setting": spec.setting, "sweep": entries}
        dump(document, out)
        return
    if fmt == "csv":
        import csv

        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(("setting", "value", *Tally.__dataclass_fields__))
        for row in rows:
            writer.writerow((spec.setting, row.value, *row.tally.__dict__.values()))
        return
    header(traces, config, out)
    first, last = spec.values[0], spec.values[-1]
    step = spec.values[1] - first if len(spec.values) > 1 else 1
    print(
        f"\nsweep of {spec.setting} from {first} to {last}"
        f"{f' step {step}' if step != 1 else ''} ({plural(len(spec.values), 'value')}), "
        f"over {plural(len(traces.table), 'call')}:",
        file=out,
    )
    table = [
        (spec.setting, "runs warned", "runs blocked", "runs aborted", "calls saved"),
        *(
            (
                str(row.value),
                f"{row.tally.runs_warned:,}",
                f"{row.tally.runs_blocked:,}",
                f"{row.tally.runs_aborted:,}",
                f"{row.tally.calls_saved:,}",
            )
            for row in rows
        ),
    ]
    columns(table, {0, 1, 2, 3, 4}, out)
    if said:
        print(file=out)
        for note in said:
            print(f"note: {note}", file=out)
