"""Run directories: numeric versions, status, discovery of the latest run."""

from __future__ import annotations

import os
import time

import pytest

from nectargan_core.errors import RunDirError
from nectargan_core.rundir import RunDir, iter_runs, latest_run


def test_versions_are_numbers_not_strings(tmp_path):
    for version in (0, 1, 2, 9, 10):
        (tmp_path / "exp" / f"version_{version}").mkdir(parents=True)
    (tmp_path / "exp" / "version_x").mkdir()
    assert RunDir.create(tmp_path, "exp").path.name == "version_11"


def test_iter_runs_orders_by_number_and_skips_non_runs(tmp_path):
    for version in (10, 9, 2):
        run = RunDir.create(tmp_path, "exp")
        os.rename(run.path, tmp_path / "exp" / f"version_{version}x")
    for version in (10, 9, 2):
        path = tmp_path / "exp" / f"version_{version}"
        (tmp_path / "exp" / f"version_{version}x").rename(path)
        (path / "config.yaml").write_text("{}")
    (tmp_path / "exp" / "version_3").mkdir()  # no config.yaml: not a run
    assert [r.path.name for r in iter_runs(tmp_path)] == ["version_2", "version_9", "version_10"]


def test_latest_run_uses_status_time(tmp_path):
    first = RunDir.create(tmp_path, "a")
    second = RunDir.create(tmp_path, "b")
    for run in (first, second):
        run.config_file.write_text("{}")
    second.write_status("finished")
    time.sleep(0.01)
    first.write_status("running")
    assert latest_run(tmp_path) == first
    assert latest_run(tmp_path, "b") == second
    with pytest.raises(RunDirError, match="no runs named 'c' found"):
        latest_run(tmp_path, "c")


def test_open_errors(tmp_path):
    with pytest.raises(RunDirError, match="run directory not found"):
        RunDir.open(tmp_path / "missing")
    with pytest.raises(RunDirError, match="not a NectarGAN run directory"):
        RunDir.open(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_output_dir(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(RunDirError, match="run.output_dir"):
        RunDir.create(locked, "exp")


def test_output_dir_that_is_a_file(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(RunDirError, match=r"run.output_dir: cannot create '.*file/exp'"):
        RunDir.create(blocker, "exp")
