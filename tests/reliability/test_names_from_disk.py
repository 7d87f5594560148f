"""Names and texts read from disk reach the terminal escaped: ``runs``, ``plot``, ``report`` and ``error:`` lines.

A config can no longer create a run name with an escape sequence, but run
folders written by older versions, other tools or an unpacked archive may hold
anything: escape sequences, newlines and bidirectional overrides in folder
names, ``status.json`` and ``config.yaml``, and records of any JSON type in
``metrics.jsonl``. Every command that shows them must print them escaped, keep
one row per run, and never fail on them.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from config_adversary import alias_bomb
from support import run_cli

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
HOSTILE_NAMES = ["\x1b[2J\x1b[Hcleared", "two\nrows", "\u202eevil.exe", "bell\x07"]


def make_run(root: Path, name: str, *, status: object, config: str, metrics: list[object]) -> Path:
    run = root / name / "version_0"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.yaml").write_text(config, encoding="utf-8")
    (run / "status.json").write_text(json.dumps(status), encoding="utf-8")
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics), encoding="utf-8")
    return run


@pytest.fixture
def hostile_runs(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    config = ('loop: {epochs: 4}\ncheckpoint: {best_metric: "val/\\e[31mpsnr", best_mode: max}\n'
              'run: {name: "\\e]0;title\\a"}\n')
    metrics = [
        {"kind": "train", "epoch": 0, "step": 1, "epoch_progress": 0.5, "losses": {"G/l1": 0.5, "G/\x1b[2Jx": 1.0}},
        {"kind": "val", "epoch": 0, "step": 1, "metrics": {"psnr": 10.0, "\x1b[31mpsnr": 11.0}},
        [1, 2], "text", None, {"kind": "val", "metrics": 5}, {"kind": "train", "losses": [1]},
        {"kind": "epoch", "epoch": "zero"},
    ]
    statuses = [{"status": "finished\x1b[2J", "epoch": "x", "step": [1], "pid": "me", "reason": "\x1b[31m"},
                ["not", "a", "mapping"], {"status": "failed", "error": "boom\nline2\x1b[0m", "epoch": 1.0},
                {"status": "running", "pid": 999999999, "updated": "soon"}]
    for name, status in zip(HOSTILE_NAMES, statuses):
        make_run(root, name, status=status, config=config, metrics=metrics)
    return root


def test_runs_shows_hostile_names_escaped_one_row_each(hostile_runs):
    result = run_cli("runs", str(hostile_runs), timeout=60)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert not UNSAFE.search(result.stdout), repr(result.stdout)
    rows = result.stdout.splitlines()
    assert len(rows) == 1 + len(HOSTILE_NAMES), rows
    for escaped in ("\\x1b[2J\\x1b[Hcleared/version_0", "two\\nrows/version_0", "\\u202eevil.exe/version_0",
                    "bell\\x07/version_0", "val/\\x1b[31mpsnr"):
        assert escaped in result.stdout, (escaped, result.stdout)
    assert "finished\\x1b" not in result.stdout  # a status that is none of the engine's reads as unknown
    assert "interrupted (process gone)" in result.stdout


def test_runs_json_escapes_and_stays_valid(hostile_runs):
    result = run_cli("runs", str(hostile_runs), "--json", timeout=60)
    assert result.returncode == 0 and not UNSAFE.search(result.stdout), result.stderr[-2000:]
    listed = json.loads(result.stdout)
    assert sorted(run["name"] for run in listed) == sorted(HOSTILE_NAMES)
    assert all(isinstance(run["epochs"], int) and isinstance(run["steps"], int) for run in listed)


def test_plot_and_report_print_the_run_path_escaped(hostile_runs):
    run = hostile_runs / HOSTILE_NAMES[0] / "version_0"
    for command in (["plot", str(run), "--smooth", "1"], ["report", str(run)]):
        result = run_cli(*command, timeout=120)
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
        assert not UNSAFE.search(result.stdout + result.stderr), repr(result.stdout)
        assert "wrote " in result.stdout and "\\x1b[2J\\x1b[Hcleared" in result.stdout


@pytest.mark.parametrize("command", [["config", "validate"], ["plot"], ["report"], ["train", "--resume"]])
def test_error_lines_show_hostile_paths_escaped(command, tmp_path):
    missing = tmp_path / "\x1b[2J\u202emissing\n.yaml"
    result = run_cli(*command, str(missing), timeout=60)
    assert result.returncode != 0 and not UNSAFE.search(result.stderr), repr(result.stderr)
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 1 and errors[0].startswith("error: ") and "\\x1b[2J\\u202emissing\\n.yaml" in errors[0], errors


@pytest.mark.parametrize("command", [["runs"], ["data", "check"], ["predict", "x.png", "-o", "out"]])
def test_no_error_line_carries_a_raw_escape(command, tmp_path):
    """Whatever a message embeds, the CLI prints it escaped (the last line of defence, in cli/main.py)."""
    hostile = "\x1b[31m\u202enope"
    args = [*command[:2], hostile, *command[2:]] if command[0] != "predict" else ["predict", hostile, *command[1:]]
    result = run_cli(*args, cwd=tmp_path, timeout=60)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert not UNSAFE.search(result.stdout + result.stderr), repr(result.stderr)
    assert [line for line in result.stderr.splitlines() if line.startswith("error:")], result.stderr


def test_a_run_whose_config_is_an_alias_bomb_is_one_line_not_a_hang(tmp_path):
    root = tmp_path / "runs"
    make_run(root, "bomb", status={"status": "finished"}, config=alias_bomb(9, 10, under="x"), metrics=[])
    started = time.monotonic()
    result = run_cli("runs", str(root), timeout=60)
    assert time.monotonic() - started < 60
    assert result.returncode != 0 and "Traceback" not in result.stderr
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 1 and "alias bomb" in errors[0] and "config.yaml" in errors[0], result.stderr


# -- what commands print about the paths they were given ---------------------------------------------
def test_the_paths_commands_print_are_escaped_not_stripped(tmp_path):
    """data synth printed '/tmp/lim/z\\x1b[2Jz' as '/tmp/lim/zz': click strips escape sequences when not on a
    terminal, which hides them instead of showing them (issue 13). Every success line shows them escaped."""
    hostile = tmp_path / "z\x1b[2Jz"
    shown = str(hostile).replace("\x1b", "\\x1b")
    cases = [
        (("data", "synth", hostile, "--count", "10", "--size", "16"),
         f"wrote 10 aligned 16x16 pairs to {shown} (train 8"),
        (("data", "check", hostile), f"ok: {shown}: aligned layout"),
        (("config", "init", "-o", tmp_path / "c\x1b[31m.yaml"), "wrote " + str(tmp_path / "c\\x1b[31m.yaml")),
    ]
    for args, expected in cases:
        result = run_cli(*args, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
        assert expected in result.stdout and not UNSAFE.search(result.stdout), repr(result.stdout)
