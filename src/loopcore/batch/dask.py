"""How does a fleet replay a bucket of traces on a Dask cluster? ``replay`` on ``dask.bag``.

Needs the ``dask`` extra (``pip install 'loopcore[dask]'``): dask, distributed,
and fsspec, which opens local paths, globs and URLs (``s3://bucket/*.jsonl.gz``
with s3fs installed, ``gs://`` with gcsfs, ...). Each file is one task:
opened on a worker, read whole, and replayed with ``replay_lines``; the
scheduler is whichever Dask is set up to use (a ``distributed.Client`` in
scope, or Dask's default).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dask.bag as db
import fsspec  # type: ignore[import-untyped]

from .._config import LoopDetectionConfig
from ._lines import _config, replay_lines

__all__ = ["replay"]


def _replay_file(
    opened: Any, config: LoopDetectionConfig, input_format: str | None, max_line_bytes: int | None
) -> list[dict[str, Any]]:
    with opened as stream:
        data = stream.read()
    return replay_lines(
        [data] if data[:2] == b"\x1f\x8b" else data.splitlines(keepends=True),
        config,
        path=opened.path,
        input_format=input_format,
        max_line_bytes=max_line_bytes,
    )


def replay(
    paths_or_globs: str | Sequence[str],
    config: LoopDetectionConfig | Mapping[str, Any] | None = None,
    *,
    input_format: str | None = None,
    max_line_bytes: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    compute: bool = True,
) -> Any:
    """Every run of every file, replayed one file a task: the run summaries of
    ``replay_lines``, concatenated in file order (a list), or, with ``compute=False``,
    the ``dask.bag.Bag`` of them, to reduce further on the cluster.

    ``paths_or_globs`` is one path, URL or glob, or a list of them (fsspec
    expands globs, sorted); ``storage_options`` goes to fsspec (credentials, an
    endpoint). A file's ``path`` in the summaries is fsspec's (without the protocol).
    """
    settings = _config(config)
    if isinstance(paths_or_globs, str):
        paths_or_globs = [paths_or_globs]
    files = fsspec.open_files(list(paths_or_globs), mode="rb", **dict(storage_options or {}))
    if not files:
        raise FileNotFoundError(f"paths_or_globs: no file matches {list(paths_or_globs)!r}")
    bag = db.from_sequence(list(files), npartitions=len(files)).map(  # type: ignore[no-untyped-call]
        _replay_file, settings, input_format, max_line_bytes
    )
    runs = bag.flatten()
    return runs.compute() if compute else runs
