"""How is a gateway config file read (bounded, JSON5, ``$include``), and whose agent entry applies?

SPEC §9.7 and §8.14. A file is read at most ``MAX_FILE_BYTES`` (plus one byte,
to tell that it is longer), parsed as JSON5, and every ``$include`` in it is
replaced, depth first, by the files it names, deep-merged. Includes must stay
inside the top-level file's directory once symlinks are resolved. A mapping
handed over already parsed has no file to resolve an include against, so one
is rejected. The agent whose ``tools.loopDetection`` overlays the global block
is looked up in ``agents.list`` and ``agents.entries``.
"""

from __future__ import annotations

import codecs
import json
import logging
import os
import re
from collections.abc import Mapping
from typing import Any

from ._config import ConfigError, _boolean, _child
from ._names import describe

__all__ = [
    "IGNORED_KEYS",
    "INCLUDE_KEY",
    "MAX_FILE_BYTES",
    "MAX_INCLUDE_DEPTH",
    "agent_entry",
    "deep_merge",
    "load_file",
    "read_file",
    "reject_includes",
]

#: The largest config file read, in bytes (2 MiB), top-level or included.
MAX_FILE_BYTES = 2 * 1024 * 1024
#: How many files deep ``$include`` may nest below the top-level file.
MAX_INCLUDE_DEPTH = 10
INCLUDE_KEY = "$include"
#: Keys dropped wherever they appear in a file: harmless in Python, but a config shared
#: with a JavaScript gateway must not carry them (prototype pollution there).
IGNORED_KEYS = frozenset({"__proto__", "constructor", "prototype"})

# An ``$include`` key as JSON5 may spell it: double-quoted, single-quoted or bare.
_KEY_PATTERN = re.compile(r"""(?:"\$include"|'\$include'|(?<![\w$])\$include(?![\w$]))\s*:""")
_MISSING: Any = object()

logger = logging.getLogger("loopcore")


def _text(path: str, shown: str, note: str) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)  # never more, whatever the file is
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ConfigError(f"{shown}: cannot read config file: {reason}{note}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(
            f"{shown}: config file is larger than 2 MiB ({MAX_FILE_BYTES} bytes){note}"
        )
    if data.startswith(codecs.BOM_UTF8):  # left by some editors; JSON5 does not allow it
        data = data[len(codecs.BOM_UTF8) :]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{shown}: cannot read config file: {exc}{note}") from None


def _parse(text: str, shown: str, note: str) -> object:
    try:
        # Plain JSON is the common case, and the json5 parser is many times slower.
        return json.loads(text)
    except ValueError:
        pass
    except RecursionError:
        raise ConfigError(f"{shown}: invalid JSON5: nested too deeply{note}") from None
    try:
        import json5  # only when a config file is read

        return json5.loads(text)
    except ValueError as exc:
        # json5 reports "<string>:LINE ..."; name the file instead.
        detail = re.sub(r"^<string>:(\d+)\s*", "", str(exc))
        match = re.match(r"^<string>:(\d+)", str(exc))
        where = f"{shown}:{match.group(1)}" if match else shown
        raise ConfigError(f"{where}: invalid JSON5: {detail}{note}") from None
    except RecursionError:
        raise ConfigError(f"{shown}: invalid JSON5: nested too deeply{note}") from None


def read_file(path: str | os.PathLike[str]) -> object:
    """One JSON5 file, parsed as it is (``$include`` left alone); bounded to 2 MiB."""
    shown = os.fspath(path)
    return _parse(_text(shown, shown, ""), shown, "")


def deep_merge(base: object, over: object) -> object:
    """``over`` merged into ``base``: mappings key by key, recursively; lists concatenated;
    anything else (or two values of different kinds) ``over`` wins. Inputs are not changed."""
    if isinstance(base, Mapping) and isinstance(over, Mapping):
        out = {key: value for key, value in base.items() if key not in IGNORED_KEYS}
        for key, value in over.items():
            if key not in IGNORED_KEYS:
                out[key] = deep_merge(out[key], value) if key in out else value
        return out
    if isinstance(base, list) and isinstance(over, list):
        return [*base, *over]
    return over


