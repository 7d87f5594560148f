"""Issue 25, class 5: a resume whose train files changed since its checkpoint is never silently another run.

A mid-epoch checkpoint's position counts batches of one order of one listing.
Files added, removed or renamed since make that position point elsewhere:
resume refuses in one line, changing nothing, unless ``--data-changed``; files
with other contents under the same names keep the position with a warning;
between epochs a changed listing is a note. Each case here fails without the
listing recorded in the checkpoint (the resume went on silently, and a
shrunken folder printed ``batch 4/1``).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
import torch

from nectargan_core import CheckpointError, Run, SplitListing
from nectargan_core.splitlisting import TrainData
from support import run_cli
from translation_fixtures import pix2pix_config

pytestmark = pytest.mark.usefixtures("make_synth")


def stopped_mid_epoch(tmp_path: Path, make_synth, *, steps: int = 3, epochs: int = 2, **sections) -> tuple[Run, Path]:
    """A tiny pix2pix run (10 train pairs, batches of 2: 5 a epoch) stopped after ``steps`` steps, on its own copy
    of the data; returns the run and its train folder."""
    data = tmp_path / "data"
    shutil.copytree(make_synth(12, 32), data)
    config = pix2pix_config(tmp_path, data, loop={"epochs": epochs, "max_steps": steps},
                            checkpoint={"every_steps": 1, "keep_last": 20}, **sections)
    run = Run.create(config).fit()
    run.close()
    return run, data / "train"


def run_files(run_dir: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*")) if p.is_file()}


def resume(run: Run, **kwargs) -> Run:
    return Run.resume(run.dir, overrides=["loop.max_steps=null"], **kwargs)


@pytest.mark.parametrize("change, described", [
    ("add", "1 added ('extra.png'); 10 files then, 11 now"),
    ("remove", "1 removed ('00003.png'); 10 files then, 9 now"),
    ("rename", "1 renamed ('00003.png' -> 'renamed.png'); 10 files"),
    ("add two, remove three", "2 added ('extra.png', 'extra2.png'), 3 removed ('00000.png', '00001.png' and 1 more)"),
])
def test_a_mid_epoch_resume_over_added_removed_or_renamed_files_is_refused_and_changes_nothing(
        tmp_path, make_synth, change, described):
    run, train = stopped_mid_epoch(tmp_path, make_synth)
    if change == "add":
        shutil.copy(train / "00000.png", train / "extra.png")
    elif change == "remove":
        (train / "00003.png").unlink()
    elif change == "rename":
        (train / "00003.png").rename(train / "renamed.png")
    else:
        shutil.copy(train / "00005.png", train / "extra.png")
        shutil.copy(train / "00006.png", train / "extra2.png")
        for name in ("00000.png", "00001.png", "00002.png"):
            (train / name).unlink()
    before = run_files(run.dir)
    with pytest.raises(CheckpointError) as refused:
        resume(run)
    message = str(refused.value)
    assert "\n" not in message
    assert f"the train data changed since this checkpoint ({described}" in message
    assert "its position, epoch 1 batch 3 of 5, counts batches of the old order" in message
    assert "--data-changed" in message and f"nothing in {run.dir} was changed" in message
    assert run_files(run.dir) == before  # config, status, metrics, lock, checkpoints: byte for byte


def test_data_changed_finishes_the_epoch_over_the_files_there_now(tmp_path, make_synth, capfd):
    run, train = stopped_mid_epoch(tmp_path, make_synth)
    shutil.copy(train / "00000.png", train / "extra.png")  # 11 files: 6 batches of 2 (the last one short)
    resumed = resume(run, data_changed=True)
    assert resumed.trainer.batch_in_epoch == 3
    err = capfd.readouterr().err
    assert ("warning: the train data changed since this checkpoint (1 added ('extra.png'); 10 files then, 11 now); "
            "--data-changed: epoch 1 goes on over the data as it is now, 3 batches done, 3 of its 6 batches left") in err
    resumed.fit()
    epochs = resumed.metrics("epoch")
    assert [record["step"] for record in epochs] == [6, 12]  # 3 + the 3 left of epoch 1, then 6 in epoch 2
    # the next checkpoints record the new listing: a second resume from them is quiet
    saved = TrainData.from_record(torch.load(resumed.trainer.last_checkpoint, weights_only=True)["data"])
    assert saved.listing is not None and "extra.png" in saved.listing.names


def test_a_folder_shrunk_below_the_batches_done_ends_the_epoch_instead_of_counting_past_it(tmp_path, make_synth,
                                                                                             capfd):
    run, train = stopped_mid_epoch(tmp_path, make_synth, steps=4)
    for path in sorted(train.iterdir())[2:]:  # 2 files left: 1 batch an epoch, 4 were done
        path.unlink()
    resumed = resume(run, data_changed=True)
    assert resumed.trainer.batch_in_epoch == 1
    assert "batch 1/1" in resumed.trainer.position_text()
    err = capfd.readouterr().err
    assert "8 removed" in err and "4 batches done, 0 of its 1 batches left" in err
    resumed.fit()
    assert [record["step"] for record in resumed.metrics("epoch")] == [4, 5]


def test_other_contents_under_the_same_names_keep_the_position_with_a_warning(tmp_path, make_synth, capfd):
    run, train = stopped_mid_epoch(tmp_path, make_synth)
    shutil.copy(train / "00009.png", train / "00002.png")  # replaced: other bytes, same name
    resumed = resume(run)
    assert resumed.trainer.batch_in_epoch == 3
    err = capfd.readouterr().err
    assert ("warning: the train data changed since this checkpoint: 1 with other contents (size or modification "
            "time: '00002.png'); 10 files; training goes on from the same position") in err


def test_between_epochs_a_changed_listing_is_a_note_and_the_next_epoch_uses_it(tmp_path, make_synth, capfd):
    run, train = stopped_mid_epoch(tmp_path, make_synth, steps=5)  # the end of epoch 1
    (train / "00004.png").unlink()
    resumed = resume(run)
    err = capfd.readouterr().err
    assert ("note: the train data changed since this checkpoint: 1 removed ('00004.png'); 10 files then, 9 now; "
            "epoch 2 draws its order from the files there now") in err
    resumed.fit()
    assert [record["step"] for record in resumed.metrics("epoch")] == [5, 10]


def test_an_unchanged_or_moved_dataset_resumes_without_a_word(tmp_path, make_synth, capfd):
    run, train = stopped_mid_epoch(tmp_path, make_synth)
    moved = tmp_path / "moved"
    os.replace(train.parent, moved)  # the same files elsewhere: names are relative to the split
    capfd.readouterr()
    resumed = Run.resume(run.dir, overrides=["loop.max_steps=null", f"data.root={moved}"])
    assert resumed.trainer.batch_in_epoch == 3
    assert "changed since this checkpoint" not in capfd.readouterr().err


def test_a_checkpoint_from_before_the_record_or_with_a_crafted_one_resumes_with_a_note(tmp_path, make_synth, capfd):
    run, train = stopped_mid_epoch(tmp_path, make_synth)
    checkpoint = run.dir / "checkpoints" / "epoch0000-step00000003.pt"
    assert checkpoint.exists(), sorted(p.name for p in (run.dir / "checkpoints").iterdir())
    (train / "00003.png").unlink()
    for record in ("absent", None, {"listing": {"names": [1]}, "samples": "x"}, [1, 2]):
        payload = torch.load(checkpoint, weights_only=True)
        if record == "absent":
            del payload["data"]
        else:
            payload["data"] = record
        crafted = tmp_path / f"crafted-{len(str(record))}.pt"
        torch.save(payload, crafted)
        capfd.readouterr()
        resumed = Run.resume(run.dir, checkpoint=crafted, overrides=["loop.max_steps=null"])
        assert resumed.trainer.batch_in_epoch == 3
        assert ("note: this checkpoint does not record which train files its position (epoch 1, batch 3) counts"
                in capfd.readouterr().err), record
        resumed.close()


@pytest.mark.parametrize("batch, message", [
    (-3, "its loop position cannot be (epoch 0, step 3, batch -3): the file is damaged"),
    (99, "its loop position, batch 99, is past the 5 batches its epoch had: the file is damaged"),
])
def test_a_crafted_position_is_refused_in_one_line_changing_nothing(tmp_path, make_synth, batch, message):
    run, _ = stopped_mid_epoch(tmp_path, make_synth)
    payload = torch.load(run.dir / "checkpoints" / "epoch0000-step00000003.pt", weights_only=True)
    payload["batch_in_epoch"] = batch
    crafted = tmp_path / "crafted.pt"
    torch.save(payload, crafted)
    before = run_files(run.dir)
    with pytest.raises(CheckpointError, match=re.escape(message)):
        Run.resume(run.dir, checkpoint=crafted, overrides=["loop.max_steps=null"])
    assert run_files(run.dir) == before


def test_another_batch_size_mid_epoch_is_refused_and_data_changed_goes_on(tmp_path, make_synth, capfd):
    run, _ = stopped_mid_epoch(tmp_path, make_synth)
    with pytest.raises(CheckpointError, match=re.escape(
            "(5 batches an epoch then, 3 now: data.batch_size or data.drop_last changed): its position, epoch 1 "
            "batch 3 of 5, counts batches of the old order; undo the --set that changed it")):
        Run.resume(run.dir, overrides=["loop.max_steps=null", "data.batch_size=4"])
    resumed = Run.resume(run.dir, overrides=["loop.max_steps=null", "data.batch_size=4"], data_changed=True)
    assert resumed.trainer.batch_in_epoch == 3
    assert "3 batches done, 0 of its 3 batches left" in capfd.readouterr().err


@pytest.mark.parametrize("override, then_now", [
    ("run.seed=7", "each epoch's order was shuffled with seed {seed}, now shuffled with seed 7"),
    ("data.shuffle=false", "each epoch's order was shuffled with seed {seed}, now not shuffled"),
])
def test_another_seed_or_shuffle_mid_epoch_is_refused_and_between_epochs_is_a_choice(
        tmp_path, make_synth, capfd, override, then_now):
    """The position counts batches of one permutation, which (seed, shuffle) and the epoch fix: another seed
    mid-epoch drew another permutation and repeated or skipped samples without a word."""
    run, _ = stopped_mid_epoch(tmp_path, make_synth)
    assert run.config.run.seed != 7
    before = run_files(run.dir)
    with pytest.raises(CheckpointError, match=re.escape(
            f"(data.shuffle or run.seed changed: {then_now.format(seed=run.config.run.seed)}): its position, epoch 1 batch 3 of 5, counts batches "
            "of the old order; undo the --set that changed it, or resume with --data-changed")):
        Run.resume(run.dir, overrides=["loop.max_steps=null", override])
    assert run_files(run.dir) == before
    resumed = Run.resume(run.dir, overrides=["loop.max_steps=null", override], data_changed=True)
    assert resumed.trainer.batch_in_epoch == 3
    assert "--data-changed: epoch 1 goes on over the data as it is now, 3 batches done, 2 of its 5" \
        in capfd.readouterr().err
    resumed.close()
    between, _ = stopped_mid_epoch(tmp_path / "between", make_synth, steps=5)  # epoch 1 done, epoch 2 not begun
    again = Run.resume(between.dir, overrides=["loop.max_steps=null", override])
    assert again.trainer.batch_in_epoch == 0 and "changed" not in capfd.readouterr().err
    again.close()
    assert TrainData.from_record({"samples": 1, "batches": 1, "listing": None, "order": {"seed": "0"}}) is None


def test_a_huge_crafted_name_is_shortened_in_the_line():
    saved = SplitListing(("x" * 10_000_000,), (1,), (1,))
    change = SplitListing((), (), ()).changes_since(saved)
    assert len(change.describe()) < 400 and "..." in change.describe()


def test_the_command_refuses_in_one_line_and_data_changed_needs_resume(tmp_path, make_synth):
    run, train = stopped_mid_epoch(tmp_path, make_synth)
    (train / "00007.png").rename(train / "later.png")
    refused = run_cli("train", "--resume", str(run.dir), "--set", "loop.max_steps=null")
    assert refused.returncode == 1, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in refused.stderr
    assert "1 renamed ('00007.png' -> 'later.png')" in lines[0] and "--data-changed" in lines[0]
    went_on = run_cli("train", "--resume", str(run.dir), "--set", "loop.max_steps=null", "--data-changed")
    assert went_on.returncode == 0, went_on.stderr
    assert "--data-changed: epoch 1 goes on over the data as it is now" in went_on.stderr
    alone = run_cli("train", "--data-changed", "--set", "trainer=pix2pix")
    assert alone.returncode == 2 and "--data-changed needs --resume RUN_DIR" in alone.stderr


def test_an_unpaired_run_compares_both_domains(tmp_path):
    from PIL import Image

    root = tmp_path / "data"
    for folder in ("trainA", "trainB", "valA", "valB"):
        (root / folder).mkdir(parents=True)
        for i in range(4 if folder.startswith("train") else 1):
            Image.new("RGB", (32, 32), (40 * i, 80, 120)).save(root / folder / f"{i}.png")
    config = {"trainer": "cyclegan", "run": {"output_dir": str(tmp_path / "runs"), "device": "cpu"},
              "loop": {"epochs": 1, "max_steps": 1}, "checkpoint": {"every_steps": 1},
              "data": {"root": str(root), "load_size": 32, "crop_size": 32, "num_workers": 0, "batch_size": 2},
              "models": {"generator": {"name": "resnet", "ngf": 4, "n_blocks": 1},
                         "discriminator": {"name": "patchgan", "ndf": 4, "n_layers": 1}},
              "visualizers": []}
    run = Run.create(config).fit()
    run.close()
    (root / "trainB" / "3.png").unlink()
    with pytest.raises(CheckpointError, match=r"1 removed \('trainB/3.png'\); 8 files then, 7 now"):
        resume(run)


@pytest.mark.parametrize("saved, now, expected", [
    ((["a", "b"], [1, 2], [10, 20]), (["a", "b"], [1, 2], [10, 20]), ""),
    ((["a", "b"], [1, 2], [10, 20]), (["b", "a"], [2, 1], [20, 10]), "the same files in another order (a changed setting such as data.direction); 2 files"),
    ((["a"], [5], [7]), (["z"], [5], [7]), "1 renamed ('a' -> 'z'); 1 file"),
    ((["a"], [5], [7]), (["z"], [5], [8]), "1 added ('z'), 1 removed ('a'); 1 file"),  # a new file, not a rename
    ((["a", "b", "c", "d"], [1] * 4, [1, 2, 3, 4]), ([], [], []),
     "4 removed ('a', 'b' and 2 more); 4 files then, 0 now"),
    ((["x\x1b[31m"], [1], [1]), (["x\x1b[31m"], [2], [1]), "1 with other contents (size or modification time: "
                                                           "'x\\x1b[31m'); 1 file"),
])
def test_listing_changes_are_described_in_one_phrase(saved, now, expected):
    change = SplitListing(*map(tuple, now)).changes_since(SplitListing(*map(tuple, saved)))
    assert (change.describe() if change else "") == expected
    assert "\n" not in expected


def test_a_listing_round_trips_through_a_checkpoint_record_and_refuses_wrong_shapes(tmp_path):
    (tmp_path / "a.png").write_bytes(b"12345")
    listing = SplitListing.of_files(tmp_path, [tmp_path / "a.png", tmp_path / "gone.png"])
    assert listing.names == ("a.png", "gone.png") and listing.sizes == (5, -1)
    assert SplitListing.from_record(listing.to_record()) == listing
    for bad in (None, [], {"names": ["a"], "sizes": [1], "mtimes": []}, {"names": ["a"], "sizes": [True],
                                                                        "mtimes": [1]},
                {"names": [b"a"], "sizes": [1], "mtimes": [1]}):
        assert SplitListing.from_record(bad) is None


def test_under_nproc_a_refused_resume_is_one_line_that_does_not_offer_to_continue(tmp_path):
    """The toy dataset lists no files: its length is compared. The launcher's line must not say "continue with"
    (that resume is refused the same way)."""
    toy = ["--trainer", "toy", "--set", "run.device=cpu", "--set", "visualizers=[]", "--set", "toy.samples=64",
           "--set", "toy.batch_size=4", "--set", "loop.epochs=2", "--set", "checkpoint.every_steps=1",
           "--set", "run.output_dir=runs"]
    first = run_cli("train", *toy, "--set", "loop.max_steps=3", "--nproc", "2", cwd=tmp_path, timeout=300)
    assert first.returncode == 0, first.stderr
    run_dir = tmp_path / "runs" / "run" / "version_0"
    before = run_files(run_dir)
    refused = run_cli("train", "--resume", str(run_dir), "--set", "toy.samples=60", "--nproc", "2", cwd=tmp_path,
                      timeout=300)
    assert refused.returncode == 1, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert "(64 samples then, 60 now)" in lines[0] and "restore the data or undo the --set" in lines[0]
    assert "continue with" not in lines[0]
    assert run_files(run_dir) == before
