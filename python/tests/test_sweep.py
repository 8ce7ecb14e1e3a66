"""Sweeps against the fake benchmark: resumption, failures, timeouts, dry runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from deputy_tools import points
from deputy_tools.cli import main
from deputy_tools.spec import parse_spec
from deputy_tools.sweep import run_sweep

SPEC = {"name": "fake", "bench": "mover", "flags": {"n": 4, "reps": 1},
        "grid": {"size": ["4k", "64k", "1m"]}, "timeout_s": 30}


def spec(**changes: object):
    return parse_spec({**SPEC, **changes}, where="test")


def results(out: Path) -> list[Path]:
    return sorted(out.glob("*.json"))


def test_every_point_writes_one_result(tmp_path: Path, fake_deputy: Path,
                                       calls: Callable[[], list[str]]) -> None:
    out = tmp_path / "out"
    report = run_sweep(spec(), out, str(fake_deputy))
    assert report.ok and report.ran == 3 and report.skipped == 0
    assert calls() == ["4k", "64k", "1m"]
    files = results(out)
    assert [f.name.split(".")[0] for f in files] == ["size-1m", "size-4k", "size-64k"]
    for f in files:
        doc = json.loads(f.read_text())
        assert doc["benchmark"] == "mover" and f.with_suffix(".log").exists()
    assert not list(out.glob("*.partial"))


def test_rerun_skips_done_points_and_runs_only_missing(tmp_path: Path, fake_deputy: Path,
                                                       calls: Callable[[], list[str]]) -> None:
    out = tmp_path / "out"
    run_sweep(spec(), out, str(fake_deputy))
    again = run_sweep(spec(), out, str(fake_deputy))
    assert again.ok and again.ran == 0 and again.skipped == 3
    assert calls() == ["4k", "64k", "1m"]  # nothing re-ran

    s = spec()
    middle = points.result_path(out, s, points.expand(s)[1])
    middle.unlink()
    third = run_sweep(s, out, str(fake_deputy))
    assert third.ran == 1 and third.skipped == 2
    assert calls()[-1] == "64k"


def test_changed_flags_rerun_everything(tmp_path: Path, fake_deputy: Path) -> None:
    out = tmp_path / "out"
    run_sweep(spec(), out, str(fake_deputy))
    changed = run_sweep(spec(flags={"n": 8, "reps": 1}), out, str(fake_deputy))
    assert changed.ran == 3 and changed.skipped == 0
    assert len(changed.stray) == 3  # the old results, reported, not deleted


def test_failure_names_the_point_and_the_sweep_goes_on(
        tmp_path: Path, fake_deputy: Path, calls: Callable[[], list[str]],
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setenv("FAKE_DEPUTY_FAIL", "64k")
    out = tmp_path / "out"
    report = run_sweep(spec(), out, str(fake_deputy))
    assert not report.ok and report.ran == 3 and calls() == ["4k", "64k", "1m"]
    [failure] = report.failed
    assert failure.point.label() == "size=64k"
    message = failure.describe(spec())
    assert "point fake [size=64k] failed: exit status 1" in message
    assert "verification failed at byte 17" in message
    assert "error: point fake [size=64k]" in capsys.readouterr().err
    assert len(results(out)) == 2
    assert len(list(out.glob("*.json.failed"))) == 1  # kept for inspection

    monkeypatch.delenv("FAKE_DEPUTY_FAIL")
    retry = run_sweep(spec(), out, str(fake_deputy))  # resumption retries only the failure
    assert retry.ok and retry.ran == 1 and calls()[-1] == "64k"
    assert not list(out.glob("*.json.failed"))


def test_usage_error_reports_the_message_not_the_hint(tmp_path: Path, fake_deputy: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_DEPUTY_USAGE", "4k")
    [failure] = run_sweep(spec(), tmp_path / "out", str(fake_deputy)).failed
    assert failure.outcome.message == "exit status 105: -s 4k: not a size (examples: 64, 4k, 2m, 1g)"
    log = failure.outcome.log.read_text()
    assert log.startswith(f"$ {fake_deputy} bench mover") and "Run with --help" in log


def test_fail_fast_stops_at_the_first_failure(tmp_path: Path, fake_deputy: Path,
                                              calls: Callable[[], list[str]],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_DEPUTY_FAIL", "4k")
    report = run_sweep(spec(), tmp_path / "out", str(fake_deputy), fail_fast=True)
    assert report.stopped_early and calls() == ["4k"]


@pytest.mark.parametrize("variable, reason", [
    ("FAKE_DEPUTY_NO_OUT", "wrote no results file"),
    ("FAKE_DEPUTY_BAD_JSON", "not valid JSON"),
])
def test_exit_zero_without_a_good_result_is_a_failure(tmp_path: Path, fake_deputy: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      variable: str, reason: str) -> None:
    monkeypatch.setenv(variable, "1m")
    report = run_sweep(spec(), tmp_path / "out", str(fake_deputy))
    [failure] = report.failed
    assert failure.point.label() == "size=1m" and reason in failure.outcome.message


def test_timeout_kills_the_point(tmp_path: Path, fake_deputy: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_DEPUTY_HANG", "4k")
    report = run_sweep(spec(), tmp_path / "out", str(fake_deputy), timeout_s=1.0)
    [failure] = report.failed
    assert failure.point.label() == "size=4k"
    assert "timed out after 1 s" in failure.outcome.message
    assert failure.outcome.seconds < 10
    assert report.ran == 3  # the others still ran


def test_missing_binary_fails_each_point_clearly(tmp_path: Path) -> None:
    report = run_sweep(spec(), tmp_path / "out", str(tmp_path / "no-deputy"))
    assert len(report.failed) == 3
    assert "cannot start" in report.failed[0].outcome.message


def test_dry_run_prints_commands_and_runs_nothing(tmp_path: Path, fake_deputy: Path,
                                                  calls: Callable[[], list[str]]) -> None:
    printed: list[str] = []
    out = tmp_path / "out"
    report = run_sweep(spec(), out, str(fake_deputy), dry_run=True, echo=printed.append)
    assert calls() == [] and not out.exists() and report.ran == 0
    assert len(printed) == 3
    assert printed[0].startswith(f"{fake_deputy} bench mover -n 4 --reps 1 --size 4k --out ")


def test_cli_sweep_exit_status_and_summary(tmp_path: Path, fake_deputy: Path,
                                           monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture) -> None:
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(SPEC))
    out = tmp_path / "out"
    argv = ["sweep", str(spec_file), "-o", str(out), "--deputy", str(fake_deputy)]
    monkeypatch.setenv("FAKE_DEPUTY_FAIL", "1m")
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "fake: 2/3 points done (3 run now, 0 already done), 1 failed" in err
    assert "point fake [size=1m] failed" in err

    monkeypatch.delenv("FAKE_DEPUTY_FAIL")
    assert main(argv) == 0
    assert "fake: 3/3 points done (1 run now, 2 already done), 0 failed" in capsys.readouterr().err


def test_cli_finds_deputy_from_the_environment(tmp_path: Path, fake_deputy: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture) -> None:
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(SPEC))
    monkeypatch.setenv("DEPUTY_BIN", str(fake_deputy))
    assert main(["sweep", str(spec_file), "-o", str(tmp_path / "o"), "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith(str(fake_deputy.resolve()) + " bench mover")

    monkeypatch.setenv("DEPUTY_BIN", str(tmp_path / "missing"))
    assert main(["sweep", str(spec_file), "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "DEPUTY_BIN" in err and "no such file" in err


KEYED = {"name": "keyed", "bench": "channel",
         "flags": {"loopback": True, "one-way": True, "num-msgs": 10},
         "setup": [{"creates": "channel.key",
                    "run": ["{deputy}", "bench", "channel", "--keygen", "{out}/channel.key"]}],
         "grid": {"secure": {"off": {}, "on": {"secure": True, "key": "{out}/channel.key"}}},
         "timeout_s": 30}


def test_setup_runs_once_before_the_points_and_out_is_substituted(
        tmp_path: Path, fake_deputy: Path, calls: Callable[[], list[str]]) -> None:
    out = tmp_path / "out"
    report = run_sweep(parse_spec(KEYED, where="test"), out, str(fake_deputy))
    assert report.ok and report.ran == 2
    key = out / "channel.key"
    assert key.read_text().startswith("deputy-psk-v1 ") and key.stat().st_mode & 0o077 == 0
    assert calls() == ["shm:64:10:0", "secure+shm:64:10:0"]  # --keygen writes no result
    [secure] = [f for f in results(out) if f.name.startswith("secure-on")]
    assert json.loads(secure.read_text())["config"]["key_file"] == f"{out}/channel.key"
    assert (out / "setup-0.log").read_text().startswith(f"$ {fake_deputy} bench channel --keygen")

    # The key exists: a resumed or extended sweep does not make a new one (the fake
    # refuses to overwrite, so a second --keygen would fail the sweep).
    (out / results(out)[0].name).unlink()
    again = run_sweep(parse_spec(KEYED, where="test"), out, str(fake_deputy))
    assert again.ok and again.ran == 1


def test_point_names_do_not_depend_on_the_result_directory(tmp_path: Path) -> None:
    s = parse_spec(KEYED, where="test")
    on = points.expand(s)[1]
    assert points.result_path(tmp_path / "a", s, on).name == \
        points.result_path(tmp_path / "b", s, on).name
    argv = points.command(s, on, "deputy", tmp_path / "a" / "x.json.partial")
    assert argv[argv.index("--key") + 1] == f"{tmp_path / 'a'}/channel.key"


def test_dry_run_prints_the_setup_first(tmp_path: Path, fake_deputy: Path) -> None:
    printed: list[str] = []
    out = tmp_path / "out"
    run_sweep(parse_spec(KEYED, where="test"), out, str(fake_deputy), dry_run=True,
              echo=printed.append)
    assert printed[0] == f"{fake_deputy} bench channel --keygen {out}/channel.key"
    assert len(printed) == 3 and not out.exists()


def test_failed_setup_runs_no_point(tmp_path: Path, fake_deputy: Path,
                                    calls: Callable[[], list[str]],
                                    capsys: pytest.CaptureFixture) -> None:
    broken = {**KEYED, "setup": [{"creates": "channel.key",
                                  "run": ["{deputy}", "bench", "nonsense"]}]}
    out = tmp_path / "out"
    spec_file = tmp_path / "keyed.json"
    spec_file.write_text(json.dumps(broken))
    assert main(["sweep", str(spec_file), "-o", str(out), "--deputy", str(fake_deputy)]) == 1
    err = capsys.readouterr().err
    assert "setup of keyed failed: exit status 2: fake deputy: unsupported command" in err
    assert "no point was run" in err and calls() == []
