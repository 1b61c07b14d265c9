#!/usr/bin/env bash
# What the wheels workflow does for one platform, on this machine: build the sdist
# and, from it, a wheel (python -m build); check what both hold (LICENSE, the
# metadata's version, dependencies and extras); install the wheel alone, without
# extras, and check that the core works with its two hard dependencies; install it
# with its test extra into a fresh virtualenv from a local wheelhouse only
# (--no-index); run the test suite from a directory outside the checkout, so that
# it imports the installed wheel; then build the sdist without extensions and
# check that the suite rejects that build when compiled twins are expected. Ends
# with a one-line verdict.
#
# Needs network access to PyPI (build requirements and the wheelhouse), not to
# anything else. PYTHON picks the interpreter (default python3);
# CHECK_WHEEL_KEEP=1 keeps the work directory, which is kept anyway on failure.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/check-wheel.XXXXXX")
step="start"
started=$SECONDS

finish() {
    local rc=$?
    if ((rc != 0)); then
        echo "check-wheel: FAIL at '$step' after $((SECONDS - started)) s (work dir $work)"
    elif [[ ${CHECK_WHEEL_KEEP:-0} == 1 ]]; then
        echo "check-wheel: work dir kept: $work"
    else
        rm -rf "$work"
    fi
}
trap finish EXIT

# Runs a command with its output in a log file; the log's tail is shown only when
# it fails, so a passing run stays short in the CI log.
logged() {
    local log="$work/log/$1.log"
    shift
    mkdir -p "$work/log"
    if ! "$@" >"$log" 2>&1; then
        tail -n 60 "$log"
        return 1
    fi
}

# The test run must see neither the checkout nor a variable that changes the core.
# The wheel is installed with its test extra only: the tests of the other extras
# (Redis, Dask, the MCP proxy, the framework adapters) skip here, so nothing may
# say they are expected; the main suite of .ci/run runs them.
clean_env=(env -u PYTHONPATH -u LOOPCORE_NO_EXTENSIONS -u LOOPCORE_EXPECT_EXTENSIONS
    -u LOOPCORE_CYTHON_TRACE -u LOOPCORE_DEBUG_CYTHON -u LOOPCORE_EXPECT_INTEGRATIONS
    -u LOOPCORE_EXPECT_REDIS -u LOOPCORE_REDIS_URL)
# Installs read only the wheelhouse: no index, and no find-links from pip's config.
offline_pip=(env -u PIP_FIND_LINKS -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL
    PIP_CONFIG_FILE=/dev/null)

step="tools venv"
"$python" -m venv "$work/tools"
tools="$work/tools/bin/python"
logged tools "$tools" -m pip install --upgrade pip build

