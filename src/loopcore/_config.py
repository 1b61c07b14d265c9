"""How is ``tools.loopDetection`` read, validated, repaired and overlaid? (SPEC §1, §8.14)"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

from ._names import describe, exact_str

__all__ = [
    "ConfigError",
    "DetectorSwitches",
    "LoopDetectionConfig",
    "Mode",
    "PostCompactionGuardConfig",
    "coerce_config",
    "config_mapping",
    "load_block",
    "load_config",
    "overlay",
    "resolve_config",
    "with_setting",
    "with_settings",
]

logger = logging.getLogger("loopcore")

GLOBAL_PATH = "tools.loopDetection"

#: What the guard does with its decisions (SPEC §9.5): act on them, or only report them.
Mode = Literal["enforce", "observe"]


class ConfigError(ValueError):
    """A loop-detection setting is malformed; the message names its dotted path."""


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


#: The largest ``historySize``, threshold or guard window a config accepts as written
#: (SPEC §11); an ordering repair may go past it (SPEC §12.6).
MAX_SETTING = 1_000_000

#: Settings carried over from an already accepted config by ``with_settings``, by dotted
#: path: a repaired value among them may exceed ``MAX_SETTING`` (SPEC §12.6).
_ACCEPTED: ContextVar[Mapping[str, int] | None] = ContextVar("loopcore_accepted", default=None)


def _positive_int(path: str, value: object) -> int:
    """A positive integer up to ``MAX_SETTING``, as a plain ``int``; else ``ConfigError``."""
    cls = type(value)
    if cls is not bool and issubclass(cls, int):
        number = int.__index__(value)  # type: ignore[arg-type]
        if 1 <= number <= MAX_SETTING:
            return number
        accepted = _ACCEPTED.get()
        if number > MAX_SETTING and accepted is not None and accepted.get(path) == number:
            return number
    raise ConfigError(
        f"{path}: expected a positive integer up to {MAX_SETTING}, got {describe(value)}"
    )


def _boolean(path: str, value: object) -> bool:
    if type(value) is not bool:
        raise ConfigError(f"{path}: expected true or false, got {describe(value)}")
    return value


def _mode(path: str, value: object) -> Mode:
    text = exact_str(value) if isinstance(value, str) else None
    if text == "enforce":
        return "enforce"
    if text == "observe":
        return "observe"
    raise ConfigError(f"{path}: expected 'enforce' or 'observe', got {describe(value)}")


#: Keys users carry over from elsewhere, with the key loopcore reads instead (SPEC §8.15 F2).
_RENAMED = {"maxTurns": "turnLimit"}


def _canonical_keys(block: object, path: str, known: tuple[str, ...]) -> dict[str, Any]:
    """``block`` with its keys mapped to their camelCase spelling; unknown keys rejected."""
    if not isinstance(block, Mapping):
        raise ConfigError(f"{path}: expected a mapping, got {describe(block)}")
    by_spelling = {name: name for name in known}
    by_spelling.update({_snake(name): name for name in known})
    out: dict[str, Any] = {}
    for key, value in block.items():
        name = by_spelling.get(key) if isinstance(key, str) else None
        if name is None:
            import difflib  # only for a bad key: kept off the import of loopcore

            hint = difflib.get_close_matches(str(key), list(by_spelling), n=1, cutoff=0.5)
            if _RENAMED.get(key) in by_spelling:
                hint = [_RENAMED[key]]
            suggestion = f"; did you mean {by_spelling[hint[0]]!r}?" if hint else ""
            known_list = ", ".join(known)
            raise ConfigError(f"{path}.{key}: unknown key{suggestion} (known keys: {known_list})")
        if name in out:
            raise ConfigError(f"{path}.{name}: given twice (as {name!r} and {_snake(name)!r})")
        out[name] = value
    return out


@dataclass(frozen=True, slots=True)
class DetectorSwitches:
    """Which pattern detectors run (``tools.loopDetection.detectors``)."""

    generic_repeat: bool = True
    known_poll_no_progress: bool = True
    ping_pong: bool = True
    argument_churn: bool = True

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            _boolean(f"{GLOBAL_PATH}.detectors.{_camel(f.name)}", getattr(self, f.name))

    @classmethod
    def from_mapping(
        cls, block: Mapping[str, Any], path: str = f"{GLOBAL_PATH}.detectors"
    ) -> DetectorSwitches:
        return cls(**_snake_keys(_nested("detectors", block, path)))


@dataclass(frozen=True, slots=True)
class PostCompactionGuardConfig:
    """Settings of the post-compaction guard (``tools.loopDetection.postCompactionGuard``)."""

    window_size: int = 3

    def __post_init__(self) -> None:
        window = _positive_int(f"{GLOBAL_PATH}.postCompactionGuard.windowSize", self.window_size)
        object.__setattr__(self, "window_size", window)

    @classmethod
    def from_mapping(
        cls, block: Mapping[str, Any], path: str = f"{GLOBAL_PATH}.postCompactionGuard"
    ) -> PostCompactionGuardConfig:
        return cls(**_snake_keys(_nested("postCompactionGuard", block, path)))


_DETECTOR_KEYS = tuple(_camel(f.name) for f in dataclasses.fields(DetectorSwitches))
_GUARD_KEYS = tuple(_camel(f.name) for f in dataclasses.fields(PostCompactionGuardConfig))
_THRESHOLDS = (
    "history_size",
    "warning_threshold",
    "critical_threshold",
    "unknown_tool_threshold",
    "global_circuit_breaker_threshold",
)
#: The run-loop cutoffs (SPEC §8.11): unset (None) unless a config names them.
_CUTOFFS = ("turn_limit", "max_consecutive_error_batches", "max_idle_repeat_calls")


@dataclass(frozen=True, slots=True)
class LoopDetectionConfig:
    """The loop-detection settings, validated and with threshold ordering repaired."""

    enabled: bool | None = None
    history_size: int = 30
    warning_threshold: int = 10
    critical_threshold: int = 20
    unknown_tool_threshold: int = 10
    global_circuit_breaker_threshold: int = 30
    detectors: DetectorSwitches = field(default_factory=DetectorSwitches)
    post_compaction_guard: PostCompactionGuardConfig = field(
        default_factory=PostCompactionGuardConfig
    )
    turn_limit: int | None = None
    max_consecutive_error_batches: int | None = None
    max_idle_repeat_calls: int | None = None
    mode: Mode = "enforce"

    def __post_init__(self) -> None:
        if self.enabled is not None:
            _boolean(f"{GLOBAL_PATH}.enabled", self.enabled)
        for name in (*_THRESHOLDS, *_CUTOFFS):
            value = getattr(self, name)
            if value is not None or name in _THRESHOLDS:
                # Stored as a plain int: an int subclass's own methods never run later.
                value = _positive_int(f"{GLOBAL_PATH}.{_camel(name)}", value)
                object.__setattr__(self, name, value)
        object.__setattr__(self, "mode", _mode(f"{GLOBAL_PATH}.mode", self.mode))
        # Nested blocks may be given as mappings; from_mapping rejects anything else.
        if not isinstance(self.detectors, DetectorSwitches):
            object.__setattr__(self, "detectors", DetectorSwitches.from_mapping(self.detectors))
        guard = self.post_compaction_guard
        if not isinstance(guard, PostCompactionGuardConfig):
            object.__setattr__(
                self, "post_compaction_guard", PostCompactionGuardConfig.from_mapping(guard)
            )
        self._repair_ordering()
        self._warn_unreachable()

    def _repair_ordering(self) -> None:
        if self.critical_threshold <= self.warning_threshold:
            repaired = self.warning_threshold + 1
            logger.warning(
                "%s.criticalThreshold (%d) must exceed warningThreshold (%d); using %d",
                GLOBAL_PATH,
                self.critical_threshold,
                self.warning_threshold,
                repaired,
            )
            object.__setattr__(self, "critical_threshold", repaired)
        if self.global_circuit_breaker_threshold <= self.critical_threshold:
            repaired = self.critical_threshold + 1
            logger.warning(
                "%s.globalCircuitBreakerThreshold (%d) must exceed criticalThreshold (%d); "
                "using %d",
                GLOBAL_PATH,
                self.global_circuit_breaker_threshold,
                self.critical_threshold,
                repaired,
            )
            object.__setattr__(self, "global_circuit_breaker_threshold", repaired)

    def _warn_unreachable(self) -> None:
        for name in ("warning_threshold", "critical_threshold", "global_circuit_breaker_threshold"):
            value = getattr(self, name)
            if value > self.history_size:
                logger.warning(
                    "%s.%s (%d) exceeds historySize (%d): that detector can never fire",
                    GLOBAL_PATH,
                    _camel(name),
                    value,
                    self.history_size,
                )

    def run_loop_guards(self) -> tuple[int | None, int | None, int | None]:
        """``(turn_limit, max_consecutive_error_batches, max_idle_repeat_calls)``, None where
        unset; all None when ``enabled`` is False, which turns the cutoffs off (SPEC §8.11)."""
        if self.enabled is False:
            return (None, None, None)
        return (self.turn_limit, self.max_consecutive_error_batches, self.max_idle_repeat_calls)

    @classmethod
    def from_mapping(
        cls, block: Mapping[str, Any] | None, path: str = GLOBAL_PATH
    ) -> LoopDetectionConfig:
        """Build from a ``tools.loopDetection`` block (camelCase keys; snake_case accepted)."""
        if block is None:
            return cls()
        kwargs = _snake_keys(_validated(block, path))
        if "detectors" in kwargs:
            kwargs["detectors"] = DetectorSwitches(**_snake_keys(kwargs["detectors"]))
        if "post_compaction_guard" in kwargs:
            guard = _snake_keys(kwargs["post_compaction_guard"])
            kwargs["post_compaction_guard"] = PostCompactionGuardConfig(**guard)
        return cls(**kwargs)


_TOP_KEYS = (
    "enabled",
    "mode",
    *(_camel(name) for name in (*_THRESHOLDS, *_CUTOFFS)),
    "detectors",
    "postCompactionGuard",
)
_OPTIONAL = frozenset(_camel(name) for name in _CUTOFFS)
_NESTED = {"detectors": _DETECTOR_KEYS, "postCompactionGuard": _GUARD_KEYS}


def _snake_keys(values: Mapping[str, Any]) -> dict[str, Any]:
    return {_snake(name): value for name, value in values.items()}


def _nested(name: str, block: object, path: str) -> dict[str, Any]:
    """A ``detectors`` or ``postCompactionGuard`` block, keys canonical and values checked."""
    values = _canonical_keys(block, path, _NESTED[name])
    check = _boolean if name == "detectors" else _positive_int
    for inner, value in values.items():
        values[inner] = check(f"{path}.{inner}", value)
    return values


def _validated(block: object, path: str) -> dict[str, Any]:
    """A block's values under camelCase keys, every value type-checked, nesting kept."""
    values = _canonical_keys(block, path, _TOP_KEYS)
    for name, value in values.items():
        sub = f"{path}.{name}"
        if name == "enabled":
            if value is not None:
                _boolean(sub, value)
        elif name == "mode":
            values[name] = _mode(sub, value)
        elif name in _OPTIONAL and value is None:
            pass  # written as null: unset, as if left out (an agent can unset a global cutoff)
        elif name in _NESTED:
            values[name] = _nested(name, value, sub)
        else:
            values[name] = _positive_int(sub, value)
    return values