class _File:
    """One file being resolved: where it is, how errors name it, its ``$include`` sites."""

    __slots__ = ("_lines", "named", "real", "seen", "shown", "text", "tree")

    def __init__(self, named: str, real: str, shown: str, text: str, tree: object) -> None:
        self.named, self.real, self.shown, self.text, self.tree = named, real, shown, text, tree
        self.seen = 0  # $include keys met so far, in document order
        self._lines: list[int] | None = None

    def where(self, site: int) -> str:
        """``file:line`` of the ``site``-th ``$include`` key, or the file alone.

        Lines come from a scan of the text, trusted only when it finds as many
        ``$include`` keys as the parsed tree holds (an include spelled in a comment
        or a string would shift them otherwise).
        """
        if self._lines is None:
            found, line, start = [], 1, 0
            for match in _KEY_PATTERN.finditer(self.text):  # one pass, however many keys
                line += self.text.count("\n", start, match.start())
                start = match.start()
                found.append(line)
            self._lines = found if len(found) == _count_includes(self.tree) else []
        return f"{self.shown}:{self._lines[site]}" if site < len(self._lines) else self.shown


def _count_includes(value: object) -> int:
    if isinstance(value, dict):
        return sum(
            (key == INCLUDE_KEY) + _count_includes(item)
            for key, item in value.items()
            if key not in IGNORED_KEYS
        )
    if isinstance(value, list):
        return sum(_count_includes(item) for item in value)
    return 0


class _Resolver:
    def __init__(self, top: str) -> None:
        self.top = top
        self.root = os.path.dirname(os.path.abspath(top))
        self.root_real = os.path.realpath(self.root)
        self.chain: list[_File] = []

    def _name(self, named: str) -> str:
        """A file named as the top-level one is: relative to it if it was given so."""
        rel = os.path.relpath(named, self.root)
        if rel.startswith(os.pardir):
            return named
        return os.path.join(os.path.dirname(self.top), rel)

    def _chain(self, named: str) -> str:
        return " -> ".join(
            os.path.relpath(n, self.root) for n in [*(f.named for f in self.chain), named]
        )

    def file(self, named: str, shown: str, note: str) -> object:
        real = os.path.realpath(named)
        text = _text(named, shown, note)
        current = _File(named, real, shown, text, _parse(text, shown, note))
        self.chain.append(current)
        try:
            return self._walk(current.tree, current)
        finally:
            self.chain.pop()

    def _walk(self, value: object, file: _File) -> object:
        if isinstance(value, list):
            return [self._walk(item, file) for item in value]
        if not isinstance(value, dict):
            return value
        out: dict[str, object] = {}
        included = _MISSING
        site = -1
        for key, item in value.items():
            if key in IGNORED_KEYS:
                continue
            if key == INCLUDE_KEY:
                site = file.seen
                file.seen += 1
                included = self._include(item, file, site)
            else:
                out[key] = self._walk(item, file)
        if included is _MISSING:
            return out
        if not out:
            return included
        if not isinstance(included, dict):
            raise ConfigError(
                f"{file.where(site)}: $include: keys beside $include need the included "
                f"content to be a mapping, got {describe(included)}"
            )
        return deep_merge(included, out)

    def _include(self, value: object, file: _File, site: int) -> object:
        if isinstance(value, str):
            paths = [value]
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if not isinstance(item, str):
                    raise ConfigError(
                        f"{file.where(site)}: $include[{index}]: expected a path string, "
                        f"got {describe(item)}"
                    )
            paths = value
        else:
            raise ConfigError(
                f"{file.where(site)}: $include: expected a path string or a list of them, "
                f"got {describe(value)}"
            )
        merged = _MISSING
        for path in paths:
            loaded = self._target(path, file, site)
            merged = loaded if merged is _MISSING else deep_merge(merged, loaded)
        return {} if merged is _MISSING else merged

    def _target(self, path: str, file: _File, site: int) -> object:
        where = file.where(site)
        if not path.strip() or "\x00" in path:
            raise ConfigError(f"{where}: $include: expected a file path, got {describe(path)}")
        # Relative to the including file as it was named; an absolute path stays as it is.
        named = os.path.normpath(os.path.join(os.path.dirname(file.named), path))
        real = os.path.realpath(named)
        if os.path.commonpath([self.root_real, real]) != self.root_real:
            raise ConfigError(
                f"{where}: $include {describe(path)} is outside the config directory "
                f"{self.root_real} (symlinks resolved)"
            )
        if any(f.real == real for f in self.chain):
            raise ConfigError(f"{where}: $include cycle: {self._chain(named)}")
        if len(self.chain) > MAX_INCLUDE_DEPTH:
            raise ConfigError(
                f"{where}: $include nested deeper than {MAX_INCLUDE_DEPTH} files: "
                f"{self._chain(named)}"
            )
        return self.file(named, self._name(named), f" (included from {where})")