step="python -m build"
logged build "${clean_env[@]}" "$tools" -m build --outdir "$work/dist" "$repo"
sdist=$(echo "$work"/dist/*.tar.gz)
wheel=$(echo "$work"/dist/*.whl)

step="inspect sdist and wheel"
# Expected contents follow the checkout: every .pyx is a compiled module that must
# be in the wheel next to its source; every .pxd, .pxi and .h file ships too.
"$tools" - "$repo" "$sdist" "$wheel" <<'PY'
import email
import re
import sys
import tarfile
import zipfile
from pathlib import Path

repo, sdist, wheel = (Path(arg) for arg in sys.argv[1:])
package = repo / "src" / "loopcore"
# Paths under src/loopcore: the subpackages (batch, formats) have compiled twins too.
pyx = sorted(p.relative_to(package).as_posix() for p in package.rglob("*.pyx"))
sources = sorted(
    p.relative_to(package).as_posix()
    for p in package.rglob("*")
    if p.suffix in {".pyx", ".pxd", ".pxi", ".h"}
)
license_text = (repo / "LICENSE").read_bytes()
# The version is written once, in _version.py; the file names and metadata carry it.
found = re.search(r'^__version__ = "([^"]+)"$', (package / "_version.py").read_text(), re.M)
version = found.group(1) if found else "?"
dist_info = f"loopcore-{version}.dist-info"
problems = []

with zipfile.ZipFile(wheel) as zf:
    names = zf.namelist()
    wheel_license = zf.read(f"{dist_info}/licenses/LICENSE") if (
        f"{dist_info}/licenses/LICENSE" in names
    ) else None
    metadata = zf.read(f"{dist_info}/METADATA") if f"{dist_info}/METADATA" in names else b""
if wheel.name.endswith("-none-any.whl"):
    problems.append(f"{wheel.name} is a pure wheel")
if not wheel.name.startswith(f"loopcore-{version}-"):
    problems.append(f"{wheel.name} is not version {version} (src/loopcore/_version.py)")
for name in pyx:
    stem = name.removesuffix(".pyx")
    if not any(
        n.startswith(f"loopcore/{stem}.") and n.endswith((".so", ".pyd")) for n in names
    ):
        problems.append(f"wheel lacks the compiled module loopcore/{stem}")
problems += [f"wheel lacks loopcore/{s}" for s in sources if f"loopcore/{s}" not in names]
problems += [f"wheel holds generated C {n}" for n in names if n.endswith((".c", ".cpp"))]
problems += [f"wheel holds test file {n}" for n in names if "tests/" in n or "/test_" in n]
if "loopcore/py.typed" not in names:
    problems.append("wheel lacks loopcore/py.typed")
if wheel_license is None:
    problems.append(f"wheel lacks {dist_info}/licenses/LICENSE")
elif wheel_license != license_text:
    problems.append("the wheel's LICENSE differs from the checkout's")

meta = email.message_from_bytes(metadata)
if meta["Version"] != version:
    problems.append(f"wheel METADATA: Version {meta['Version']}, expected {version}")
if meta["License-Expression"] != "MIT" or "LICENSE" not in (meta.get_all("License-File") or []):
    problems.append("wheel METADATA: expected License-Expression: MIT and License-File: LICENSE")
# Hard dependencies: only what the per-call path needs; the rest are extras.
hard = sorted(
    re.match(r"[A-Za-z0-9._-]+", req).group(0).lower()
    for req in meta.get_all("Requires-Dist") or []
    if "extra ==" not in req
)
if hard != ["json5", "xxhash"]:
    problems.append(f"wheel METADATA: hard dependencies {hard}, expected json5 and xxhash only")
extras = set(meta.get_all("Provides-Extra") or [])
for extra in ("cli", "plot", "prometheus", "docs", "test", "bench", "dev", "dask", "redis",
              "mcp", "langchain", "openai-agents", "pydantic-ai"):
    if extra not in extras:
        problems.append(f"wheel METADATA: no [{extra}] extra")

with tarfile.open(sdist) as tf:
    top = f"loopcore-{version}"
    members = [m.split("/", 1)[1] for m in tf.getnames() if m.startswith(f"{top}/")]
    held = tf.extractfile(f"{top}/LICENSE") if "LICENSE" in members else None
    sdist_license = held.read() if held is not None else None
problems += [f"sdist lacks src/loopcore/{s}" for s in sources if f"src/loopcore/{s}" not in members]
problems += [f"sdist holds generated C {m}" for m in members if m.endswith((".c", ".cpp"))]
problems += [
    f"sdist lacks {f}"
    for f in ("setup.py", "pyproject.toml", "LICENSE", "README.md", "mkdocs.yml", "docs/index.md")
    if f not in members
]
if sdist_license is not None and sdist_license != license_text:
    problems.append("the sdist's LICENSE differs from the checkout's")

for problem in problems:
    print(f"check-wheel: {problem}")
if problems:
    sys.exit(1)
print(
    f"check-wheel: {wheel.name}: {len(pyx)} compiled modules, {len(sources)} Cython sources,"
    f" LICENSE, hard dependencies {', '.join(hard)}"
)
PY

step="wheelhouse"
# The wheel with its test extra, as cibuildwheel installs it ([tool.cibuildwheel]
# test-extras); the extra's own dependencies (numpy, prometheus_client ...) come along.
mapfile -t test_extras < <("$tools" - "$repo/pyproject.toml" <<'PY'
import sys

try:
    import tomllib
except ImportError:  # Python 3.10: build depends on tomli there
    import tomli as tomllib

with open(sys.argv[1], "rb") as f:
    print("\n".join(tomllib.load(f)["tool"]["cibuildwheel"]["test-extras"]))
PY
)
if ((${#test_extras[@]} == 0)); then
    echo "check-wheel: no [tool.cibuildwheel] test-extras in pyproject.toml"
    exit 1
fi
extras=$(IFS=,; echo "${test_extras[*]}")
logged wheelhouse "$tools" -m pip download --only-binary=:all: --dest "$work/wheelhouse" \
    "$wheel[$extras]"

step="the wheel alone, without extras (--no-index)"
# Hard dependencies only: the guard works, `loopcore demo` runs, nothing heavy loads.
"$python" -m venv "$work/bare"
bare="$work/bare/bin/python"
logged bare-install "${offline_pip[@]}" "$bare" -m pip install --no-index --only-binary=:all: \
    --find-links "$work/wheelhouse" "$wheel"
mkdir "$work/bare-run"
(
    cd "$work/bare-run"
    logged bare-import "${clean_env[@]}" "$bare" -c '
import sys
import loopcore
guard = loopcore.ToolLoopGuard({"enabled": True})
for _ in range(21):
    decision = guard.before_call("read", {"path": "a"})
    if decision.blocked:
        break
    guard.after_call("read", {"path": "a"}, result="same")
assert decision.blocked, decision
heavy = [m for m in ("numpy", "tqdm", "matplotlib", "prometheus_client", "redis") if m in sys.modules]
assert not heavy, heavy
assert loopcore.IMPLEMENTATION == "cython", loopcore.IMPLEMENTATION
'
    logged bare-demo "${clean_env[@]}" "$work/bare/bin/loopcore" demo --no-color
    # Without numpy, `loopcore replay` is a one-line usage error pointing at the cli extra.
    rc=0
    "${clean_env[@]}" "$work/bare/bin/loopcore" replay --enable "$repo/examples/stuck-session.jsonl" \
        >"$work/log/bare-replay.out" 2>"$work/log/bare-replay.err" || rc=$?
    if ((rc != 2)) || [[ $(wc -l <"$work/log/bare-replay.err") -ne 1 ]] ||
        ! grep -qF "pip install 'loopcore[cli]'" "$work/log/bare-replay.err"; then
        cat "$work/log/bare-replay.err"
        echo "check-wheel: without numpy, loopcore replay exited $rc, expected 2 and one line" \
            "naming pip install 'loopcore[cli]'"
        exit 1
    fi
)

step="install into a fresh venv (--no-index)"
"$python" -m venv "$work/venv"
venv="$work/venv/bin/python"
logged install "${offline_pip[@]}" "$venv" -m pip install --no-index --only-binary=:all: \
    --find-links "$work/wheelhouse" "$wheel[$extras]"

step="tests against the installed wheel"
mkdir "$work/run"
# README.md, docs/ and mkdocs.yml for tests/test_readme.py; LICENSE for tests/test_packaging.py;
# examples/ for tests/test_examples.py.
cp -R "$repo/tests" "$repo/fuzz" "$repo/pyproject.toml" "$repo/README.md" "$repo/docs" \
    "$repo/mkdocs.yml" "$repo/LICENSE" "$repo/examples" "$work/run/"
find "$work/run" -name __pycache__ -prune -exec rm -rf {} +
cd "$work/run"
location=$("${clean_env[@]}" "$venv" -c \
    'import loopcore, sysconfig; print(loopcore.IMPLEMENTATION, sysconfig.get_path("platlib"), loopcore.__file__)')
read -r implementation platlib imported <<<"$location"
echo "check-wheel: loopcore $implementation from $imported"
if [[ $imported != "$platlib"/* || $imported == "$repo"/* || $implementation != cython ]]; then
    echo "check-wheel: expected the compiled core from $platlib, outside $repo"
    exit 1
fi
logged pytest "${clean_env[@]}" LOOPCORE_EXPECT_EXTENSIONS=1 LOOPCORE_HYPOTHESIS_PROFILE=default \
    "$venv" -m pytest -p no:cacheprovider tests
summary=$(tail -n 1 "$work/log/pytest.log" | tr -d '=' | xargs)
echo "check-wheel: $summary"

step="pure-Python build of the sdist"
logged pure-build "${clean_env[@]}" LOOPCORE_NO_EXTENSIONS=1 "$tools" -m pip wheel --no-deps \
    --wheel-dir "$work/pure" "$sdist"
pure=$(echo "$work"/pure/*.whl)
if [[ $pure != *-py3-none-any.whl ]]; then
    echo "check-wheel: LOOPCORE_NO_EXTENSIONS=1 built $pure, not a pure wheel"
    exit 1
fi
logged pure-install "${offline_pip[@]}" "$venv" -m pip install --no-index --no-deps \
    --force-reinstall "$pure"
implementation=$("${clean_env[@]}" "$venv" -c 'import loopcore; print(loopcore.IMPLEMENTATION)')
if [[ $implementation != python ]]; then
    echo "check-wheel: the pure-Python build loaded the $implementation core"
    exit 1
fi

step="the suite rejects a build without compiled twins"
guard=tests/test_api.py::test_implementation_reports_the_loaded_core
rc=0
"${clean_env[@]}" LOOPCORE_EXPECT_EXTENSIONS=1 "$venv" -m pytest -p no:cacheprovider -q "$guard" \
    >"$work/log/guard.log" 2>&1 || rc=$?
if ((rc != 1)) || ! grep -q "FAILED $guard" "$work/log/guard.log"; then
    tail -n 30 "$work/log/guard.log"
    echo "check-wheel: $guard did not fail against the pure-Python build (exit $rc)"
    exit 1
fi

echo "check-wheel: PASS $(basename "$wheel") (LICENSE and metadata checked; bare install works;" \
    "$summary against the installed wheel; pure-Python sdist build installs and is caught by" \
    "$guard) in $((SECONDS - started)) s"
