"""Run files of the wrong shape (issue 25, class 4): every JSON file a command reads back (status, summary,
checkpoint sidecars, launch records, test results) may be cut short, replaced by another tool or crafted.
Read with a bounded size and depth and a checked shape, each is taken as unreadable, in one line at most:
no traceback, no hang, no memory blow-up, and the run itself still resumes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from kill_points import tiny_pix2pix_run
from nectargan_core.jsonfiles import JSONFileError, nesting_depth, read_json, read_json_object
from support import run_cli

#: name -> how to damage a JSON file in place
SHAPES = {
    "array": lambda path: path.write_text("[1, 2, 3]"),
    "string": lambda path: path.write_text('"finished"'),
    "number": lambda path: path.write_text("7"),
    "null": lambda path: path.write_text("null"),
    "deep array": lambda path: path.write_text("[" * 100_000 + "]" * 100_000),
    "deep object": lambda path: path.write_text('{"a": ' * 50_000 + "1" + "}" * 50_000),
    "cut short": lambda path: path.write_text('{"status": "runn'),
    "not UTF-8": lambda path: path.write_bytes(b'{"status": "\xff\xfe"}'),
    "wrong field types": lambda path: path.write_text(json.dumps(
        {"status": 5, "step": "x", "epoch": [1], "updated": "yesterday", "pid": {"a": 1}, "rows": "x",
         "epochs_total": None, "example_columns": 7, "global_step": "4", "size": "big", "sha256": 1})),
    "out of range": lambda path: path.write_text(json.dumps(
        {"status": "finished", "updated": 1e20, "first_step_at": -1e300, "pid": 2 ** 70, "step": 1e32, "epoch": -5})),
    "not finite": lambda path: path.write_text('{"status": "finished", "updated": NaN, "first_step_at": Infinity}'),
    "huge": lambda path: os.truncate(path, 200 * 1024 * 1024) if path.exists() else path.write_bytes(b"")
    or os.truncate(path, 200 * 1024 * 1024),
    "fifo": lambda path: os.mkfifo(path),
    "device": lambda path: path.symlink_to("/dev/zero"),
    "folder": lambda path: path.mkdir(),
}


def damage(path: Path, shape: str) -> None:
    if path.is_dir() and not path.is_symlink():
        path.rmdir()
    elif path.exists() or path.is_symlink():
        path.unlink()
    SHAPES[shape](path)


@pytest.fixture(scope="module")
def source_run(tmp_path_factory) -> Path:
    return tiny_pix2pix_run(tmp_path_factory)


def copy_of(run: Path, tmp_path: Path) -> Path:
    target = tmp_path / "runs" / "tiny" / "version_0"
    shutil.copytree(run, target, ignore=shutil.ignore_patterns("export", "test", "report.html"))
    return target


def no_traceback(done) -> None:
    assert "Traceback" not in done.stderr and "Error:" not in done.stderr.replace("error:", ""), done.stderr


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_runs_and_report_take_a_damaged_status_or_summary_as_unreadable(source_run, tmp_path, shape):
    run = copy_of(source_run, tmp_path)
    for name in ("status.json", "summary.json"):
        damage(run / name, shape)
    listed = run_cli("runs", str(tmp_path / "runs"), timeout=60)
    no_traceback(listed)
    assert listed.returncode == 0 and "tiny" in listed.stdout
    as_json = run_cli("runs", str(tmp_path / "runs"), "--json", timeout=60)
    no_traceback(as_json)
    json.loads(as_json.stdout, parse_constant=lambda name: pytest.fail(f"runs --json wrote {name}"))  # strict JSON
    reported = run_cli("report", str(run), timeout=60)
    no_traceback(reported)
    assert reported.returncode == 0 and (run / "report.html").is_file()


@pytest.mark.parametrize("shape", ["array", "deep array", "fifo", "wrong field types"])
def test_a_run_with_a_damaged_status_still_resumes(source_run, tmp_path, shape):
    run = copy_of(source_run, tmp_path)
    damage(run / "status.json", shape)
    resumed = run_cli("train", "--resume", str(run), "--set", "loop.epochs=2", timeout=240)
    no_traceback(resumed)
    assert resumed.returncode == 0, resumed.stderr
    assert read_json_object(run / "status.json")["status"] == "finished"  # written whole again


@pytest.mark.parametrize("shape", ["array", "deep object", "fifo", "device", "wrong field types"])
def test_a_damaged_checkpoint_record_is_named_and_an_earlier_checkpoint_used(source_run, tmp_path, shape):
    run = copy_of(source_run, tmp_path)
    newest = sorted((run / "checkpoints").glob("epoch*.pt"))[-1]
    damage(newest.with_name(newest.name + ".json"), shape)
    resumed = run_cli("train", "--resume", str(run), "--set", "loop.epochs=2", timeout=240)
    no_traceback(resumed)
    assert resumed.returncode == 0, resumed.stderr
    assert newest.name in resumed.stderr  # the skipped checkpoint is named


def test_the_reader_refuses_each_shape_with_the_file_and_the_reason(tmp_path):
    path = tmp_path / "status.json"
    expected = {"array": "holds an array, not a JSON object", "string": "holds a string, not a JSON object",
                "number": "holds a number, not a JSON object", "null": "holds null, not a JSON object",
                "deep array": "is nested more than 100 deep, which nothing here writes",
                "deep object": "is nested more than 100 deep, which nothing here writes",
                "cut short": "is not valid JSON (cut short, or not written by NectarGAN)",
                "not UTF-8": "is not UTF-8 text",
                "huge": f"is larger than {64 * 1024 * 1024} bytes, more than such a file holds",
                "fifo": "is not a regular file", "device": "is not a regular file", "folder": "is not a regular file"}
    for shape, why in expected.items():
        damage(path, shape)
        with pytest.raises(JSONFileError) as refused:
            read_json_object(path)
        assert str(refused.value) == f"{path}: {why}", shape
    path.rmdir()  # the last shape: a folder
    with pytest.raises(FileNotFoundError):
        read_json(path)
    path.write_text('{"status": "finished", "x": [[[1]]]}')
    assert read_json_object(path) == {"status": "finished", "x": [[[1]]]}
    from nectargan_core.rundir import RunDir

    run = RunDir(tmp_path)
    SHAPES["out of range"](run.status_file)
    assert run.read_status() == {"status": "finished"}  # every number out of its range left out
    SHAPES["not finite"](run.status_file)
    assert run.read_status() == {"status": "finished"}
    run.status_file.write_text('{"status": "failed", "reason": null, "error": "x", "emergency_checkpoint": null}')
    assert run.read_status() == {"status": "failed", "reason": None, "error": "x", "emergency_checkpoint": None}
    assert nesting_depth('{"a": "[[[[[[", "b": [{"c": "]]]"}]}') == 3  # brackets inside strings do not count


@pytest.mark.parametrize("since", [1e300, float("nan"), -1e20, "yesterday", [1]])
def test_a_crafted_lock_record_still_names_its_holder(since):
    from nectargan_core.runlock import describe_holder

    assert describe_holder({"pid": 4321, "host": "box", "since": since}) == "process 4321 on box"


def test_damaged_metrics_lines_are_skipped_by_runs_plot_and_report(source_run, tmp_path):
    """A stranger's lines: not UTF-8, fields of the wrong types, an infinite step; the records around them stay."""
    run = copy_of(source_run, tmp_path)
    good = (run / "metrics.jsonl").read_bytes()
    with open(run / "metrics.jsonl", "ab") as log:
        log.write(b"\xff\xfe\x00garbage\n")
        log.write(b'{"kind": "train", "epoch": "x", "step": [1], "losses": [1, 2], "lr": "a"}\n')
        log.write(b'{"kind": "train", "epoch": 0, "step": 1e400, "losses": {"G/total": 1.0}}\n')
        log.write(b'{"kind": "train", "epoch": 0, "step": 99999999999999999999999999, "losses": {}}\n')
    from nectargan_core import read_metrics

    records = list(read_metrics(run / "metrics.jsonl"))
    assert len(records) == good.count(b"\n")  # exactly the engine's own records
    for command in (["runs", str(tmp_path / "runs")], ["plot", str(run), "-o", str(tmp_path / "plots")],
                    ["report", str(run)]):
        done = run_cli(*command, timeout=120)
        no_traceback(done)
        assert done.returncode == 0, (command, done.stderr)


