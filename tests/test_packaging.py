"""Is loopcore packaged as promised: light to import, its version and licence written once?

``import loopcore`` and the per-call path load none of the extras' packages
(numpy, tqdm, matplotlib, prometheus_client, redis), nor json5 until a JSON5
file is read; the hard dependencies are only what that path needs; each extra
holds what its feature needs; the test extra holds what the suite imports; the
version lives in one file; the repository carries the MIT licence. What a built
wheel and sdist hold is checked by ``scripts/check-wheel.sh``.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import loopcore

from .conftest import require

ROOT = Path(__file__).resolve().parent.parent
HEAVY = (
    "numpy",
    "tqdm",
    "msgspec",
    "matplotlib",
    "prometheus_client",
    "redis",
    "json5",
    "dask",
    "mcp",
    "langchain",
    "langchain_core",
    "agents",
    "pydantic_ai",
)


def _pyproject() -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # the test extra installs tomli there
        import tomli as tomllib
    with (ROOT / "pyproject.toml").open("rb") as f:
        loaded: dict[str, Any] = tomllib.load(f)
    return loaded


def _name(requirement: str) -> str:
    """The normalised project name of a requirement string (extras kept apart)."""
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def _extra(name: str, extras: dict[str, list[str]]) -> set[str]:
    """The project names an extra pulls in, through ``loopcore[...]`` references too."""
    names: set[str] = set()
    for requirement in extras[name]:
        if _name(requirement) == "loopcore":
            inner = re.search(r"\[([^\]]*)\]", requirement)
            assert inner, requirement
            for other in inner.group(1).split(","):
                names |= _extra(other.strip(), extras)
        else:
            names.add(_name(requirement))
    return names


def _loaded_after(code: str) -> list[str]:
    """Which of HEAVY are imported once ``code`` has run in a fresh interpreter."""
    probe = (
        f"{code}\nimport json, sys\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


def test_import_loopcore_loads_none_of_the_extras() -> None:
    assert _loaded_after("import loopcore") == []


def test_the_per_call_path_loads_none_of_the_extras() -> None:
    code = """
import loopcore
config = loopcore.load_config({"tools": {"loopDetection": {"enabled": True}}})
guard = loopcore.ToolLoopGuard(config)
for n in range(25):
    decision = guard.before_call("read", {"path": "a.py"}, tool_call_id=f"c{n}", session="s")
    if decision.blocked:
        break
    guard.after_call("read", {"path": "a.py"}, result="same", tool_call_id=f"c{n}", session="s")
