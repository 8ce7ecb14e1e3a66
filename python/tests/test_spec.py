"""Sweep specs: parsing, profiles, the errors that name the key, and the shipped specs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deputy_tools import points, registry
from deputy_tools.catalog import resolve_spec, select_specs, shipped_specs
from deputy_tools.spec import SpecError, load_spec, parse_spec

SPEC = {
    "name": "demo",
    "bench": "mover",
    "flags": {"op": "memmove", "n": 8, "reps": 1},
    "grid": {
        "size": ["4k", "64k"],
        "mode": {"cpu": {"cpu": True}, "sync": {"wait": "spin"}},
    },
    "profiles": {"small": {"flags": {"reps": None, "i": 5}, "grid": {"size": ["4k"]}}},
}


def write(tmp_path: Path, spec: dict, name: str = "spec.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(spec))
    return path


def test_grid_expands_first_axis_slowest(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, SPEC))
    got = [p.label() for p in points.expand(spec)]
    assert got == ["size=4k mode=cpu", "size=4k mode=sync",
                   "size=64k mode=cpu", "size=64k mode=sync"]


def test_flags_become_the_benchmarks_command_line(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, SPEC))
    first = points.expand(spec)[0]
    assert points.bench_args(spec, first) == [
        "bench", "mover", "--op", "memmove", "-n", "8", "--reps", "1", "--size", "4k", "--cpu"]


def test_flag_rendering_rules() -> None:
    assert points.flag_args({"cpu": True, "nt": False, "x": None, "queue_depth": 4,
                             "size": ["4k", "64k"], "s": "1m"}) == [
        "--cpu", "--queue-depth", "4", "--size", "4k,64k", "-s", "1m"]


def test_profile_overrides_flags_and_axes(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, SPEC), profile="small")
    assert spec.profile == "small"
    assert [p.label() for p in points.expand(spec)] == ["size=4k mode=cpu", "size=4k mode=sync"]
    flags = points.expand(spec)[0].flags
    assert "reps" not in flags and flags["i"] == 5


def test_unknown_profile_lists_the_available_ones(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"no profile 'huge' \(profiles: small\)"):
        load_spec(write(tmp_path, SPEC), profile="huge")


@pytest.mark.parametrize("mutation, message", [
    ({"bogus": 1}, r"unknown key 'bogus'"),
    ({"name": ""}, r"'name' must be"),
    ({"bench": 3}, r"'bench' must name"),
    ({"grid": {"size": []}}, r"grid.size: an axis needs at least one value"),
    ({"grid": {"size": ["4k", {"a": 1}]}}, r"grid.size: a flag value"),
    ({"grid": {"size": [{"a": 1}]}},
     r"grid.size\[0\]: unknown key 'a' \(allowed: agent, flags, label, launcher\)"),
    ({"grid": {"p": [{"flags": {}}]}}, r"grid.p\[0\].label: a setting value needs a label"),
    ({"grid": {"p": [{"label": "x", "agent": {"args": ["--socket", "s"]}}]}},
     r"grid.p\[0\].agent.args: --socket is the sweep's own"),
    ({"grid": {"p": [{"label": "x", "agent": {"args": "--agent-cores last"}}]}},
     r"grid.p\[0\].agent.args: must be a list of `deputy agent` words"),
    ({"grid": {"p": [{"label": "x", "launcher": "taskset"}]}},
     r"grid.p\[0\].launcher: must be a list of strings"),
    ({"grid": {"p": [{"label": "x", "agent": False}]}}, r"grid.p\[0\].agent: an object"),
    ({"flags": {"--op": "x"}}, r"flag name '--op' must be given without dashes"),
    ({"timeout_s": -1}, r"'timeout_s' must be a positive number"),
    ({"grid": {"size": ["4k", "4k"]}}, r"grid.size: repeated value"),
])
def test_errors_name_the_key(tmp_path: Path, mutation: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        load_spec(write(tmp_path, {**SPEC, **mutation}))


def test_invalid_json_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{")
    with pytest.raises(SpecError, match="broken.json: not valid JSON"):
        load_spec(path)


def test_yaml_spec_reads_like_json(tmp_path: Path) -> None:
    yaml = pytest.importorskip("yaml")
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(SPEC, sort_keys=False))
    assert load_spec(path) == load_spec(write(tmp_path, SPEC))


def test_every_shipped_spec_loads_with_and_without_small(tmp_path: Path) -> None:
    names = {p.stem for p in shipped_specs()}
    assert {"mover_fig2", "mover_fig3", "mover_fig4", "mover_fig6_latency", "mover_fig7"} <= names
    for path in shipped_specs():
        full, small = load_spec(path), load_spec(path, "small")
        assert full.name == path.stem
        # Fewer points, or (coll: one run covers a range of sizes) smaller ones.
        assert 0 < len(points.expand(small)) <= len(points.expand(full)), path.name
        assert (len(points.expand(small)) < len(points.expand(full))
                or [p.flags for p in points.expand(small)]
                != [p.flags for p in points.expand(full)]), path.name
        kind = registry.get(full.bench[0])
        assert kind is not None, f"{path.name}: no plotter for {full.bench}"
        for figure in full.figures:
            assert kind.figure(figure) is not None, f"{path.name}: unknown figure {figure}"


def _bytes(text: object) -> int:
    text = str(text)
    scale = {"k": 1 << 10, "m": 1 << 20}.get(text[-1].lower(), 1)
    return int(text[:-1] if scale > 1 else text) * scale


def test_small_profiles_stay_small() -> None:
    """The reproduce --small promise: a few minutes on 2 cores. A mover or rail point takes
    seconds: about a hundred in all. A coll point starts mpirun and two ranks (a second or
    two) and runs at most 100 iterations per size: at most 30 of them (coll_offload's 20,
    10 iterations of 3 sizes, about a minute). At most 70 channel points: one of at most
    10000 messages of at most 64 KiB takes well under a second, except tcp with less than
    16 KiB of socket buffer, about 0.1 s per message (docs/channel.md), hence at most 200
    messages there."""
    by_bench: dict[str, list[points.Point]] = {}
    for path in shipped_specs():
        spec = load_spec(path, "small")
        by_bench.setdefault(spec.bench[0], []).extend(points.expand(spec))
    assert sum(len(v) for k, v in by_bench.items() if k not in ("channel", "coll")) <= 110
    assert len(by_bench["coll"]) <= 30
    assert all(int(p.flags.get("iterations", 0)) <= 100 for p in by_bench["coll"])
    channel = by_bench["channel"]
    assert len(channel) <= 70
    for point in channel:
        count, size = int(point.flags["num-msgs"]), _bytes(point.flags["msg-size"])
        assert count <= 10000 and size <= 64 << 10, point.label()
        if point.flags["transport"] == "tcp" and _bytes(point.flags.get("buffer-size", 0)) \
                and _bytes(point.flags["buffer-size"]) < 16 << 10:
            assert count <= 200, point.label()


def test_resolve_spec_by_name_or_path(tmp_path: Path) -> None:
    assert resolve_spec("mover_fig2").name == "mover_fig2.json"
    own = write(tmp_path, SPEC)
    assert resolve_spec(str(own)) == own
    with pytest.raises(SpecError, match="shipped: .*mover_fig2"):
        resolve_spec("nope")


def test_parse_rejects_a_non_object() -> None:
    with pytest.raises(SpecError, match="a spec is an object"):
        parse_spec([1, 2], where="inline")


@pytest.mark.parametrize("setup, message", [
    ({"creates": "k"}, r"setup\[0\]: 'run' must be a non-empty list"),
    ({"creates": "../k", "run": ["x"]}, r"setup\[0\]: 'creates' must name a file inside"),
    ({"creates": "/tmp/k", "run": ["x"]}, r"setup\[0\]: 'creates' must name a file inside"),
    ({"creates": "k", "run": ["x"], "when": 1}, r"setup\[0\]: unknown key 'when'"),
])
def test_setup_errors_name_the_step(tmp_path: Path, setup: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        load_spec(write(tmp_path, {**SPEC, "setup": [setup]}))


def test_only_selects_a_spec_or_a_group() -> None:
    assert [p.stem for p in select_specs(["mover_fig3", "mover_fig2"])] == [
        "mover_fig3", "mover_fig2"]
    channel = [p.stem for p in select_specs(["channel"])]
    assert channel == ["channel_buffer", "channel_buffer_doca", "channel_count", "channel_size"]
    assert [p.stem for p in select_specs(["channel_size", "channel"])] == [
        "channel_size", "channel_buffer", "channel_buffer_doca", "channel_count"]
    assert [p.stem for p in select_specs(["rail"])] == ["rail_loopback", "rail_warmup"]  # by bench
    with pytest.raises(SpecError, match="--only nope: no such spec file, shipped spec, nor group"):
        select_specs(["nope"])