@pytest.mark.parametrize("shape", ["fifo", "device", "folder", "loop"])
def test_a_metrics_log_that_is_no_file_is_left_out_in_one_line(source_run, tmp_path, shape):
    """metrics.jsonl as a FIFO hung runs, plot, report and resume; linked to /dev/zero it took all memory; as a
    folder or a loop of links it was a traceback. Now it is left out with a warning, and resume refuses it."""
    run = copy_of(source_run, tmp_path)
    log = run / "metrics.jsonl"
    if shape == "loop":
        log.unlink()
        log.symlink_to("metrics.jsonl")
    else:
        damage(log, shape)
    kind = {"fifo": "a FIFO", "device": "a device", "folder": "a folder"}.get(shape)
    warning = (f"warning: {log}: is {kind}, not a metrics log; left out" if kind
               else f"warning: {log}: cannot be read (Too many levels of symbolic links); left out")
    for command in (["runs", str(tmp_path / "runs")], ["runs", str(tmp_path / "runs"), "--json"], ["report", str(run)]):
        done = run_cli(*command, timeout=60)
        no_traceback(done)
        assert done.returncode == 0 and done.stderr.strip() == warning, (command, done.stderr)
    resumed = run_cli("train", "--resume", str(run), "--set", "loop.epochs=2", timeout=120)
    no_traceback(resumed)
    assert resumed.returncode != 0 and str(log) in resumed.stderr.strip().splitlines()[-1], resumed.stderr