assert decision.blocked, decision
guard.after_call("browse", {}, error="Unknown tool: browse", session="s")
detector = loopcore.LoopDetector({"enabled": True})
detector.record_call("exec", {"command": "make"})
detector.record_outcome("exec", {"command": "make"}, result={"details": {"status": "running"}})
detector.check("exec", {"command": "make"})
loopcore.hash_outcome("process", {"action": "poll"}, result={"details": {"status": "running"}})
guard.end_session("s")
"""
    assert _loaded_after(code) == []


def test_the_probe_sees_what_a_heavy_import_loads(tmp_path: Path) -> None:
    # The two tests above would pass on a probe that saw nothing: it must see these.
    config = tmp_path / "openclaw.json5"
    config.write_text("{tools: {loopDetection: {enabled: true}}, // JSON5, not JSON\n}")
    assert _loaded_after(f"import loopcore; loopcore.load_config({str(config)!r})") == ["json5"]
    assert "numpy" in _loaded_after("import loopcore.batch")


def test_hard_dependencies_are_only_what_the_per_call_path_needs() -> None:
    assert sorted(_name(r) for r in _pyproject()["project"]["dependencies"]) == ["json5", "xxhash"]


def test_each_extra_holds_what_its_feature_needs() -> None:
    extras = _pyproject()["project"]["optional-dependencies"]
    assert {"cli", "plot", "prometheus", "docs", "test", "bench", "dev"} <= set(extras)
    assert _extra("cli", extras) == {"numpy", "tqdm", "msgspec"}
    assert _extra("plot", extras) == {"numpy", "tqdm", "msgspec", "matplotlib"}
    assert {"dask", "distributed", "numpy"} <= _extra("dask", extras)
    assert _extra("redis", extras) == {"redis"}
    assert _extra("mcp", extras) == {"mcp"}
    assert _extra("langchain", extras) == {"langchain", "langgraph"}
    assert _extra("openai-agents", extras) == {"openai-agents"}
    assert _extra("pydantic-ai", extras) == {"pydantic-ai-slim"}
    assert _extra("prometheus", extras) == {"prometheus-client"}
    assert "mkdocs" in _extra("docs", extras)
    test = _extra("test", extras)
    assert {"pytest", "hypothesis", "pytest-asyncio", "numpy", "tqdm", "prometheus-client"} <= test
    assert "pytest-benchmark" in _extra("bench", extras)
    dev = _extra("dev", extras)
    assert test | {"ruff", "mypy", "cython-lint", "mkdocs", "pytest-benchmark"} <= dev
    integrations = {"redis", "dask", "mcp", "langchain", "openai-agents", "pydantic-ai-slim"}
    assert integrations <= dev


def _third_party_imports(paths: list[Path], *, top_level_only: bool) -> dict[str, str]:
    """Top-level modules imported by ``import`` statements, mapped to where one is."""
    local = {"loopcore", "tests", "conftest"} | {p.stem for p in paths}
    found: dict[str, str] = {}
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body if top_level_only else ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top not in local:
                    found.setdefault(top, f"{path.name}:{node.lineno}")
    return found


def test_the_test_extra_holds_what_the_suite_imports() -> None:
    # cibuildwheel and scripts/check-wheel.sh install the wheel with this extra only.
    project = _pyproject()["project"]
    provided = _extra("test", project["optional-dependencies"]) | {"loopcore"}
    provided |= {_name(r) for r in project["dependencies"]}
    provided |= {"tomli"}  # only where tomllib is missing; the extra pins it there
    tests = sorted((ROOT / "tests").glob("*.py"))
    gated = {path for path in tests if _gated(path)}
    imported = _third_party_imports([p for p in tests if p not in gated], top_level_only=False)
    # The suite imports the fuzz target's module, not its stand-alone main() (atheris).
    imported |= _third_party_imports(sorted((ROOT / "fuzz").glob("*.py")), top_level_only=True)
    assert "numpy" in imported  # the scan found the suite's imports at all
    missing = {
        module: where
        for module, where in imported.items()
        if re.sub(r"[-_.]+", "-", module).lower() not in provided
    }
    assert not missing, f"imported by the suite, not in the test extra: {missing}"


_REQUIRE = re.compile(r"""require\(\s*"([\w.]+)",\s*"([\w-]+)"\s*\)""")


def _gated(path: Path) -> list[tuple[str, str]]:
    """The ``require(module, extra)`` calls of a test module (it needs those extras)."""
    return _REQUIRE.findall(path.read_text(encoding="utf-8"))


def _closure(names: set[str]) -> set[str]:
    """The installed distributions ``names`` pull in, themselves included (markers ignored)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo.extend(_name(r) for r in requires if "extra ==" not in r)
    return seen


def test_tests_of_an_extra_import_only_what_that_extra_brings() -> None:
    # A module gated by require() runs where its extra is installed (CI installs them all).
    project = _pyproject()["project"]
    extras = project["optional-dependencies"]
    base = _extra("test", extras) | {"loopcore"} | {_name(r) for r in project["dependencies"]}
    owners = importlib.metadata.packages_distributions()
    checked = 0
    for path in sorted((ROOT / "tests").glob("*.py")):
        needs = _gated(path)
        if not needs:
            continue
        for module, extra in needs:
            assert extra in extras, f"{path.name}: require() names an undeclared extra {extra!r}"
            require(module, extra)  # skips where the extra is not installed
        provided = _closure(base | {n for _, extra in needs for n in _extra(extra, extras)})
        for module, where in _third_party_imports([path], top_level_only=False).items():
            dists = {_name(d) for d in owners.get(module, [module])}
            wanted = sorted(extra for _, extra in needs)
            assert dists & provided, f"{where}: {module} comes with none of {wanted}"
        checked += 1
    assert checked, "no test module is gated by require()"


def test_the_version_is_written_once() -> None:
    from loopcore import _version

    assert loopcore.__version__ == _version.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", loopcore.__version__)
    assert importlib.metadata.version("loopcore") == loopcore.__version__
    project = _pyproject()
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    version_attr = project["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    assert version_attr == "loopcore._version.__version__"
    package = Path(loopcore.__file__).parent
    quoted = f'"{loopcore.__version__}"'
    holders = sorted(
        p.name for p in package.rglob("*.py") if quoted in p.read_text(encoding="utf-8")
    )
    assert holders == ["_version.py"]


def test_the_repository_carries_the_mit_licence() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n")
    assert "Copyright (c) 2026 the loopcore authors" in text
    assert 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND' in text
    project = _pyproject()["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]


def test_replay_without_numpy_is_one_line_naming_the_cli_extra(tmp_path: Path) -> None:
    # A bare `pip install loopcore` has no numpy: the replay must say which extra to install.
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"tool": "read", "args": {"path": "a"}, "result": "x"}\n')
    code = (
        "import sys; sys.modules['numpy'] = None; from loopcore.cli import main; "
        f"sys.exit(main(['replay', '--enable', {str(trace)!r}]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "pip install 'loopcore[cli]'" in lines[0]
