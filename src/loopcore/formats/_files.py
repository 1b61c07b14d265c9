"""Which trace files do the given paths name, and how is each one opened? (plain or gzip)"""

from __future__ import annotations

import gzip
import io
import os
import stat
from collections.abc import Iterable

__all__ = ["TRACE_SUFFIXES", "InputError", "expand", "file_size", "open_trace", "reason"]

#: What a directory's trace files are called (searched recursively, hidden entries skipped):
#: JSONL, and JSON for conversation documents.
TRACE_SUFFIXES = (".jsonl", ".ndjson", ".json", ".jsonl.gz", ".ndjson.gz", ".json.gz")


class InputError(Exception):
    """An input cannot be read (or, when strict, holds a malformed line); the message names it."""


def _is_trace(name: str) -> bool:
    return name.endswith(TRACE_SUFFIXES) and not name.startswith(".")


def _regular(path: str) -> bool:
    """Is ``path`` a regular file (or a link to one)? Asked without opening it.

    A FIFO, a socket or a device found in a directory is not a trace: opening a
    FIFO blocks until something writes to it. A path that cannot be examined
    is kept, so that opening it reports why.
    """
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return True


def _unreadable(exc: OSError) -> None:
    raise InputError(f"{exc.filename}: cannot read: {reason(exc)}")


def expand(paths: Iterable[str]) -> list[str]:
    """The trace files named by ``paths``, directories expanded, each file once.

    A path named as such is kept whatever it is (``/dev/stdin``, a FIFO: read as
    a stream); in a directory, only regular files are traces.
    """
    out: list[str] = []
    seen: set[str] = set()

    def keep(path: str) -> None:
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            out.append(path)

    for path in paths:
        if not os.path.isdir(path):
            keep(path)  # a missing file is reported when it is opened
            continue
        found: list[str] = []

        for root, dirs, files in os.walk(path, onerror=_unreadable):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            names = (os.path.join(root, name) for name in sorted(files) if _is_trace(name))
            found.extend(name for name in names if _regular(name))
        if not found:
            suffixes = ", ".join(TRACE_SUFFIXES)
            raise InputError(f"{path}: directory holds no trace files ({suffixes})")
        for file in found:
            keep(file)
    return out


def reason(exc: BaseException) -> str:
    """What went wrong, for a message that names the file."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def open_trace(path: str) -> tuple[io.BufferedIOBase, io.BufferedReader]:
    """The file's lines (gunzipped when it starts with the gzip magic) and the raw file."""
    try:
        raw = open(path, "rb")  # noqa: SIM115 - closed by the caller, with the stream
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {reason(exc)}") from None
    try:
        magic = raw.peek(2)[:2]
    except OSError as exc:  # a directory on some systems, an I/O error
        raw.close()
        raise InputError(f"{path}: cannot read: {reason(exc)}") from None
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb"), raw
    return raw, raw


def file_size(path: str) -> int:
    """The file's size in bytes (for the progress bar), or 0 when it cannot be read."""
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
