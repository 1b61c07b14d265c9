"""``loopcore.batch.dask.replay`` on a two-worker Dask cluster, against ``replay --jobs 1``."""

from __future__ import annotations

from .conftest import require

require("distributed", "dask")

import gzip  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

from loopcore.batch import replay_lines  # noqa: E402
from loopcore.batch.dask import replay as dask_replay  # noqa: E402
from tests.conftest import Replay  # noqa: E402
from tests.test_replay_jobs import events, write  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    with (
        LocalCluster(
            n_workers=2,
            processes=True,
            threads_per_worker=1,
            dashboard_address=None,
            worker_dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def _without_index(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs without their hits' ``index``: a file's replay counts its own calls only."""
    out = []
    for run in runs:
        run = dict(run)
        for key in ("first_warning", "first_block", "aborted"):
            if run[key] is not None:
                run[key] = {k: v for k, v in run[key].items() if k != "index"}
        out.append(run)
    return out


def _files(tmp_path: Path) -> list[Path]:
    # Each file's runs are its own (the scopes do not span files).
    first = events(1, 900)
    second = [{**e, "session": "other"} if isinstance(e, dict) else e for e in events(2, 600)]
    return [
        write(tmp_path / "a.jsonl", first),
        write(tmp_path / "b.jsonl.gz", second, compress=True),
        DATA / "stuck-session.jsonl",
        DATA / "openai-chat-conversation.json",
    ]


def test_matches_the_command_line(client: Client, tmp_path: Path, replay: Replay) -> None:
    files = [str(path.resolve()) for path in _files(tmp_path)]
    code, out, _ = replay(*files, "--enable", "--format", "json", "--jobs", "1")
    assert code == 1
    expected = json.loads(out)["runs"]
    found = dask_replay(files, {"enabled": True})
    assert found  # the cluster did run them
    assert _without_index(found) == _without_index(expected)
    # Detection off, as OpenClaw ships it: only the post-compaction guard.
    code, out, _ = replay(*files, "--format", "json", "--jobs", "1")
    assert _without_index(dask_replay(files)) == _without_index(json.loads(out)["runs"])


def test_a_glob_and_a_lazy_bag(client: Client, tmp_path: Path) -> None:
    files = _files(tmp_path)[:2]
    bag = dask_replay(str(tmp_path / "*.jsonl*"), {"enabled": True}, compute=False)
    assert bag.count().compute() == len(dask_replay([str(f) for f in files], {"enabled": True}))
    with pytest.raises(FileNotFoundError, match="paths_or_globs"):
        dask_replay(str(tmp_path / "nothing-*.jsonl"))


def test_replay_lines_of_one_file(tmp_path: Path, replay: Replay) -> None:
    path = write(tmp_path / "a.jsonl", events(3, 700))
    _code, out, _ = replay(str(path), "--enable", "--format", "json", "--jobs", "1")
    expected = json.loads(out)["runs"]
    as_bytes = path.read_bytes().splitlines()
    assert replay_lines(as_bytes, {"enabled": True}, path=str(path)) == expected
    as_text = io.StringIO(path.read_text())
    assert replay_lines(as_text, {"enabled": True}, path=str(path)) == expected
    whole = [gzip.compress(path.read_bytes())]
    assert replay_lines(whole, {"enabled": True}, path=str(path)) == expected
    err = io.StringIO()
    replay_lines(as_bytes, {"enabled": True}, path="x.jsonl", err=err)
    assert "x.jsonl:" in err.getvalue()  # the malformed lines of events() were reported
    with pytest.raises(TypeError, match="config: expected"):
        replay_lines(as_bytes, 3)  # type: ignore[arg-type]
