"""`reproduce --small`: every shipped spec swept (fake benchmark), plotted, tabulated, resumable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from deputy_tools import points
from deputy_tools.catalog import shipped_specs
from deputy_tools.cli import main
from deputy_tools.spec import load_spec


def test_dry_run_lists_every_small_point(tmp_path: Path, fake_deputy: Path,
                                         calls: Callable[[], list[str]],
                                         capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "results"
    argv = ["reproduce", "--small", "-o", str(out), "--dry-run", "--deputy", str(fake_deputy)]
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    comments = [line for line in printed if line.startswith("# ")]
    lines = [line for line in printed if not line.startswith("# ")]
    specs = [load_spec(p, "small") for p in shipped_specs()]
    expected = sum(len(points.expand(s)) + len(s.setup) for s in specs)  # setup: key files
    assert len(lines) == expected
    deputy = f"{fake_deputy.resolve()} "
    # coll runs under mpirun (own-core ranks under deputy mpirun --baseline, on the CPUs
    # their agent leaves), with a private agent per placement and the launcher's environment.
    coll = [line for line in lines if line.startswith(f"mpirun -np 2 {deputy}bench coll ")
            or line.startswith(f"{deputy}mpirun --baseline --agent-cores last -- -np 2 "
                               f"{deputy}bench coll ")]
    assert len(coll) == sum(len(points.expand(s)) for s in specs if s.bench[0] == "coll") > 0
    assert all(line.startswith(f"{deputy}bench ") for line in lines if line not in coll)
    agents = {(s.name, json.dumps(p.agent, sort_keys=True))
              for s in specs for p in points.expand(s) if p.agent is not None}
    placed = {(s.name, json.dumps(p.agent, sort_keys=True))
              for s in specs for p in points.expand(s) if points.needs_agent_facts(p)}
    assert len(agents) > sum(s.agent is not None for s in specs)  # coll_offload: two
    assert len(comments) == len(agents) + len(placed) + sum(bool(s.env) for s in specs)
    assert not out.exists() and calls() == []


def test_small_run_plots_each_specs_figures(tmp_path: Path, fake_deputy: Path,
                                           calls: Callable[[], list[str]],
                                           capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "results"
    assert main(["reproduce", "--small", "-o", str(out), "--deputy", str(fake_deputy)]) == 0
    printed = capsys.readouterr().out.split()
    for path in shipped_specs():
        spec = load_spec(path, "small")
        kind = spec.bench[0]
        for figure in spec.figures:
            png = out / "figures" / f"{spec.name}.small" / f"{kind}_{figure}.png"
            assert png.exists(), png
            assert str(png) in printed
    tables = (out / "tables.md").read_text()
    assert "## mover_fig2\n" in tables and "### rail\n" in tables

    ran = len(calls())
    assert main(["reproduce", "--small", "-o", str(out), "--deputy", str(fake_deputy)]) == 0
    assert len(calls()) == ran  # resumed: nothing to run


def test_module_and_console_script_entry_points() -> None:
    result = subprocess.run([sys.executable, "-m", "deputy_tools", "--version"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("deputy-tools ")
    script = Path(sys.executable).parent / "deputy-tools"
    if not script.exists():
        pytest.skip("not installed in this interpreter's environment (pip install -e python)")
    result = subprocess.run([str(script), "specs"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "mover_fig2:" in result.stdout
