"""How is a loopcore event log read without ``json.loads`` building a dict per line? msgspec.

``EventReader`` hands every line to ``read_fast`` when msgspec is installed (it
comes with the ``cli`` extra) and the reference path is not forced
(``LOOPCORE_REPLAY_REFERENCE=1``, or ``use_reference``). msgspec decodes each
line straight into the few fields of an event (``_Event``): no dict per line,
no field lookups, the unknown-field check done by the decoder.

Only the common, well-formed event takes this path: ``type`` absent or
``"call"``, a ``str`` tool, args present, a plain ``ts``, a ``str`` or no
``tool_call_id``, a usable session. Any other line (malformed JSON, a byte-order
mark, ``NaN`` or ``1e400``, which msgspec refuses and ``json`` reads, a lone
surrogate escape, an unknown field, a compaction, a wrong type) goes to the
reference path, decoded again by ``json`` and judged by ``add_event``: its
reports, counts and rows are exactly the reference's. What msgspec does
accept it decodes to the values ``json`` gives (the same ints, floats, strings,
key order, and the last of duplicate keys), so the fingerprints, defined on the
decoded values (SPEC §2), are the reference's byte for byte.

The compiled row twin decodes a second way (``_RawEvent``): the args kept as
their JSON text (``msgspec.Raw``), since most tools' args are only hashed. It
hashes that text straight into the call hash in C (``loopcore/_json_canon.h``),
and decodes it with ``_VALUE_DECODE`` (as the whole line's decode would have)
for the few tools whose rules read their args, or whenever the C reader is not
sure of the text. Before decoding a line at all, it tries to read the whole line
from its JSON text (``batch/_rows_text.pxi``, ``BY_TEXT``): the fields found in C,
only the tool name, session and run id made into str, a plain str result hashed
from its text too; any line it is not sure of is decoded as above.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._outcome import UNSET
from ._reader import PROGRESS_EVERY, Lines, Tick

if TYPE_CHECKING:  # annotations only: reading a log does not need the batch package yet
    from array import array

    from ..batch import CallTableBuilder

__all__ = ["AVAILABLE", "BY_TEXT", "REFERENCE_ENV", "read_fast", "use_fast"]

#: Set (to anything but "" or "0") to read every line through the reference ``json`` path.
REFERENCE_ENV = "LOOPCORE_REPLAY_REFERENCE"
#: Does the compiled loop read a common line from its JSON text before decoding it?
#: (False: every line decoded by msgspec, the path it falls back to; for tests)
BY_TEXT = True

try:
    import msgspec
except ImportError:  # the cli extra is not installed: the reference path only
    AVAILABLE = False
else:
    AVAILABLE = True
    _MISSING: Any = msgspec.UNSET

    class _Event(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
        """The fields of a call event (``EVENT_FIELDS``); an unknown one fails the decode."""

        type: Any = "call"
        tool: Any = _MISSING
        args: Any = _MISSING
        result: Any = _MISSING
        error: Any = _MISSING
        tool_call_id: Any = None
        session: Any = None
        run_id: Any = None
        ts: Any = None

    class _RawEvent(_Event, kw_only=True, forbid_unknown_fields=True):
        """``_Event`` with its args left as their JSON text (the same fields and slots)."""

        args: msgspec.Raw = _MISSING

    _DECODE: Callable[[bytes], _Event] = msgspec.json.Decoder(_Event).decode
    _ERRORS: tuple[type[BaseException], ...] = (msgspec.DecodeError, RecursionError)
    #: The raw-args decoders: (line decoder, the type it returns, the args' decoder).
    _RAW: tuple[Callable[[bytes], _RawEvent], type, Callable[[Any], Any]] = (
        msgspec.json.Decoder(_RawEvent).decode,
        _RawEvent,
        msgspec.json.Decoder().decode,
    )


def use_fast() -> bool:
    """Is the msgspec path to be taken? (installed, and the reference not forced)"""
    return AVAILABLE and os.environ.get(REFERENCE_ENV, "") in ("", "0")


def read_fast(
    lines: Lines,
    tick: Tick,
    builder: CallTableBuilder,
    row_lines: array[int],
    slow: Callable[[int, bytes], None],
) -> int:
    """Read the remaining lines into ``builder``; returns the number of the last one.

    ``row_lines`` gets each row's line number, and ``slow(number, line)`` reads
    one line the reference way. The loop itself is the builder's row twin's
    (``Rows.read``): compiled, it decodes, checks and appends each row without a
    Python step.
    """
    decoder = (_DECODE, _ERRORS, _MISSING, UNSET, PROGRESS_EVERY, _Event, _RAW, BY_TEXT)
    return builder._rows.read(lines, tick, row_lines, slow, decoder)
