"""docs/plugins/trainer-api.md and the authoring guide's ring trainer: signatures are the code's, code runs as written."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from nectargan_core import (AccumulationGroup, ResumableSampler, Run, SplitListing, Trainer, TrainerKit, Update,
                            choice_of, hookimpl, load_checkpoint, optimizer_step)
from nectargan_core.rundir import RunDir
from nectargan_translate import GeneratorSpec, TranslationTrainer
from support import ROOT, run_cli

PAGE = ROOT / "docs" / "plugins" / "trainer-api.md"
GUIDE = ROOT / "docs" / "plugins" / "authoring.md"

#: Everything the page documents with a signature, by the name it shows.
DOCUMENTED = {
    "setup": Trainer.setup, "train_dataloader": Trainer.train_dataloader, "build": Trainer.build,
    "track": Trainer.track, "parallel": Trainer.parallel, "num_batches": Trainer.num_batches,
    "batches": Trainer.batches,
    "learning_rates": Trainer.learning_rates, "request_stop": Trainer.request_stop,
    "TrainerKit": TrainerKit, "update": TrainerKit.update, "step": TrainerKit.step,
    "step_epoch_schedulers": TrainerKit.step_epoch_schedulers,
    "autocast": TrainerKit.autocast, "scaler": TrainerKit.scaler,
    "backward": Update.backward, "step ": Update.step, "optimizer_step": optimizer_step,
    "AccumulationGroup.of": AccumulationGroup.of, "choice_of": choice_of, "ResumableSampler": ResumableSampler,
    "set_epoch": ResumableSampler.set_epoch, "skip": ResumableSampler.skip, "shard": ResumableSampler.shard,
    "SplitListing.of_files": SplitListing.of_files,
    "generator_spec": TranslationTrainer.generator_spec, "GeneratorSpec": GeneratorSpec,
    **{name: getattr(TranslationTrainer, name) for name in (
        "setup_data", "dataset", "optional_split", "to_device", "compiled", "setup_updates", "updates_due",
        "translator", "eval_loader", "example_indices", "example_batch", "write_examples")},
}


def signature(name: str, obj) -> str:
    """``name(params) -> return`` as the page shows it: annotations without quotes, no ``self``."""
    sig = inspect.signature(obj)

    def plain(annotation: object) -> str:
        return str(annotation).replace("'", "").replace('"', "")

    parts, starred = [], False
    for param in sig.parameters.values():
        if param.name == "self":
            continue
        if param.kind is param.KEYWORD_ONLY and not starred:
            parts.append("*")
        starred = starred or param.kind in (param.KEYWORD_ONLY, param.VAR_POSITIONAL)
        text = ("**" if param.kind is param.VAR_KEYWORD else "") + param.name
        if param.annotation is not param.empty:
            text += f": {plain(param.annotation)}"
        if param.default is not param.empty:
            text += f" = {param.default!r}"
        parts.append(text)
    return f"{name.strip()}({', '.join(parts)}) -> {plain(sig.return_annotation)}"


def signature_lines(text: str) -> list[str]:
    """The one-line signature blocks of a page (fenced blocks without a language)."""
    return re.findall(r"^```\n([A-Za-z_.]+\(.*\) -> .+)\n```$", text, re.M)


def doc_files(text: str) -> dict[str, str]:
    return dict(re.findall(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", text, re.S))


def test_every_documented_signature_is_the_code_s():
    shown = signature_lines(PAGE.read_text())
    expected = [signature(name, obj) for name, obj in DOCUMENTED.items()]
    assert sorted(shown) == sorted(expected)


@pytest.fixture
def page_modules(tmp_path, monkeypatch):
    """The page's code files, importable."""
    for name, body in doc_files(PAGE.read_text()).items():
        (tmp_path / name).write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for module in ("twonet_trainer", "twonet_options", "jittered"):
        sys.modules.pop(module, None)


def test_the_one_screen_trainer_trains_skips_and_resumes_as_written(page_modules, tmp_path, nectargan_plugin_host):
    options = importlib.import_module("twonet_options")

    class TwoNetPlugin:
        @hookimpl
        def register_trainers(self, register):
            register("twonet", "twonet_trainer:TwoNetTrainer", options=options.TwoNetOptions)

    host = nectargan_plugin_host(TwoNetPlugin())
    config = {"trainer": "twonet", "run": {"output_dir": str(tmp_path / "runs"), "device": "cpu"},
              "loop": {"epochs": 2, "nonfinite": "skip", "val_every_epochs": None}, "twonet": {"samples": 64},
              "visualizers": []}
    run = Run.create(config, host=host).fit()
    assert run.trainer.global_step == 8 and run.status()["status"] == "finished"
    state = load_checkpoint(run.trainer.last_checkpoint)["state"]
    assert sorted(state) == ["discriminator", "generator", "opt_d", "opt_g"]
    resumed = Run.resume(run.dir, overrides=["loop.epochs=3"], host=host).fit()
    assert resumed.trainer.global_step == 12


