"""Setting axes: a placement axis gives each value its own private agent (its `deputy agent`
words) and launcher, `{rank_cpus}` comes from that agent, and every result says which
point it is ("sweep"). Fake benchmark, fake mpirun, fake taskset, fake agent."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable

import pytest

from deputy_tools import points
from deputy_tools.agent import agent_command
from deputy_tools.cli import main
from deputy_tools.spec import parse_spec
from deputy_tools.sweep import run_sweep
from process_check import alive

OWN_CORE_LAUNCHER = ["taskset", "-c", "{rank_cpus}", "mpirun", "-np", "2", "--bind-to", "none",
                     "--mca", "mpi_yield_when_idle", "1"]
PLACEMENT = [
    {"label": "shared", "agent": {"args": ["--agent-cores", "shared"]}},
    {"label": "own-core", "agent": {"args": ["--agent-cores", "last"]},
     "launcher": OWN_CORE_LAUNCHER},
]
SPEC = {"name": "placed", "bench": "coll", "launcher": ["mpirun", "-np", "2"], "agent": True,
        "flags": {"compare": "mpi", "message-size": "64k:256k", "factor": 4},
        "grid": {"placement": PLACEMENT, "op": ["iallreduce", "ibcast"]}, "timeout_s": 30}


def spec(**changes: object):
    return parse_spec({**SPEC, **changes}, where="test")


def test_each_placement_has_its_agent_words_and_launcher() -> None:
    shared, _, own, _ = points.expand(spec())
    assert shared.label() == "placement=shared op=iallreduce"
    assert shared.agent == {"args": ["--agent-cores", "shared"]}
    assert shared.launcher == ("mpirun", "-np", "2")
    assert own.agent == {"args": ["--agent-cores", "last"]}
    assert own.launcher == tuple(OWN_CORE_LAUNCHER)
    assert own.agent_setting == "placement=own-core"
    assert points.needs_agent_facts(own) and not points.needs_agent_facts(shared)
    # Same flags, other placement: another result file.
    assert shared.flags == own.flags
    assert points.point_key(spec(), shared) != points.point_key(spec(), own)
    argv = points.command(spec(), own, "deputy", Path("/r/x.json"), {"rank_cpus": "0"})
    assert argv[:12] == ["taskset", "-c", "0", "mpirun", "-np", "2", "--bind-to", "none",
                         "--mca", "mpi_yield_when_idle", "1", "deputy"]


def test_agent_words_add_to_the_specs_and_a_setting_may_bring_the_agent() -> None:
    both = spec(agent={"args": ["--engines", "1"], "config": {"agent": {"x": 1}}})
    own = points.expand(both)[2]
    assert own.agent == {"args": ["--engines", "1", "--agent-cores", "last"],
                         "config": {"agent": {"x": 1}}}
    alone = spec(agent=None)
    assert points.expand(alone)[2].agent == {"args": ["--agent-cores", "last"]}
    plain = spec(agent=None, grid={"op": ["ibcast"]})
    assert points.expand(plain)[0].agent is None


def test_agent_command_ends_with_the_specs_words(tmp_path: Path) -> None:
    argv = agent_command("deputy", tmp_path, None, tmp_path / "a.log", ["--agent-cores", "last"])
    assert argv[:3] == ["deputy", "agent", "--daemon"]
    assert argv[-2:] == ["--agent-cores", "last"]


def test_results_of_specs_without_settings_keep_their_names() -> None:
    """Resuming a sweep measured before setting axes existed must find its results."""
    s = parse_spec({"name": "x", "bench": "coll", "agent": True, "launcher": ["mpirun"],
                    "flags": {"op": "allreduce"}, "grid": {"m": ["1k"]}}, where="t")
    point = points.expand(s)[0]
    old = json.dumps({"bench": ["coll"], "flags": {"op": "allreduce", "m": "1k"},
                      "launcher": ["mpirun"], "agent": {}}, sort_keys=True)
    assert points.point_key(s, point) == "m-1k." + hashlib.sha256(old.encode()).hexdigest()[:10]


def test_sweep_starts_one_agent_per_placement_with_its_words(
        tmp_path: Path, fake_deputy: Path, calls: Callable[[], list[str]]) -> None:
    out = tmp_path / "out"
    report = run_sweep(spec(), out, str(fake_deputy), live=False, echo=lambda _: None)
    assert report.ok and report.ran == 4
    agents = [c for c in calls() if c.startswith("agent:")]
    assert [a.split(":", 2)[2] for a in agents] == ["cores=shared", "cores=last"]
    assert not any(alive(int(a.split(":")[1])) for a in agents)
    # The agent of each placement ran its points, before the next agent started.
    assert [c.split(":")[0] for c in calls()] == ["agent", "coll", "coll", "agent", "coll",
                                                  "coll"]
    # Own-core ranks went where that agent said (the fake: CPU 0), through the launcher.
    assert (tmp_path / "taskset.txt").read_text().split() == ["taskset:0", "taskset:0"]
    for point in points.expand(spec()):
        result = points.result_path(out, spec(), point)
        doc = json.loads(result.read_text())
        assert doc["benchmark"] == "coll"
        assert doc["sweep"]["spec"] == "placed" and doc["sweep"]["profile"] is None
        assert doc["sweep"]["point"] == dict(point.coords)
        assert doc["sweep"]["agent"] == point.agent
        command = result.with_suffix(".log").read_text().splitlines()[0]
        if dict(point.coords)["placement"] == "own-core":
            assert doc["sweep"]["agent_placement"] == {"layout": "last", "agent_cpus": "1",
                                                       "rank_cpus": "0"}
            assert " taskset -c 0 mpirun -np 2 --bind-to none --mca mpi_yield_when_idle 1 " \
                   f"{fake_deputy} bench coll " in command
        else:
            # Every result records where its agent says it put itself.
            assert doc["sweep"]["agent_placement"] == {"layout": "shared", "agent_cpus": "",
                                                       "rank_cpus": ""}
            assert f" mpirun -np 2 {fake_deputy} bench coll " in command
            assert "taskset" not in command

    ran = len(calls())
    assert run_sweep(spec(), out, str(fake_deputy), live=False, echo=lambda _: None).ok
    assert len(calls()) == ran  # resumed: no point and no agent


def test_one_agent_per_placement_whatever_the_axis_order(
        tmp_path: Path, fake_deputy: Path, calls: Callable[[], list[str]]) -> None:
    s = spec(grid={"op": ["iallreduce", "ibcast"], "placement": PLACEMENT})
    report = run_sweep(s, tmp_path / "out", str(fake_deputy), live=False, echo=lambda _: None)
    assert report.ok and report.ran == 4
    assert [c.split(":")[0] for c in calls()] == ["agent", "coll", "coll", "agent", "coll",
                                                  "coll"]


def test_an_agent_that_pins_nothing_cannot_place_the_ranks(
        tmp_path: Path, fake_deputy: Path, calls: Callable[[], list[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_DEPUTY_INFO_UNPINNED", "1")
    echoed: list[str] = []
    report = run_sweep(spec(), tmp_path / "out", str(fake_deputy), live=False,
                       echo=echoed.append)
    assert not report.ok and report.ran == 2  # the shared points ran
    assert report.setup_error == (
        "placed [placement=own-core]: a launcher needs {rank_cpus}, but the agent started "
        "with --agent-cores last pins nothing (placement shared); give it --agent-cores; "
        "2 point(s) not run")
    assert echoed == [f"error: {report.setup_error}"]
    agents = [c for c in calls() if c.startswith("agent:")]
    assert len(agents) == 2 and not any(alive(int(a.split(":")[1])) for a in agents)
    assert not (tmp_path / "taskset.txt").exists()


def test_dry_run_shows_each_placements_agent_and_launcher(
        tmp_path: Path, fake_deputy: Path, calls: Callable[[], list[str]],
        capsys: pytest.CaptureFixture) -> None:
    spec_file = tmp_path / "placed.json"
    spec_file.write_text(json.dumps(SPEC))
    assert main(["sweep", str(spec_file), "--dry-run", "-o", str(tmp_path / "o"),
                 "--deputy", str(fake_deputy)]) == 0
    lines = capsys.readouterr().out.splitlines()
    deputy = str(fake_deputy.resolve())
    assert lines[0].startswith("# a private agent for the points of placement=shared (")
    assert lines[0].endswith(f"--log-file {tmp_path}/o/agent-placement-shared.log "
                             "--agent-cores shared")
    assert lines[1].startswith(f"mpirun -np 2 {deputy} bench coll ")
    assert lines[3].startswith("# a private agent for the points of placement=own-core (")
    assert lines[3].endswith("agent-placement-own-core.log --agent-cores last")
    assert lines[4] == ("# RANK_CPUS, AGENT_CPUS: the agent's placement.rank_cpus and "
                        "agent_cpus (deputy info --format json)")
    assert lines[5].startswith("taskset -c '$RANK_CPUS' mpirun -np 2 --bind-to none --mca "
                               f"mpi_yield_when_idle 1 {deputy} bench coll ")
    assert len(lines) == 7 and calls() == []
