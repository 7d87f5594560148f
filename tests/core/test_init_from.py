"""``--init-from`` never loads part of a network silently: it fits exactly, or the user asked for a partial start."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import torch

from nectargan_core.checkpoint import save_checkpoint
from support import run_cli

TOY = ["--trainer", "toy", "--set", "run.device=cpu", "--set", "visualizers=[]", "--set", "loop.epochs=1",
       "--set", "toy.samples=4"]


def weights(features: int = 3, **renamed: str) -> dict[str, torch.Tensor]:
    """A toy_linear state dict (weight [1, features], bias [1]), keys optionally renamed."""
    torch.manual_seed(features)
    state = torch.nn.Linear(features, 1).state_dict()
    return {renamed.get(key, key): value for key, value in state.items()}


def checkpoint(path, state) -> str:
    save_checkpoint({"trainer": "toy", "epoch": 1, "global_step": 4, "config": {}, "state": state}, path)
    return str(path)


@dataclass
class Result:
    returncode: int
    stderr: str


@pytest.fixture
def train(tmp_path, monkeypatch, capsys):
    """``train(*args)``: ``nectargan train`` on the toy trainer, in this process (a subprocess costs seconds)."""
    from nectargan_core.cli.main import main

    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> Result:
        capsys.readouterr()
        try:
            main(["train", *TOY, *args])
            code = 0
        except SystemExit as exit:
            code = exit.code
        return Result(code, capsys.readouterr().err)

    return run


def error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_an_exact_fit_loads_every_tensor(tmp_path, train):
    source = checkpoint(tmp_path / "g.pt", {"model": weights(), "optimizer": {"state": {}, "param_groups": []}})
    result = train("--init-from", source)
    assert result.returncode == 0, result.stderr
    assert f"init_from: 'model' loaded 2/2 tensors from {source}\n" in result.stderr


@pytest.mark.slow
def test_nothing_matching_fails_in_one_line_even_when_partial(tmp_path):
    # the case: reference-layout keys wrapped by hand into this project's checkpoint format
    source = checkpoint(tmp_path / "wrapped.pt", {"model": weights(weight="model.0.weight", bias="model.0.bias")})
    for partial in ([], ["--init-from-partial"]):  # a real process: the exit status and stderr a user sees
        result = run_cli("train", *TOY, "--init-from", source, *partial, cwd=tmp_path)
        assert result.returncode == 2
        line = error_line(result)
        assert line.startswith(f"error: init_from: {source} fits none of this run's networks ('model' matched 0/2 "
                               "tensors: 2 missing (e.g. 'weight'), 2 not in this network (e.g. 'model.0.weight'); "
                               "it holds 'model')"), line
        assert "nectargan models import FILE --arch NAME" in line
    status = json.loads((tmp_path / "runs" / "run" / "version_0" / "status.json").read_text())
    assert status["status"] == "failed" and "fits none" in status["error"]
    assert not list((tmp_path / "runs" / "run" / "version_0" / "checkpoints").glob("*.pt"))  # never trained


def test_a_shape_mismatch_is_an_error_unless_partial_and_then_says_what_stays_random(tmp_path, train):
    source = checkpoint(tmp_path / "narrow.pt", {"model": weights(features=3)})
    wider = ["--set", "toy.model.features=5", "--init-from", source]
    result = train(*wider)
    assert result.returncode == 2
    assert error_line(result) == (
        f"error: init_from: {source} does not fit this run's networks exactly ('model' matched 1/2 tensors: 1 of "
        "another shape (e.g. weight [1, 3] vs [1, 5])); choose the models and options it was trained with, or start "
        "what does not fit from its initialisation with --init-from-partial (run.init_from_strict: false)")

    partial = train(*wider, "--init-from-partial")
    assert partial.returncode == 0, partial.stderr
    assert (f"init_from: 'model' loaded 1/2 tensors from {source}; 1 stay at their initialisation (weight)\n"
            in partial.stderr)
    config = (tmp_path / "runs" / "run" / "version_1" / "config.yaml").read_text()
    assert "init_from_strict: false" in config


def test_a_network_the_checkpoint_lacks_is_an_error_unless_partial(tmp_path, train):
    source = checkpoint(tmp_path / "other.pt", {"generator": weights()})
    result = train("--init-from", source, "--init-from-partial")
    assert result.returncode == 2  # partial, but still nothing at all to load
    assert "fits none of this run's networks ('model' matched 0/2 tensors: not in the checkpoint; it holds " \
           "'generator')" in error_line(result)


def test_missing_tensors_are_reported_as_staying_random(tmp_path, train):
    state = weights()
    del state["bias"]
    source = checkpoint(tmp_path / "nobias.pt", {"model": state})
    strict = train("--init-from", source)
    assert strict.returncode == 2
    assert "'model' matched 1/2 tensors: 1 missing (e.g. 'bias')" in error_line(strict)
    partial = train("--init-from", source, "--init-from-partial")
    assert partial.returncode == 0, partial.stderr
    assert "init_from: 'model' loaded 1/2 tensors from" in partial.stderr
    assert "; 1 stay at their initialisation (bias)" in partial.stderr


@pytest.mark.parametrize("state,problem", [
    ([1, 2], "the checkpoint holds no network weights (no 'state' mapping)"),
    ({"model": [1, 2]}, "the weights of 'model' are not a state dict (a list)"),
    ({"model": {"weight": "w", "bias": torch.zeros(1)}}, "the weights of 'model' hold a str under 'weight', "
                                                         "not a tensor"),
])
def test_a_malformed_checkpoint_is_one_line(tmp_path, train, state, problem):
    source = checkpoint(tmp_path / "bad.pt", state)
    result = train("--init-from", source)
    assert result.returncode == 1
    assert error_line(result).startswith(f"error: {source}: {problem}")


def test_a_missing_file_fails_before_a_run_directory_exists(tmp_path, train):
    result = train("--init-from", str(tmp_path / "nope.pt"))
    assert result.returncode == 1
    assert error_line(result) == f"error: {tmp_path / 'nope.pt'}: checkpoint file not found (run.init_from)"
    assert not (tmp_path / "runs").exists()


def test_partial_needs_init_from(tmp_path, train):
    result = train("--init-from-partial")
    assert result.returncode == 2
    assert error_line(result) == "error: --init-from-partial needs --init-from CHECKPOINT"
