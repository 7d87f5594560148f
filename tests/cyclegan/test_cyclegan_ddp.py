"""CycleGAN data-parallel: 2 gloo processes of batch 1 give what 1 process of batch 2 gives.

Real runs: ``nectargan train --nproc 2`` starts two workers on 127.0.0.1. The
networks have no normalisation: their gradients are then exact means of
per-sample gradients (with instance norm, conv biases before a norm get
float-noise gradients that Adam magnifies to full steps, so no two runs agree
on them). The image pools are shared: every process holds the pools of the
whole batch, so the equivalence holds with pools drawing too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nectargan_core.checkpoint import load_checkpoint
from nectargan_core.rundir import RunDir
from support import run_cli

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed unavailable")]

PER_SAMPLE_MODELS = ("models.generator.name=resnet", "models.generator.n_blocks=1", "models.generator.ngf=4",
                     "models.generator.norm=none", "models.discriminator.ndf=4", "models.discriminator.n_layers=2",
                     "models.discriminator.norm=none")


def train(data: Path, cwd: Path, out: str, batch_size: int, pool: int, *, nproc: int = 1, steps: int = 4):
    settings = [f"data.root={data}", "data.load_size=16", "data.crop_size=16", "data.num_workers=0",
                f"data.batch_size={batch_size}", f"pool.size={pool}", "run.device=cpu", "run.deterministic=true",
                "run.threads=1",
                "visualizers=[]", "loop.log_every_steps=1", "loop.epochs=1", f"loop.max_steps={steps}",
                "examples.every_epochs=null", f"run.output_dir={out}", *PER_SAMPLE_MODELS]
    args = ["train", "--trainer", "cyclegan", *(a for s in settings for a in ("--set", s))]
    done = run_cli(*args, *(["--nproc", str(nproc)] if nproc > 1 else []), cwd=cwd, timeout=240)
    assert done.returncode == 0, done.stderr
    if nproc > 1:
        assert f"({nproc} processes, gloo)" in done.stderr
    return cwd / out / "run" / "version_0"


def state(run_dir: Path) -> dict:
    return load_checkpoint(RunDir(run_dir).periodic_checkpoints()[-1])


def losses(run_dir: Path) -> list[dict]:
    records = map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
    return [record["losses"] for record in records if record["kind"] == "train"]


def test_two_processes_of_batch_1_equal_one_process_of_batch_2(make_unpaired, tmp_path):
    # Pools of 3 (full after the second step, then drawing): equal weights with drawing pools imply equal
    # weights without them, so one run pair proves both (a pair costs about a minute of CPU).
    pool = 3
    data = make_unpaired(10, 16, val=0.2, test=0.0)  # 8 train images per domain: 4 steps of 2
    two = train(data, tmp_path, "two", 1, pool, nproc=2)
    one = train(data, tmp_path, "one", 2, pool)
    two_state, one_state = state(two), state(one)
    assert two_state["global_step"] == one_state["global_step"] == 4
    for name in ("G_A", "G_B", "D_A", "D_B"):
        for key, value in one_state["state"][name].items():
            torch.testing.assert_close(two_state["state"][name][key], value, atol=1e-6, rtol=0,
                                       msg=lambda m, name=name, key=key: f"{name}.{key}: {m}")
    assert int(two_state["state"]["opt_G"]["state"][0]["step"]) == 4
    # rank 0's pools, written to the checkpoint, are those of the whole batch
    assert two_state["state"]["pool_random"] == one_state["state"]["pool_random"]
    for name in ("fake_A_pool", "fake_B_pool"):
        assert two_state["state"][name]["images"].shape == (3, 3, 16, 16)
        torch.testing.assert_close(two_state["state"][name]["images"], one_state["state"][name]["images"],
                                   atol=1e-6, rtol=0)
    for two_loss, one_loss in zip(losses(two), losses(one), strict=True):  # means over both processes
        for key in ("G/total", "G/cycle_A", "G/idt_B", "D/D_A", "D/D_B"):
            assert two_loss[key] == pytest.approx(one_loss[key], rel=1e-5), key
