"""A sweep: every point of a spec, skipping those already measured.

Points whose result file exists are done (see points.py for why the name
identifies the settings); the others run one at a time — benchmarks must
not share this machine's two cores with each other. A failing point is
reported with its coordinates and log and the sweep goes on, because one
bad size should not cost an hour of other measurements; --fail-fast stops
instead. The caller turns `failed` into a non-zero exit status.
"""

from __future__ import annotations

import os
import shlex
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from deputy_tools import points as pts
from deputy_tools.agent import AgentError, agent_command, private_agent
from deputy_tools.progress import SweepProgress, make_progress
from deputy_tools.runner import Outcome, partial_path, run_point, run_setup
from deputy_tools.spec import SetupStep, SweepSpec


@dataclass
class Failure:
    point: pts.Point
    outcome: Outcome

    def describe(self, spec: SweepSpec) -> str:
        return (f"point {spec.name} [{self.point.label()}] failed: {self.outcome.message} "
                f"(log: {self.outcome.log})")


@dataclass
class SweepReport:
    total: int = 0
    skipped: int = 0          # already done before this run
    ran: int = 0
    failed: list[Failure] = field(default_factory=list)
    stopped_early: bool = False
    stray: list[Path] = field(default_factory=list)  # results from other settings
    setup_error: str = ""     # a setup step failed: no point was run

    @property
    def ok(self) -> bool:
        return not self.failed and not self.stopped_early and not self.setup_error


def default_out_dir(root: Path, spec: SweepSpec) -> Path:
    """results/<name>, or results/<name>.<profile>: profiles never mix in one directory."""
    return root / (spec.name if spec.profile is None else f"{spec.name}.{spec.profile}")


def run_sweep(spec: SweepSpec, out_dir: Path, deputy: str, *, dry_run: bool = False,
              fail_fast: bool = False, timeout_s: float | None = None,
              live: bool | None = None, echo: Callable[[str], None] = print,
              progress: SweepProgress | None = None) -> SweepReport:
    """Runs the pending points of `spec` into `out_dir` (see the module docstring)."""
    all_points = pts.expand(spec)
    report = SweepReport(total=len(all_points))
    pending = []
    expected: set[str] = set()
    for point in all_points:
        result = pts.result_path(out_dir, spec, point)
        expected.add(result.name)
        if result.exists():
            report.skipped += 1
        else:
            pending.append((point, result))
    if out_dir.is_dir():
        report.stray = sorted(p for p in out_dir.glob("*.json") if p.name not in expected)

    steps = [step for step in spec.setup if pending and not (out_dir / step.creates).exists()]
    if dry_run:
        if report.skipped:
            echo(f"# {spec.name}: {report.skipped} of {report.total} points already done "
                 f"in {out_dir}")
        if pending and spec.env:
            echo("# environment: " + " ".join(f"{k}={shlex.quote(v)}"
                                               for k, v in spec.env.items()))
        if pending and spec.agent is not None:
            agent = agent_command(deputy, Path("$AGENT_DIR"), spec.agent.get("config"),
                                  out_dir / "agent.log")
            echo(f"# a private agent for the sweep (AGENT_DIR: a new 0700 directory; "
                 f"DEPUTY_AGENT=$AGENT_DIR/agent.sock): {shlex.join(agent)}")
        for step in steps:
            echo(shlex.join(setup_command(step, deputy, out_dir)))
        for point, result in pending:
            echo(shlex.join(pts.command(spec, point, deputy, partial_path(result))))
        return report

    out_dir.mkdir(parents=True, exist_ok=True)
    limit = timeout_s if timeout_s is not None else spec.timeout_s
    env = {**os.environ, **spec.env} if spec.env or spec.agent is not None else None
    for i, step in enumerate(steps):
        problem = run_setup(setup_command(step, deputy, out_dir), out_dir / step.creates,
                            out_dir / f"setup-{i}.log", limit, env)
        if problem:
            report.setup_error = (f"setup of {spec.name} failed: {problem} "
                                  f"(log: {out_dir / f'setup-{i}.log'}); no point was run")
            echo(f"error: {report.setup_error}")
            return report
    title = spec.name if spec.profile is None else f"{spec.name} ({spec.profile})"
    with ExitStack() as stack:
        if pending and spec.agent is not None:
            try:
                socket = stack.enter_context(private_agent(
                    deputy, spec.agent.get("config"), out_dir / "agent.log", env))
            except AgentError as e:
                report.setup_error = f"{spec.name}: {e}; no point was run"
                echo(f"error: {report.setup_error}")
                return report
            env = {**(env or os.environ), "DEPUTY_AGENT": str(socket)}
        _run_points(spec, pending, deputy, limit, env, fail_fast, report,
                    progress or make_progress(title, len(pending), live), title, out_dir)
    return report


def _run_points(spec: SweepSpec, pending: list[tuple[pts.Point, Path]], deputy: str,
                limit: float, env: dict[str, str] | None, fail_fast: bool, report: SweepReport,
                bar: SweepProgress, title: str, out_dir: Path) -> None:
    with bar:
        if report.skipped:
            bar.note(f"{title}: {report.skipped} of {report.total} points already done "
                     f"in {out_dir}")
        for point, result in pending:
            bar.start_point(point.label())
            argv = pts.command(spec, point, deputy, partial_path(result))
            outcome = run_point(argv, result, limit, env)
            report.ran += 1
            bar.finish_point(point.label(), outcome.ok, outcome.seconds)
            if outcome.ok:
                continue
            failure = Failure(point, outcome)
            report.failed.append(failure)
            bar.note("error: " + failure.describe(spec))
            if fail_fast:
                report.stopped_early = report.ran < len(pending)
                break


def setup_command(step: SetupStep, deputy: str, out_dir: Path) -> list[str]:
    return [pts.with_out_dir(word.replace("{deputy}", deputy), out_dir) for word in step.run]


def summary(spec: SweepSpec, report: SweepReport, out_dir: Path) -> str:
    """One line for the end of a sweep, plus the failed points again (they may have scrolled)."""
    if report.setup_error:
        return report.setup_error
    done = report.skipped + report.ran - len(report.failed)
    line = (f"{spec.name}: {done}/{report.total} points done ({report.ran} run now, "
            f"{report.skipped} already done), {len(report.failed)} failed -> {out_dir}")
    if report.stopped_early:
        not_run = report.total - report.skipped - report.ran
        line += f"; stopped at the first failure (--fail-fast), {not_run} not run"
    lines = [line]
    lines += ["  " + f.describe(spec) for f in report.failed]
    if report.stray:
        lines.append(f"  note: {len(report.stray)} other result file(s) in {out_dir} come from "
                     "other settings; plots of this directory include them")
    return "\n".join(lines)
