"""Do the code samples of README.md and docs/*.md run as written?

Every fenced ``python`` block runs on its own, in a fresh interpreter and an
empty working directory, and must exit 0: a sample that names something it
never defines, or that a change to the package broke, fails here. The block is
written to a file padded so that its line numbers are the Markdown file's, so a
traceback points at the document. A block right after an HTML comment
``<!-- no-run -->`` is not run (for Python a reader is not meant to run as is);
it must still compile. A block right after ``<!-- needs MODULE [EXTRA] -->``
runs only where MODULE imports (an extra's package): elsewhere it is skipped
with the install command, except under ``LOOPCORE_EXPECT_INTEGRATIONS=1``,
where a missing package fails it. A block that needs ``redis`` also gets the
suite's Redis server in ``LOOPCORE_REDIS_URL``.

Shell blocks (``sh``, ``bash``, ``console``, ``shell``) are not run; the
``loopcore`` commands and options they show must exist, and every extra that a
document names (``loopcore[cli]``, ``'.[test]'``) must be one pyproject.toml
declares.

The documents sit next to ``tests/``: in a checkout, and in the directories the
wheel checks copy the suite to (they copy README.md, docs/ and mkdocs.yml too).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from .conftest import require

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NO_RUN = "<!-- no-run -->"
NEEDS = re.compile(r"<!-- needs (?P<module>[\w.]+) \[(?P<extra>[\w-]+)\] -->")
SHELL = frozenset({"sh", "bash", "console", "shell"})
TIMEOUT = 180
#: What separates commands on one shell line (redirections are not expected).
OPERATORS = frozenset({"&&", "||", "|", ";", "&"})

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,})[ \t]*(?P<lang>[\w+-]*)[^`]*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it starts (1-based line of its first code line), its text."""

    path: Path
    line: int
    lang: str
    code: str
    no_run: bool
    #: (module, extra) from a ``<!-- needs ... -->`` comment right before the block.
    needs: tuple[str, str] | None = None

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of one Markdown file, indentation of the fence removed."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, ticks, lang = opening["indent"], opening["ticks"], opening["lang"].lower()
        before = [line.strip() for line in lines[:i] if line.strip()]
        no_run = bool(before) and before[-1] == NO_RUN
        needs = NEEDS.fullmatch(before[-1]) if before else None
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.fullmatch(rf"[ \t]*`{{{len(ticks)},}}[ \t]*", lines[j]):
            line = lines[j]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            j += 1
        if j == len(lines):
            raise AssertionError(f"{path}:{i + 1}: a code fence that is never closed")
        code = "\n".join(body) + "\n"
        wanted = (needs["module"], needs["extra"]) if needs else None
        found.append(Block(path, i + 2, lang, code, no_run, wanted))
        i = j + 1
    return found


ALL = [block for path in DOCUMENTS for block in blocks(path)]
PYTHON = [block for block in ALL if block.lang in {"python", "py"}]


def test_the_documents_are_here() -> None:
    # Without them every parametrised test below would vanish instead of failing.
    assert (ROOT / "README.md").is_file()
    assert (ROOT / "docs" / "index.md").is_file()
    assert any(block.path.name == "README.md" and not block.no_run for block in PYTHON)
    assert any(block.path.parent.name == "docs" and not block.no_run for block in PYTHON)


@pytest.mark.parametrize("block", PYTHON, ids=[block.name for block in PYTHON])
def test_python_block_runs_as_written(
    block: Block, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # Padding keeps the document's line numbers in tracebacks.
    source = "\n" * (block.line - 1) + block.code
    if block.no_run:
        compile(source, block.name, "exec")  # not run, but it must still be Python
        return
    env = dict(os.environ)
    if block.needs:
        require(*block.needs)
        if block.needs[0] == "redis":  # a block that talks to Redis gets the suite's server
            env["LOOPCORE_REDIS_URL"] = request.getfixturevalue("redis_url")
    script = tmp_path / f"{block.path.stem}_{block.line}.py"
    script.write_text(source, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        env=env,
    )
    assert done.returncode == 0, f"{block.name} failed:\n{done.stderr[-4000:]}"


def _shell_commands() -> list[tuple[str, list[str]]]:
    """Every command of the shell blocks, split into words (console: only ``$`` lines)."""
    commands: list[tuple[str, list[str]]] = []
    for block in ALL:
        if block.lang not in SHELL:
            continue
        for line in block.code.splitlines():
            if block.lang == "console":
                if not line.startswith("$ "):
                    continue
                line = line[2:]
            line = line.split(" #", 1)[0].strip()
            if not line or line.startswith("#"):
                continue
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            try:
                tokens = list(lexer)
            except ValueError:  # an unbalanced quote: shlex cannot read it, nor can sh
                raise AssertionError(f"{block.name}: cannot parse {line!r}") from None
            words: list[str] = []
            for token in [*tokens, ";"]:
                if token not in OPERATORS:
                    words.append(token)
                    continue
                while words and "=" in words[0] and not words[0].startswith("-"):
                    words = words[1:]  # VAR=value before the command
                if words:
                    commands.append((block.name, words))
                words = []
    return commands


def _loopcore_invocations() -> dict[str, list[tuple[str, list[str]]]]:
    """Per ``loopcore`` subcommand, where it is shown and the options given to it."""
    found: dict[str, list[tuple[str, list[str]]]] = {}
    for where, words in _shell_commands():
        if words[0] == "loopcore":
            rest = words[1:]
        elif words[:3] == ["python", "-m", "loopcore"]:
            rest = words[3:]
        else:
            continue
        sub = rest[0] if rest and not rest[0].startswith("-") else ""
        options = [w.split("=", 1)[0] for w in rest if w.startswith("--")]
        found.setdefault(sub, []).append((where, options))
    return found


def test_the_documents_link_only_inside_the_repository() -> None:
    # The project explains itself: README and docs/ point at each other, never outside.
    outside = [
        f"{path.relative_to(ROOT).as_posix()}:{n}"
        for path in DOCUMENTS
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\]\((?:https?:)?//|<https?://", line)
    ]
    assert not outside, f"links outside the repository: {outside}"


def test_loopcore_commands_in_shell_blocks_exist() -> None:
    invocations = _loopcore_invocations()
    assert "demo" in invocations  # the README shows it: an empty scan would pass vacuously
    for sub, uses in sorted(invocations.items()):
        command = [sys.executable, "-m", "loopcore", *([sub] if sub else []), "--help"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, f"{uses[0][0]}: `loopcore {sub}` is not a command"
        for where, options in uses:
            for option in options:
                if option in {"--help", "--version"}:
                    continue
                assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", done.stdout), (
                    f"{where}: `loopcore {sub}` has no option {option}"
                )


def _declared_extras() -> set[str]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # the test extra installs tomli there
        import tomli as tomllib
    with (ROOT / "pyproject.toml").open("rb") as f:
        return set(tomllib.load(f)["project"]["optional-dependencies"])


def test_extras_named_in_the_documents_exist() -> None:
    declared = _declared_extras()
    named: list[tuple[str, str]] = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"(?:loopcore|['\"]\.)\[([\w,\s-]+)\]", text):
            named += [(path.name, extra.strip()) for extra in match[1].split(",")]
    assert named, "no document names an extra; the install lines are missing"
    unknown = sorted({f"{where}: [{extra}]" for where, extra in named if extra not in declared})
    assert not unknown, f"extras not in pyproject.toml: {unknown}"