def _merge(
    global_block: Mapping[str, Any] | None, agent_block: Mapping[str, Any] | None, agent_path: str
) -> dict[str, Any]:
    """The agent block laid over the global one, field by field, both validated."""
    merged = _validated(global_block, GLOBAL_PATH) if global_block is not None else {}
    if agent_block is not None:
        for name, value in _validated(agent_block, agent_path).items():
            if name in _NESTED and isinstance(merged.get(name), dict):
                merged[name] = {**merged[name], **value}
            else:
                merged[name] = value
    return merged


def resolve_config(
    global_block: Mapping[str, Any] | None = None,
    agent_block: Mapping[str, Any] | None = None,
    *,
    _agent_path: str = "agents.list[].tools.loopDetection",
) -> LoopDetectionConfig:
    """Overlay a per-agent ``tools.loopDetection`` block on the global one, field by field."""
    return LoopDetectionConfig.from_mapping(_merge(global_block, agent_block, _agent_path))


def config_mapping(config: LoopDetectionConfig) -> dict[str, Any]:
    """The config as a ``tools.loopDetection`` block (camelCase keys), repairs applied."""
    block: dict[str, Any] = {"enabled": config.enabled, "mode": config.mode}
    for name in (*_THRESHOLDS, *_CUTOFFS):
        block[_camel(name)] = getattr(config, name)
    block["detectors"] = {
        _camel(f.name): getattr(config.detectors, f.name)
        for f in dataclasses.fields(DetectorSwitches)
    }
    block["postCompactionGuard"] = {
        _camel(f.name): getattr(config.post_compaction_guard, f.name)
        for f in dataclasses.fields(PostCompactionGuardConfig)
    }
    return block


