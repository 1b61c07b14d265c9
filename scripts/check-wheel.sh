#!/usr/bin/env bash
# What the wheels workflow does for one platform, on this machine: build the sdist
# and, from it, a wheel (python -m build); check what both hold; install the wheel
# into a fresh virtualenv from a local wheelhouse only (--no-index); run the test
# suite from a directory outside the checkout, so that it imports the installed
# wheel; then build the sdist without extensions and check that the suite rejects
# that build when compiled twins are expected. Ends with a one-line verdict.
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
clean_env=(env -u PYTHONPATH -u LOOPCORE_NO_EXTENSIONS -u LOOPCORE_EXPECT_EXTENSIONS
    -u LOOPCORE_CYTHON_TRACE -u LOOPCORE_DEBUG_CYTHON)
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
import sys
import tarfile
import zipfile
from pathlib import Path

repo, sdist, wheel = (Path(arg) for arg in sys.argv[1:])
package = repo / "src" / "loopcore"
pyx = sorted(p.name for p in package.glob("*.pyx"))
sources = sorted(p.name for p in package.iterdir() if p.suffix in {".pyx", ".pxd", ".pxi", ".h"})
problems = []

with zipfile.ZipFile(wheel) as zf:
    names = zf.namelist()
if wheel.name.endswith("-none-any.whl"):
    problems.append(f"{wheel.name} is a pure wheel")
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

with tarfile.open(sdist) as tf:
    members = [m.split("/", 1)[1] for m in tf.getnames() if "/" in m]
problems += [f"sdist lacks src/loopcore/{s}" for s in sources if f"src/loopcore/{s}" not in members]
problems += [f"sdist holds generated C {m}" for m in members if m.endswith((".c", ".cpp"))]
problems += [f"sdist lacks {f}" for f in ("setup.py", "pyproject.toml") if f not in members]

for problem in problems:
    print(f"check-wheel: {problem}")
if problems:
    sys.exit(1)
print(f"check-wheel: {wheel.name}: {len(pyx)} compiled modules, {len(sources)} Cython sources")
PY

step="wheelhouse"
# The test requirements are the ones cibuildwheel installs next to the wheel.
mapfile -t test_requires < <("$tools" - "$repo/pyproject.toml" <<'PY'
import sys

try:
    import tomllib
except ImportError:  # Python 3.10: build depends on tomli there
    import tomli as tomllib

with open(sys.argv[1], "rb") as f:
    print("\n".join(tomllib.load(f)["tool"]["cibuildwheel"]["test-requires"]))
PY
)
if ((${#test_requires[@]} == 0)); then
    echo "check-wheel: no [tool.cibuildwheel] test-requires in pyproject.toml"
    exit 1
fi
logged wheelhouse "$tools" -m pip download --only-binary=:all: --dest "$work/wheelhouse" \
    "$wheel" "${test_requires[@]}"

step="install into a fresh venv (--no-index)"
"$python" -m venv "$work/venv"
venv="$work/venv/bin/python"
logged install "${offline_pip[@]}" "$venv" -m pip install --no-index --only-binary=:all: \
    --find-links "$work/wheelhouse" "$wheel" "${test_requires[@]}"

step="tests against the installed wheel"
mkdir "$work/run"
cp -R "$repo/tests" "$repo/fuzz" "$repo/pyproject.toml" "$work/run/"
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

echo "check-wheel: PASS $(basename "$wheel") ($summary against the installed wheel;" \
    "pure-Python sdist build installs and is caught by $guard) in $((SECONDS - started)) s"