def test_the_epoch_sampler_gives_the_same_batches_after_a_resume(page_modules):
    jittered = importlib.import_module("jittered")
    points = torch.randn(10, 2, generator=torch.Generator().manual_seed(0))

    def epoch(number: int, skip: int = 0) -> list[torch.Tensor]:
        sampler = jittered.EpochSampler(len(points), seed=3)
        sampler.set_epoch(number)
        sampler.skip(skip)
        return list(DataLoader(jittered.JitteredPoints(points, 3), batch_size=4, sampler=sampler))

    full = epoch(1)
    assert len(full) == 3 and all(map(torch.equal, epoch(1), full))
    assert all(map(torch.equal, epoch(1, skip=4), full[1:]))  # resumed after the first batch
    assert not torch.equal(epoch(2)[0], full[0])
    assert isinstance(jittered.EpochSampler(3), ResumableSampler)


# -- the authoring guide's trainer ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def ring_site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ring")
    files = doc_files(GUIDE.read_text())
    ring = {path: body for path, body in files.items() if path.startswith("nectargan-ring/")}
    assert set(ring) == {"nectargan-ring/pyproject.toml", "nectargan-ring/nectargan_ring/__init__.py",
                         "nectargan-ring/nectargan_ring/plugin.py", "nectargan-ring/nectargan_ring/trainer.py"}
    for relative, body in ring.items():
        path = root / "src" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    isolation = [] if importlib.util.find_spec("setuptools") is None else ["--no-build-isolation"]
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", *isolation, "--target",
                    str(root / "site"), str(root / "src" / "nectargan-ring")],
                   check=True, capture_output=True, text=True, timeout=300)
    return root / "site"


def guide_commands() -> list[list[str]]:
    text = GUIDE.read_text()
    section = text[text.index("## A trainer: a two-network GAN"):text.index("## An image-translation trainer")]
    return [line.split("#")[0].split()[1:] for line in section.splitlines() if line.startswith("nectargan ")]


@pytest.mark.slow
def test_the_guide_s_ring_trainer_installs_trains_with_the_kit_and_resumes(ring_site, tmp_path):
    env = {"PYTHONPATH": str(ring_site)}
    listed, train, resume, distributed = guide_commands()
    shown = run_cli(*listed, env=env)
    assert "ring (nectargan-ring 1.0.0) [loaded]" in shown.stdout and "provides: trainer: ring" in shown.stdout

    trained = run_cli(*train, env=env, cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr
    run_dir = tmp_path / "runs" / "run" / "version_0"
    epochs = [line for line in (run_dir / "metrics.jsonl").read_text().splitlines() if '"kind":"epoch"' in line]
    errors = [float(re.search(r'"val/radius_error":([\d.e-]+)', line).group(1)) for line in epochs]
    assert len(errors) == 3 and errors[-1] < errors[0]  # G learns the ring
    checkpoint = load_checkpoint(RunDir(run_dir).periodic_checkpoints()[-1])
    assert sorted(checkpoint["state"]) == ["discriminator", "generator", "opt_d", "opt_g"]
    assert int(checkpoint["state"]["opt_g"]["state"][0]["step"]) == 12  # 8 batches an epoch, 2 per update

    resumed = run_cli(*resume, env=env, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming {Path('runs/run/version_0')} at end of epoch 3/4 (step 24)" in resumed.stderr


@pytest.mark.slow
@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed unavailable")
def test_the_guide_s_ring_trainer_trains_in_two_processes(ring_site, tmp_path):
    *_, distributed = guide_commands()
    done = run_cli(*distributed, env={"PYTHONPATH": str(ring_site)}, cwd=tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "(2 processes, gloo)" in done.stderr
    checkpoint = load_checkpoint(RunDir(tmp_path / "runs" / "run" / "version_0").periodic_checkpoints()[-1])
    assert checkpoint["world_size"] == 2 and checkpoint["global_step"] == 4  # 512 samples, 64 per process