def load_file(path: str | os.PathLike[str]) -> object:
    """A gateway config file parsed, its ``$include`` resolved (SPEC §9.7)."""
    top = os.fspath(path)
    resolver = _Resolver(top)
    try:
        return resolver.file(os.path.abspath(top), top, "")
    except RecursionError:  # a deep tree spread over several files
        raise ConfigError(f"{top}: nested too deeply") from None


def reject_includes(root: Mapping[str, Any]) -> None:
    """A ``ConfigError`` for the first ``$include`` in an already parsed mapping.

    With no file, a relative include has nothing to be relative to, and the
    directory bound has nothing to bound: guessing the current directory would
    make a config mean different things in different processes.
    """
    stack: list[tuple[object, str]] = [(root, "")]
    seen: set[int] = set()
    while stack:
        value, path = stack.pop()
        if id(value) in seen:  # a mapping that contains itself
            continue
        seen.add(id(value))
        if isinstance(value, Mapping):
            for key, item in value.items():
                name = key if isinstance(key, str) else describe(key)
                sub = f"{path}.{name}" if path else name
                if key == INCLUDE_KEY:
                    raise ConfigError(
                        f"{sub}: $include needs a config file to resolve it against; "
                        "pass the file's path to load_config instead of a parsed mapping"
                    )
                if isinstance(item, (Mapping, list, tuple)):
                    stack.append((item, sub))
        elif isinstance(value, (list, tuple)):
            stack.extend(
                (item, f"{path}[{index}]")
                for index, item in enumerate(value)
                if isinstance(item, (Mapping, list, tuple))
            )


# ---------------------------------------------------------------------------
# Agent entries (SPEC §8.14)


def _entry_path(agent: object) -> str:
    if isinstance(agent, str) and re.fullmatch(r"[A-Za-z0-9_-]+", agent):
        return f"agents.entries.{agent}"
    return f"agents.entries[{describe(agent)}]"


def _agents(root: Mapping[str, Any]) -> dict[object, tuple[str, Mapping[str, Any]]]:
    """Every agent entry by id with its dotted path: ``agents.list``, then ``agents.entries``,
    whose entry replaces the list's for an id in both (SPEC §8.14, §12.12)."""
    agents = _child(root, "agents", "agents")
    table: dict[object, tuple[str, Mapping[str, Any]]] = {}
    listed = agents.get("list") if agents else None
    if listed is not None and not isinstance(listed, list):
        raise ConfigError(f"agents.list: expected a list, got {describe(listed)}")
    for index, entry in enumerate(listed or ()):
        if not isinstance(entry, Mapping):
            raise ConfigError(f"agents.list[{index}]: expected a mapping, got {describe(entry)}")
        agent = entry.get("id")
        if isinstance(agent, str) and agent not in table:  # the first of a repeated id, as before
            table[agent] = (f"agents.list[{index}]", entry)
    entries = _child(agents, "entries", "agents.entries") if agents else None
    for agent, entry in (entries or {}).items():
        path = _entry_path(agent)
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{path}: expected a mapping, got {describe(entry)}")
        if agent in table:
            logger.warning(
                "loop detection: agent %r is in both agents.list and agents.entries; "
                "using its agents.entries entry",
                agent,
            )
        table[agent] = (path, entry)
    return table


def _default_agent(table: Mapping[object, tuple[str, Mapping[str, Any]]]) -> object:
    """The id of the one entry marked ``default: true``; None when none or several are."""
    marked = []
    for agent, (path, entry) in table.items():
        flag = entry.get("default")
        if flag is not None and _boolean(f"{path}.default", flag):
            marked.append(agent)
    if len(marked) > 1:
        logger.warning(
            "loop detection: %d agents are marked default: true (%s); using the global settings",
            len(marked),
            ", ".join(map(repr, marked)),
        )
    return marked[0] if len(marked) == 1 else None


def agent_entry(
    root: Mapping[str, Any], agent_id: str | None
) -> tuple[str, Mapping[str, Any]] | None:
    """The dotted path and entry of agent ``agent_id`` (with no id, of the one agent marked
    ``default: true``); None for none, and a WARNING for an id that has no entry."""
    table = _agents(root)
    chosen = _default_agent(table) if agent_id is None else agent_id
    if chosen is None:
        return None
    found = table.get(chosen)
    if found is None:
        logger.warning(
            "loop detection: no agent with id %r in agents.list or agents.entries; "
            "using the global settings",
            chosen,
        )
    return found