def test_crafted_metric_values_and_terms_are_no_numbers_and_bounded(source_run, tmp_path):
    """A string "999" was taken as the best PSNR; 3000 loss terms in one record hung plot and report; 1e308
    leaked numpy's overflow warnings; a 3 MB line is skipped, not held."""
    run = copy_of(source_run, tmp_path)
    with open(run / "metrics.jsonl", "a") as log:
        log.write(json.dumps({"kind": "val", "epoch": 9, "step": 99, "metrics": {"psnr": "999", "l1": 1e308},
                              "time": 1.0}) + "\n")
        log.write(json.dumps({"kind": "train", "epoch": 2, "step": 16, "epoch_progress": 0.1, "steps": 1,
                              "losses": {f"K{i}/t": 1.0 for i in range(3000)}, "lr": {"opt_g": 0.1},
                              "time": 1.0}) + "\n")
        log.write('{"kind": "train", "pad": "' + "x" * 3_000_000 + '"}\n')
    listed = run_cli("runs", str(tmp_path / "runs"), timeout=60)
    assert listed.returncode == 0 and "999" not in listed.stdout, listed.stdout
    for command in (["plot", str(run), "-o", str(tmp_path / "plots")], ["report", str(run)]):
        done = run_cli(*command, timeout=120)
        no_traceback(done)
        assert done.returncode == 0 and "Warning" not in done.stderr, (command, done.stderr)
    from nectargan_core import read_metrics

    assert not any("pad" in record for record in read_metrics(run / "metrics.jsonl"))


def test_a_vanished_folder_while_writing_is_one_line():
    from nectargan_core import describe_os_error

    error = FileNotFoundError(2, "No such file or directory", "out/train/00000.png")
    assert describe_os_error(error) == ("out/train/00000.png: No such file or directory; it, or a folder on its path, "
                                        "was removed or moved while the command ran; run it again")


def test_a_damaged_summary_and_a_lock_that_is_a_folder_are_named_as_such(source_run, tmp_path):
    """report said a damaged summary.json was missing ("it predates it"); a run.lock folder was blamed on the
    run directory's permissions."""
    run = copy_of(source_run, tmp_path)
    (run / "summary.json").write_text("[1, 2]")
    reported = run_cli("report", str(run), timeout=60)
    assert reported.returncode == 0, reported.stderr
    page = (run / "report.html").read_text()
    assert "Its summary.json cannot be read (damaged, or not written by NectarGAN); its key settings" in page
    assert "predates" not in page
    (run / "run.lock").unlink()
    (run / "run.lock").mkdir()
    resumed = run_cli("train", "--resume", str(run), "--set", "loop.epochs=2", timeout=120)
    no_traceback(resumed)
    assert resumed.returncode == 1 and resumed.stderr.strip().splitlines()[-1] == (
        f"error: {run / 'run.lock'}: the run's lock file is a folder, not a file; remove it (the next run that "
        "takes this run directory makes a new one)"), resumed.stderr


def test_a_linked_metrics_log_or_an_examples_fifo_is_refused_before_anything_is_written(source_run, tmp_path):
    """metrics.jsonl linked to a missing file outside the run: resume wrote the run's records there (as root,
    even to /nonexistent); examples/ as a FIFO: resume trained a whole epoch, then failed and lost it."""
    run = copy_of(source_run, tmp_path)
    outside = tmp_path / "outside.jsonl"
    (run / "metrics.jsonl").unlink()
    (run / "metrics.jsonl").symlink_to(outside)
    resumed = run_cli("train", "--resume", str(run), "--set", "loop.epochs=2", timeout=120)
    no_traceback(resumed)
    assert resumed.returncode == 1 and resumed.stderr.strip().splitlines()[-1] == (
        f"error: {run / 'metrics.jsonl'}: is a symbolic link, not the run's metrics log; move it out of the run "
        "directory and resume again"), resumed.stderr
    assert not outside.exists()
    (run / "metrics.jsonl").unlink()
    shutil.copy(source_run / "metrics.jsonl", run / "metrics.jsonl")
    shutil.rmtree(run / "examples", ignore_errors=True)
    os.mkfifo(run / "examples")
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    resumed = run_cli("train", "--resume", str(run), "--set", "loop.epochs=3", timeout=120)
    no_traceback(resumed)
    assert resumed.returncode == 1 and resumed.stderr.strip().splitlines()[-1] == (
        f"error: {run / 'examples'}: is a FIFO, not a folder of the run; move it out of the run directory and "
        "resume again"), resumed.stderr
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before


def test_values_at_the_float_limit_are_left_out_of_the_plots(source_run, tmp_path):
    """A loss of 1.7e308 crashed plot and report inside matplotlib ("arange: cannot compute length")."""
    run = copy_of(source_run, tmp_path)
    with open(run / "metrics.jsonl", "a") as log:
        for value in (1.7e308, -1.7e308, 1e308):
            log.write(json.dumps({"kind": "train", "epoch": 1, "step": 99, "epoch_progress": 1.5, "steps": 1,
                                  "losses": {"G/total": value}, "lr": {"opt_g": value}, "time": 1.0}) + "\n")
    for command in (["plot", str(run), "-o", str(tmp_path / "plots")], ["report", str(run)]):
        done = run_cli(*command, timeout=120)
        no_traceback(done)
        assert done.returncode == 0 and not done.stderr.strip(), (command, done.stderr)
