"""Point identity: the result file name that makes sweeps resumable."""

from __future__ import annotations

from pathlib import Path

import pytest

from deputy_tools import points
from deputy_tools.spec import parse_spec

BASE = {"name": "demo", "bench": "mover", "flags": {"op": "memmove", "reps": 1},
        "grid": {"size": ["4k", "1m"], "mode": {"cpu": {"cpu": True}, "sync": {"wait": "spin"}}}}


def keys(spec_dict: dict) -> list[str]:
    spec = parse_spec(spec_dict, where="test")
    return [points.point_key(spec, p) for p in points.expand(spec)]


def test_names_are_readable_and_stable() -> None:
    first = keys(BASE)
    assert first == keys(BASE)  # same spec, same names: that is resumption
    assert first[0].startswith("size-4k_mode-cpu.")
    assert len(set(first)) == len(first)


def test_any_flag_change_gives_new_names() -> None:
    changed = {**BASE, "flags": {"op": "memmove", "reps": 3}}
    assert not set(keys(BASE)) & set(keys(changed))


def test_flag_order_does_not_matter() -> None:
    reordered = {**BASE, "flags": {"reps": 1, "op": "memmove"}}
    assert keys(BASE) == keys(reordered)


def test_unsafe_characters_are_replaced() -> None:
    spec = {**BASE, "grid": {"size": ["4k,64k"], "mode": {"a b/c": {"wait": "spin"}}}}
    assert keys(spec)[0].startswith("size-4k_64k_mode-a_b_c.")


def test_command_puts_launcher_first_and_out_last() -> None:
    spec = parse_spec({**BASE, "launcher": ["mpirun", "-np", "{ranks}"],
                       "grid": {"ranks": {"2": {"ranks": 2}}}}, where="test")
    point = points.expand(spec)[0]
    argv = points.command(spec, point, "/bin/deputy", Path("/r/x.json"))
    assert argv[:4] == ["mpirun", "-np", "2", "/bin/deputy"]
    assert argv[-2:] == ["--out", "/r/x.json"]


def test_launcher_with_unknown_field_is_an_error() -> None:
    spec = parse_spec({**BASE, "launcher": ["run", "{nodes}"]}, where="test")
    with pytest.raises(ValueError, match="no axis or flag named 'nodes'"):
        points.command(spec, points.expand(spec)[0], "deputy", Path("x"))