def overlay(block: Mapping[str, Any] | None, settings: Mapping[str, object]) -> dict[str, Any]:
    """A ``tools.loopDetection`` block with settings laid over it, validated, not yet resolved.

    Keys are dotted camelCase (``warningThreshold``, ``detectors.pingPong``). The
    ordering repairs happen only when the result becomes a config, so the
    order of the settings does not matter. A bad key or value is a
    ``ConfigError`` naming it.
    """
    changes: dict[str, Any] = {}
    for key, value in settings.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(
                f"setting: expected a dotted key like 'warningThreshold', got {key!r}"
            )
        head, _, inner = key.partition(".")
        (name,) = _canonical_keys({head: None}, GLOBAL_PATH, _TOP_KEYS)
        if name in _NESTED:
            if not inner:
                raise ConfigError(
                    f"{GLOBAL_PATH}.{name}: name one setting inside it, e.g. {name}.x"
                )
            path = f"{GLOBAL_PATH}.{name}"
            (inner_name,) = _canonical_keys({inner: None}, path, _NESTED[name])
            changes.setdefault(name, {})[inner_name] = value
        elif inner:
            raise ConfigError(f"{GLOBAL_PATH}.{name}: has no nested settings (got {key!r})")
        else:
            changes[name] = value
    return _merge(block, changes, GLOBAL_PATH)


