"""SPEC §9.7: ``$include`` in config files, the 2 MiB read bound, and the deep merge."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopcore import ConfigError, LoopDetectionConfig, load_config
from loopcore._config import load_block
from loopcore._include import (
    MAX_FILE_BYTES,
    MAX_INCLUDE_DEPTH,
    deep_merge,
    load_file,
    read_file,
    reject_includes,
)

MIB2 = 2 * 1024 * 1024


def _write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _error(source: object, *args: Any) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(source, *args)  # type: ignore[arg-type]
    return str(info.value)


# ---------------------------------------------------------------------------
# What an include does


def test_tools_moved_into_an_included_file_load_its_values(tmp_path: Path) -> None:
    # Before $include was resolved this loaded as enabled=None without a word.
    _write(tmp_path, "tools.json5", "{ loopDetection: { enabled: true, historySize: 44 } }")
    top = _write(tmp_path, "openclaw.json5", '{ tools: { $include: "./tools.json5" } }')
    cfg = load_config(top)
    assert cfg.enabled is True
    assert cfg.history_size == 44


def test_a_missing_include_target_is_a_config_error(tmp_path: Path) -> None:
    top = _write(tmp_path, "openclaw.json5", '{\n  tools: {\n    $include: "tools.json5" } }')
    message = _error(top)
    target = os.path.join(str(tmp_path), "tools.json5")
    assert message == (
        f"{target}: cannot read config file: No such file or directory (included from {top}:3)"
    )


def test_the_whole_root_may_be_an_include(tmp_path: Path) -> None:
    _write(tmp_path, "real.json5", "{ tools: { loopDetection: { warningThreshold: 4 } } }")
    top = _write(tmp_path, "openclaw.json5", "{ $include: 'real.json5' }")
    assert load_config(top).warning_threshold == 4


def test_a_list_is_deep_merged_in_order(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "one.json5",
        "{ loopDetection: { historySize: 40, warningThreshold: 5,"
        " detectors: { pingPong: false } } }",
    )
    _write(
        tmp_path,
        "two.json5",
        "{ loopDetection: { historySize: 50, detectors: { genericRepeat: false } } }",
    )
    top = _write(tmp_path, "openclaw.json5", "{ tools: { $include: ['one.json5', 'two.json5'] } }")
    cfg = load_config(top)
    assert cfg.history_size == 50  # the later file wins a scalar
    assert cfg.warning_threshold == 5  # kept from the earlier one
    assert cfg.detectors.ping_pong is False
    assert cfg.detectors.generic_repeat is False


def test_lists_from_several_files_concatenate(tmp_path: Path) -> None:
    _write(tmp_path, "a.json5", "{ agents: { list: [ { id: 'a' } ] } }")
    _write(
        tmp_path,
        "b.json5",
        "{ agents: { list: [ { id: 'b', tools: { loopDetection: { turnLimit: 7 } } } ] } }",
    )
    top = _write(tmp_path, "openclaw.json5", "{ $include: ['a.json5', 'b.json5'] }")
    root = load_file(top)
    assert root == {
        "agents": {"list": [{"id": "a"}, {"id": "b", "tools": {"loopDetection": {"turnLimit": 7}}}]}
    }
    assert load_config(top, "b").turn_limit == 7


def test_sibling_keys_are_deep_merged_over_the_included_object(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "base.json5",
        "{ loopDetection: { enabled: true, historySize: 40, detectors: { pingPong: false } },"
        " exec: { host: 'sandbox' } }",
    )
    top = _write(
        tmp_path,
        "openclaw.json5",
        "{ tools: { loopDetection: { historySize: 60, detectors: { genericRepeat: false } },"
        " $include: 'base.json5' } }",
    )
    root = load_file(top)
    assert root == {
        "tools": {
            "loopDetection": {
                "enabled": True,
                "historySize": 60,
                "detectors": {"pingPong": False, "genericRepeat": False},
            },
            "exec": {"host": "sandbox"},
        }
    }
    # Where the key sits among its siblings does not matter.
    top2 = _write(
        tmp_path,
        "second.json5",
        "{ tools: { $include: 'base.json5',"
        " loopDetection: { historySize: 60, detectors: { genericRepeat: false } } } }",
    )
    assert load_file(top2) == root


def test_an_empty_list_includes_nothing(tmp_path: Path) -> None:
    top = _write(tmp_path, "openclaw.json5", "{ tools: { $include: [], loopDetection: {} } }")
    assert load_file(top) == {"tools": {"loopDetection": {}}}


def test_an_included_list_replaces_an_object_without_siblings(tmp_path: Path) -> None:
    _write(
        tmp_path, "agents.json5", "[ { id: 'x', tools: { loopDetection: { historySize: 9 } } } ]"
    )
    top = _write(tmp_path, "openclaw.json5", "{ agents: { list: { $include: 'agents.json5' } } }")
    assert load_config(top, "x").history_size == 9


def test_an_included_non_mapping_cannot_take_sibling_keys(tmp_path: Path) -> None:
    _write(tmp_path, "list.json5", "[1, 2]")
    top = _write(tmp_path, "openclaw.json5", "{\n tools: { $include: 'list.json5', x: 1 } }")
    message = _error(top)
    assert message == (
        f"{top}:2: $include: keys beside $include need the included content to be a mapping, "
        "got list"
    )


def test_paths_are_relative_to_the_including_file(tmp_path: Path) -> None:
    _write(tmp_path, "conf/sub/leaf.json5", "{ historySize: 33 }")
    _write(tmp_path, "conf/sub/mid.json5", "{ loopDetection: { $include: 'leaf.json5' } }")
    top = _write(tmp_path, "conf/openclaw.json5", "{ tools: { $include: 'sub/mid.json5' } }")
    # the current directory plays no part
    assert load_config(top).history_size == 33


def test_an_absolute_path_inside_the_directory_is_allowed(tmp_path: Path) -> None:
    leaf = _write(tmp_path, "leaf.json5", "{ loopDetection: { historySize: 34 } }")
    top = _write(tmp_path, "openclaw.json5", json.dumps({"tools": {"$include": str(leaf)}}))
    assert load_config(top).history_size == 34


def test_the_same_file_twice_is_not_a_cycle(tmp_path: Path) -> None:
    _write(tmp_path, "detectors.json5", "{ pingPong: false }")
    top = _write(
        tmp_path,
        "openclaw.json5",
        "{ tools: { loopDetection: { detectors: { $include: 'detectors.json5' } } },"
        " agents: { list: [ { id: 'a', tools: { loopDetection: {"
        " detectors: { $include: 'detectors.json5' }, historySize: 35 } } } ] } }",
    )
    cfg = load_config(top, "a")
    assert (cfg.history_size, cfg.detectors.ping_pong) == (35, False)


def test_a_relative_top_level_path_names_included_files_relatively(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path, "conf/broken.json5", "{\n x: @ }")
    _write(tmp_path, "conf/openclaw.json5", "{ tools: { $include: 'broken.json5' } }")
    monkeypatch.chdir(tmp_path)
    message = _error(os.path.join("conf", "openclaw.json5"))
    assert message.startswith(os.path.join("conf", "broken.json5") + ":2: invalid JSON5: ")
    assert message.endswith(f"(included from {os.path.join('conf', 'openclaw.json5')}:1)")


# ---------------------------------------------------------------------------
# Staying inside the directory


def test_escaping_with_dot_dot_is_rejected(tmp_path: Path) -> None:
    _write(tmp_path, "outside.json5", "{}")
    top = _write(tmp_path, "conf/openclaw.json5", "{ tools: { $include: '../outside.json5' } }")
    message = _error(top)
    real = os.path.realpath(tmp_path / "conf")
    assert message == (
        f"{top}:1: $include '../outside.json5' is outside the config directory {real} "
        "(symlinks resolved)"
    )


def test_an_absolute_path_outside_is_rejected(tmp_path: Path) -> None:
    outside = _write(tmp_path, "outside.json5", "{}")
    top = _write(tmp_path, "conf/openclaw.json5", json.dumps({"$include": str(outside)}))
    assert "is outside the config directory" in _error(top)


def test_a_symlink_out_of_the_directory_is_rejected(tmp_path: Path) -> None:
    outside = _write(tmp_path, "secret/tools.json5", "{ loopDetection: { historySize: 5 } }")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "tools.json5").symlink_to(outside)
    top = _write(tmp_path, "conf/openclaw.json5", "{ tools: { $include: 'tools.json5' } }")
    assert "is outside the config directory" in _error(top)
    # a symlinked directory leading out is no different
    (tmp_path / "conf" / "link").symlink_to(tmp_path / "secret", target_is_directory=True)
    top = _write(tmp_path, "conf/second.json5", "{ tools: { $include: 'link/tools.json5' } }")
    assert "is outside the config directory" in _error(top)


def test_a_symlink_that_stays_inside_is_allowed(tmp_path: Path) -> None:
    real = _write(tmp_path, "conf/real/tools.json5", "{ loopDetection: { historySize: 36 } }")
    (tmp_path / "conf" / "tools.json5").symlink_to(real)
    top = _write(tmp_path, "conf/openclaw.json5", "{ tools: { $include: 'tools.json5' } }")
    assert load_config(top).history_size == 36


def test_the_top_level_directory_bounds_every_level(tmp_path: Path) -> None:
    # A file in a subdirectory may include a sibling directory's file, not one outside.
    _write(tmp_path, "conf/b/leaf.json5", "{ historySize: 37 }")
    _write(tmp_path, "conf/a/mid.json5", "{ loopDetection: { $include: '../b/leaf.json5' } }")
    top = _write(tmp_path, "conf/openclaw.json5", "{ tools: { $include: 'a/mid.json5' } }")
    assert load_config(top).history_size == 37
    _write(tmp_path, "conf/a/mid.json5", "{ loopDetection: { $include: '../../leaf.json5' } }")
    _write(tmp_path, "leaf.json5", "{}")
    assert "is outside the config directory" in _error(top)


# ---------------------------------------------------------------------------
# Nesting and cycles


def _chain(directory: Path, files: int) -> Path:
    """f0 includes f1 ... includes f{files-1}, which holds the block."""
    for index in range(files - 1):
        _write(directory, f"f{index}.json5", f"{{ $include: 'f{index + 1}.json5' }}")
    _write(directory, f"f{files - 1}.json5", "{ tools: { loopDetection: { historySize: 38 } } }")
    return directory / "f0.json5"


def test_nesting_ten_deep_is_allowed(tmp_path: Path) -> None:
    assert MAX_INCLUDE_DEPTH == 10
    assert load_config(_chain(tmp_path, MAX_INCLUDE_DEPTH + 1)).history_size == 38  # 10 hops
    assert load_config(_chain(tmp_path / "short", MAX_INCLUDE_DEPTH)).history_size == 38


def test_nesting_eleven_deep_is_rejected(tmp_path: Path) -> None:
    top = _chain(tmp_path, MAX_INCLUDE_DEPTH + 2)  # 11 hops
    message = _error(top)
    assert message.startswith(f"{tmp_path / 'f10.json5'}:1: $include nested deeper than 10 files: ")
    assert message.endswith("f0.json5 -> f1.json5 -> f2.json5 -> f3.json5 -> f4.json5 -> "
                            "f5.json5 -> f6.json5 -> f7.json5 -> f8.json5 -> f9.json5 -> "
                            "f10.json5 -> f11.json5")  # fmt: skip


def test_a_cycle_names_the_chain(tmp_path: Path) -> None:
    top = _write(tmp_path, "a.json5", "{ $include: 'b.json5' }")
    _write(tmp_path, "b.json5", "{\n\n  tools: { $include: 'a.json5' } }")
    message = _error(top)
    assert message == f"{tmp_path / 'b.json5'}:3: $include cycle: a.json5 -> b.json5 -> a.json5"


def test_a_file_including_itself_is_a_cycle(tmp_path: Path) -> None:
    top = _write(tmp_path, "a.json5", "{ $include: './a.json5' }")
    assert _error(top) == f"{top}:1: $include cycle: a.json5 -> a.json5"


def test_a_cycle_through_a_symlink_is_still_a_cycle(tmp_path: Path) -> None:
    top = _write(tmp_path, "a.json5", "{ $include: 'alias.json5' }")
    (tmp_path / "alias.json5").symlink_to(top)
    assert "$include cycle: a.json5 -> alias.json5" in _error(top)


# ---------------------------------------------------------------------------
# Bad values, bad files


@pytest.mark.parametrize(
    ("value", "shown"), [("3", "3"), ("true", "True"), ("{ a: 1 }", "dict"), ("null", "None")]
)
def test_an_include_that_is_no_path_is_rejected(tmp_path: Path, value: str, shown: str) -> None:
    top = _write(tmp_path, "openclaw.json5", f"{{\n tools: {{ $include: {value} }} }}")
    assert _error(top) == (
        f"{top}:2: $include: expected a path string or a list of them, got {shown}"
    )


def test_a_non_string_list_item_names_file_line_and_index(tmp_path: Path) -> None:
    _write(tmp_path, "ok.json5", "{}")
    top = _write(tmp_path, "openclaw.json5", "{\n\n tools: { $include: ['ok.json5', 7] } }")
    assert _error(top) == f"{top}:3: $include[1]: expected a path string, got 7"


@pytest.mark.parametrize("path", ["", "   "])
def test_an_empty_path_is_rejected(tmp_path: Path, path: str) -> None:
    top = _write(tmp_path, "openclaw.json5", json.dumps({"tools": {"$include": path}}))
    assert _error(top) == f"{top}:1: $include: expected a file path, got {path!r}"


def test_an_unparsable_included_file_names_its_line(tmp_path: Path) -> None:
    _write(tmp_path, "tools.json5", "{\n  loopDetection: {\n    historySize: ,\n  }\n}")
    top = _write(tmp_path, "openclaw.json5", "// c\n{ tools: { $include: 'tools.json5' } }")
    message = _error(top)
    assert message.startswith(f"{tmp_path / 'tools.json5'}:3: invalid JSON5: ")
    assert message.endswith(f"(included from {top}:2)")


def test_an_included_directory_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "tools.json5").mkdir()
    top = _write(tmp_path, "openclaw.json5", "{ tools: { $include: 'tools.json5' } }")
    assert _error(top).startswith(f"{tmp_path / 'tools.json5'}: cannot read config file: ")


def test_a_bad_value_in_an_included_block_names_the_setting(tmp_path: Path) -> None:
    _write(tmp_path, "tools.json5", "{ loopDetection: { historySise: 40 } }")
    top = _write(tmp_path, "openclaw.json5", "{ tools: { $include: 'tools.json5' } }")
    assert _error(top).startswith("tools.loopDetection.historySise: unknown key")


def test_the_line_is_left_out_when_the_text_cannot_say_it(tmp_path: Path) -> None:
    # "$include" in a comment would shift a naive count: then only the file is named.
    text = "// use $include: 'x' to split the file\n{\n tools: { $include: 'missing.json5' } }"
    top = _write(tmp_path, "openclaw.json5", text)
    assert _error(top).endswith(f"(included from {top})")


def test_lines_follow_document_order_across_nested_includes(tmp_path: Path) -> None:
    _write(tmp_path, "ok.json5", "{}")
    text = (
        "{\n"  # 1
        "  tools: { $include: 'ok.json5' },\n"  # 2
        "  agents: {\n"  # 3
        "    '$include': 'ok.json5',\n"  # 4
        '    list: [ { "$include": "nope.json5" } ],\n'  # 5
        "  },\n"
        "}\n"
    )
    top = _write(tmp_path, "openclaw.json5", text)
    assert _error(top).endswith(f"(included from {top}:5)")


# ---------------------------------------------------------------------------
# The 2 MiB bound


def _sized(path: Path, size: int) -> Path:
    """A valid JSON config of exactly ``size`` bytes (padded with spaces)."""
    body = b'{"tools": {"loopDetection": {"historySize": 39}}}'
    path.write_bytes(body + b" " * (size - len(body)))
    assert path.stat().st_size == size
    return path


@pytest.mark.parametrize("size", [MIB2 - 1, MIB2], ids=["below", "at"])
def test_a_file_up_to_two_mib_is_read(tmp_path: Path, size: int) -> None:
    assert MAX_FILE_BYTES == MIB2
    assert load_config(_sized(tmp_path / "openclaw.json", size)).history_size == 39
    top = _write(tmp_path, "top.json5", "{ $include: 'openclaw.json' }")
    assert load_config(top).history_size == 39


def test_a_file_over_two_mib_is_rejected(tmp_path: Path) -> None:
    big = _sized(tmp_path / "openclaw.json", MIB2 + 1)
    assert _error(big) == f"{big}: config file is larger than 2 MiB (2097152 bytes)"
    top = _write(tmp_path, "top.json5", "{\n $include: 'openclaw.json' }")
    assert _error(top) == (
        f"{big}: config file is larger than 2 MiB (2097152 bytes) (included from {top}:2)"
    )
    with pytest.raises(ConfigError, match="larger than 2 MiB"):
        read_file(big)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_an_endless_file_is_read_only_up_to_the_bound() -> None:
    # Reading the whole of /dev/zero would never end; the bounded read stops at 2 MiB + 1.
    assert _error("/dev/zero") == "/dev/zero: config file is larger than 2 MiB (2097152 bytes)"


def test_a_utf8_bom_is_allowed(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json5"
    path.write_bytes(b"\xef\xbb\xbf{ tools: { loopDetection: { historySize: 41 } } }")
    assert load_config(path).history_size == 41


def test_bytes_that_are_not_utf8_are_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "openclaw.json5"
    path.write_bytes(b"{ a: '\xff' }")
    assert _error(path).startswith(f"{path}: cannot read config file: ")


# ---------------------------------------------------------------------------
# Ignored keys


def test_prototype_keys_are_ignored_in_files(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "tools.json5",
        "{ __proto__: { polluted: true }, loopDetection: { historySize: 42, constructor: 1 } }",
    )
    top = _write(
        tmp_path,
        "openclaw.json5",
        "{ prototype: 1, tools: { $include: 'tools.json5', constructor: { x: 1 } } }",
    )
    assert load_file(top) == {"tools": {"loopDetection": {"historySize": 42}}}
    assert load_config(top).history_size == 42


@pytest.mark.parametrize("key", ["__proto__", "constructor", "prototype"])
def test_deep_merge_ignores_prototype_keys(key: str) -> None:
    assert deep_merge({"a": 1}, {key: {"b": 2}, "c": 3}) == {"a": 1, "c": 3}
    assert deep_merge({key: 1, "a": {key: 2}}, {"a": {"b": 2}}) == {"a": {"b": 2}}


# ---------------------------------------------------------------------------
# Parsed mappings


def test_an_include_in_a_parsed_mapping_is_rejected() -> None:
    message = _error({"tools": {"$include": "tools.json5"}})
    assert message == (
        "tools.$include: $include needs a config file to resolve it against; "
        "pass the file's path to load_config instead of a parsed mapping"
    )
    message = _error({"agents": {"list": [{"id": "a"}, {"$include": "b.json5"}]}}, "a")
    assert message.startswith("agents.list[1].$include: ")
    assert _error({"$include": "x"}).startswith("$include: ")


def test_a_mapping_that_contains_itself_is_walked_once() -> None:
    looped: dict[str, Any] = {"tools": {"loopDetection": {"historySize": 43}}}
    looped["self"] = looped
    reject_includes(looped)  # returns, instead of walking forever
    assert load_config(looped).history_size == 43


def test_a_parsed_mapping_without_includes_loads_as_before() -> None:
    source = {"tools": {"loopDetection": {"historySize": 44}}, "other": [{"deep": [1, 2]}]}
    assert load_block(source) == {"historySize": 44}


def test_a_deep_tree_spread_over_files_is_a_config_error(tmp_path: Path) -> None:
    # Each file alone parses (300 levels); walked together they go 900 deep.
    for index in range(3):
        nested = "[" * 300 + json.dumps({"$include": f"f{index + 1}.json"}) + "]" * 300
        _write(tmp_path, f"f{index}.json", nested)
    _write(tmp_path, "f3.json", "1")
    assert read_file(tmp_path / "f0.json") is not None
    assert _error(tmp_path / "f0.json") == f"{tmp_path / 'f0.json'}: nested too deeply"


def test_warnings_name_nothing_but_settings(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _write(tmp_path, "tools.json5", "{ loopDetection: { historySize: 5 } }")
    top = _write(tmp_path, "openclaw.json5", "{ tools: { $include: 'tools.json5' } }")
    with caplog.at_level(logging.WARNING, logger="loopcore"):
        load_config(top)
    # the unreachable-threshold warnings of §1, nothing about the include itself
    assert all("exceeds historySize" in r.getMessage() for r in caplog.records)
    assert len(caplog.records) == 3


# ---------------------------------------------------------------------------
# Deep merge properties

# No surrogates: JSON escapes a pair of them as one character, which would not round-trip.
_plain_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=3)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(), _plain_text)
_keys = st.sampled_from(["a", "b", "c", "d"])
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=3)),
    max_leaves=12,
)
_mappings = st.dictionaries(_keys, _values, max_size=4)


def _reference_merge(base: object, over: object) -> object:
    """The rules of SPEC §9.7, written out case by case."""
    if type(base) is dict and type(over) is dict:
        keys = list(base) + [k for k in over if k not in base]
        return {
            k: _reference_merge(base[k], over[k]) if k in base and k in over
            else (over[k] if k in over else base[k])
            for k in keys
        }  # fmt: skip
    if type(base) is list and type(over) is list:
        return base + over
    return over


@given(base=_mappings, over=_mappings)
def test_deep_merge_follows_the_rules(base: dict[str, Any], over: dict[str, Any]) -> None:
    before = (json.dumps(base), json.dumps(over))
    merged = deep_merge(base, over)
    assert merged == _reference_merge(base, over)
    assert (json.dumps(base), json.dumps(over)) == before  # inputs untouched


@given(base=_mappings, over=_mappings)
def test_deep_merge_keeps_every_key_and_later_scalars_win(
    base: dict[str, Any], over: dict[str, Any]
) -> None:
    merged = deep_merge(base, over)
    assert isinstance(merged, dict)
    assert set(merged) == set(base) | set(over)
    for key, value in over.items():
        if not isinstance(value, (dict, list)):
            assert merged[key] == value
        elif isinstance(value, list) and isinstance(base.get(key), list):
            assert merged[key] == base[key] + value
    for key in set(base) - set(over):
        assert merged[key] == base[key]


@given(value=_mappings)
def test_deep_merge_with_an_empty_mapping_is_identity(value: dict[str, Any]) -> None:
    assert deep_merge(value, {}) == value
    assert deep_merge({}, value) == value


@given(first=_mappings, second=_mappings)
def test_an_include_list_folds_left(
    tmp_path_factory: pytest.TempPathFactory, first: dict[str, Any], second: dict[str, Any]
) -> None:
    directory = tmp_path_factory.mktemp("fold")
    _write(directory, "one.json", json.dumps(first))
    _write(directory, "two.json", json.dumps(second))
    top = _write(directory, "top.json", json.dumps({"$include": ["one.json", "two.json"]}))
    assert load_file(top) == _reference_merge(first, second)


def test_default_config_from_an_empty_included_file(tmp_path: Path) -> None:
    _write(tmp_path, "empty.json5", "// nothing yet\n{}")
    top = _write(tmp_path, "openclaw.json5", "{ tools: { $include: 'empty.json5' } }")
    assert load_config(top) == LoopDetectionConfig()


_json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), _plain_text),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(_plain_text, inner, max_size=3)
    ),
    max_leaves=10,
)


@given(value=_json_values)
def test_plain_json_reads_as_json5_would(
    tmp_path_factory: pytest.TempPathFactory, value: object
) -> None:
    # Plain JSON takes a faster parser; what it yields must not differ. (Characters are
    # written as they are: json5 reads an escaped surrogate pair as two code points.)
    import json5

    text = json.dumps(value, ensure_ascii=False)
    path = tmp_path_factory.mktemp("json") / "c.json"
    path.write_text(text, encoding="utf-8")
    assert read_file(path) == json5.loads(text)