def with_settings(
    base: LoopDetectionConfig | Mapping[str, Any] | None, settings: Mapping[str, object]
) -> LoopDetectionConfig:
    """``base`` with settings replaced (see ``overlay``), as a config.

    From a mapping (a ``tools.loopDetection`` block as written) the settings
    apply before any repair; a ``LoopDetectionConfig`` has already been repaired,
    so they apply to its effective values.
    """
    if not isinstance(base, LoopDetectionConfig):
        return LoopDetectionConfig.from_mapping(overlay(base, settings))
    block = config_mapping(base)
    # Its values were accepted already, and a repaired one may exceed the bounds (SPEC
    # §12.6): carried over unchanged, it is not rejected. A value the settings give is.
    named = {key.partition(".")[0] for key in settings if isinstance(key, str)}
    accepted = {
        f"{GLOBAL_PATH}.{name}": value
        for name, value in block.items()
        if type(value) is int and name not in named and _snake(name) not in named
    }
    token = _ACCEPTED.set(accepted)
    try:
        return LoopDetectionConfig.from_mapping(overlay(block, settings))
    finally:
        _ACCEPTED.reset(token)


def with_setting(
    base: LoopDetectionConfig | Mapping[str, Any] | None, key: str, value: object
) -> LoopDetectionConfig:
    """``with_settings`` for one setting."""
    return with_settings(base, {key: value})


def _child(node: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any] | None:
    value = node.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigError(f"{path}: expected a mapping, got {describe(value)}")
    return value


def load_config(
    source: str | os.PathLike[str] | Mapping[str, Any], agent_id: str | None = None
) -> LoopDetectionConfig:
    """The resolved loop-detection config of a gateway config file (JSON5) or parsed mapping.

    The block of agent ``agent_id`` (in ``agents.list`` or ``agents.entries``) is laid
    over the global one; with no id, that of the one agent marked ``default: true``.
    """
    return LoopDetectionConfig.from_mapping(load_block(source, agent_id))


def load_block(
    source: str | os.PathLike[str] | Mapping[str, Any], agent_id: str | None = None
) -> dict[str, Any]:
    """``load_config``'s block before it becomes a config: validated, agent override laid over
    the global block, ordering not yet repaired (so that more settings can be laid over it)."""
    # Imported on use: _include needs ConfigError from this module.
    from ._include import agent_entry, load_file, reject_includes

    if isinstance(source, Mapping):
        reject_includes(source)
        root: object = source
        origin = "config"
    elif isinstance(source, (str, os.PathLike)):
        root = load_file(source)
        origin = os.fspath(source)
    else:
        raise TypeError(f"source: expected a path or a mapping, got {type(source).__name__}")
    if not isinstance(root, Mapping):
        raise ConfigError(f"{origin}: expected a mapping at the top level, got {describe(root)}")
    tools = _child(root, "tools", "tools")
    global_block = _child(tools, "loopDetection", GLOBAL_PATH) if tools else None
    found = agent_entry(root, agent_id)
    if found is None:
        return _merge(global_block, None, GLOBAL_PATH)
    path, entry = found
    agent_tools = _child(entry, "tools", f"{path}.tools")
    block_path = f"{path}.tools.loopDetection"
    agent_block = _child(agent_tools, "loopDetection", block_path) if agent_tools else None
    return _merge(global_block, agent_block, block_path)


def coerce_config(config: LoopDetectionConfig | Mapping[str, Any] | None) -> LoopDetectionConfig:
    if config is None:
        return LoopDetectionConfig()
    if isinstance(config, LoopDetectionConfig):
        return config
    if isinstance(config, Mapping):
        return LoopDetectionConfig.from_mapping(config)
    raise TypeError(
        "config: expected a LoopDetectionConfig, a tools.loopDetection mapping or None, "
        f"got {type(config).__name__}"
    )
