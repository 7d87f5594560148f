"""Augmentations: paired where geometric, A-only where photometric, none at val/test, and reproducible."""

from __future__ import annotations

import pytest
import torch

from nectargan_translate.data import EpochSampler, PairedDataset, build_dataloader
from data_helpers import aligned_dataset, noise, save_aligned

GEOMETRIC = [{"name": n, "p": 1.0} for n in ("hflip", "vflip", "rot90", "affine", "elastic")]
PHOTOMETRIC = ["color_jitter", "gaussian_noise", "blur", "gamma", "grayscale", "jpeg"]
SIZES = {"load_size": 40, "crop_size": 32, "num_workers": 0}


@pytest.fixture(scope="module")
def twin_root(tmp_path_factory):
    """Aligned files whose B half is an exact copy of A: any geometric mismatch shows."""
    return aligned_dataset(tmp_path_factory.mktemp("twins"), {"train": 6, "val": 3}, size=36, same=True)


def items(ds, epoch=0):
    return [ds[(epoch, i)] for i in range(len(ds))]


def test_geometric_augmentations_move_a_and_b_together(twin_root):
    ds = PairedDataset({"root": str(twin_root), **SIZES, "augment": GEOMETRIC}, seed=3)
    plain = PairedDataset({"root": str(twin_root), **SIZES, "augment": []}, seed=3)
    for epoch in (0, 1):
        for item, base in zip(items(ds, epoch), items(plain, epoch)):
            assert item["A"].shape == (3, 32, 32)
            assert torch.equal(item["A"], item["B"])
            assert not torch.equal(item["A"], base["A"])  # something did happen


@pytest.mark.parametrize("name", PHOTOMETRIC)
def test_photometric_augmentations_touch_only_a(twin_root, name):
    strong = {"blur": {"sigma": [1.0, 1.5]}}.get(name, {})  # sigma 0.1 would leave pixels as they are
    augment = [*GEOMETRIC, {"name": name, "p": 1.0, **strong}]
    ds = PairedDataset({"root": str(twin_root), **SIZES, "augment": augment}, seed=5)
    geometric_only = PairedDataset({"root": str(twin_root), **SIZES, "augment": GEOMETRIC}, seed=5)
    for item, base in zip(items(ds), items(geometric_only)):
        assert torch.equal(item["B"], base["B"])  # same geometry, untouched target
        assert not torch.equal(item["A"], item["B"])
        assert item["A"].min() >= -1 and item["A"].max() <= 1


def test_photometric_leaves_alpha_alone_and_grayscale_skips_one_channel(tmp_path):
    rgba = noise(16, channels=4, seed=1)
    save_aligned(tmp_path / "train" / "x.png", rgba, rgba)
    augment = [{"name": n, "p": 1.0} for n in PHOTOMETRIC]
    opts = {"root": str(tmp_path), "load_size": None, "crop_size": None, "num_workers": 0}
    item = PairedDataset({**opts, "in_channels": 4, "out_channels": 4, "augment": augment})[0]
    assert torch.equal(item["A"][3], item["B"][3]) and not torch.equal(item["A"][:3], item["B"][:3])
    gray = PairedDataset({**opts, "in_channels": 1, "augment": [{"name": "grayscale", "p": 1.0}]})[0]
    plain = PairedDataset({**opts, "in_channels": 1, "augment": []})[0]
    assert torch.equal(gray["A"], plain["A"])


def test_no_augmentation_at_val_or_test(twin_root):
    heavy = [*GEOMETRIC, *({"name": n, "p": 1.0} for n in PHOTOMETRIC)]
    opts = {"root": str(twin_root), **SIZES, "test": {"folder": "val"}}
    for split in ("val", "test"):
        augmented = PairedDataset({**opts, "augment": heavy}, split, seed=1)
        plain = PairedDataset({**opts, "augment": []}, split, seed=2)
        for epoch in (0, 4):
            for item, base in zip(items(augmented, epoch), items(plain)):
                assert torch.equal(item["A"], base["A"]) and torch.equal(item["A"], item["B"])
    raw = PairedDataset({**opts, "val": {"folder": "val", "preprocess": "none"}, "augment": heavy}, "val")
    reference = PairedDataset({**opts, "load_size": None, "crop_size": None, "augment": []}, "val")
    assert torch.equal(raw[0]["A"], reference[0]["A"])


def test_a_sample_depends_only_on_seed_epoch_and_index(twin_root):
    opts = {"root": str(twin_root), **SIZES, "augment": [*GEOMETRIC, {"name": "color_jitter", "p": 1.0}]}
    first, second = PairedDataset(opts, seed=7), PairedDataset(opts, seed=7)
    torch.manual_seed(123)  # the global RNG does not matter ...
    forward = items(first, 2)
    torch.manual_seed(456)
    backward = [second[(2, i)] for i in reversed(range(len(second)))][::-1]  # ... nor the visiting order
    for a, b in zip(forward, backward):
        assert torch.equal(a["A"], b["A"]) and torch.equal(a["B"], b["B"])
    second.set_epoch(2)
    assert torch.equal(second[1]["A"], forward[1]["A"])
    assert not torch.equal(first[(3, 1)]["A"], forward[1]["A"])  # another epoch, another draw
    assert not torch.equal(PairedDataset(opts, seed=8)[(2, 1)]["A"], forward[1]["A"])  # another seed


def test_augmentations_leave_the_global_rng_alone(twin_root):
    ds = PairedDataset({"root": str(twin_root), **SIZES, "augment": GEOMETRIC})
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    ds[0]
    assert torch.equal(torch.rand(3), expected)


def test_rot90_keeps_the_size_of_non_square_images(tmp_path):
    save_aligned(tmp_path / "train" / "wide.png", noise(8, width=12), noise(8, width=12))
    ds = PairedDataset({"root": str(tmp_path), "load_size": None, "crop_size": None, "num_workers": 0,
                        "augment": [{"name": "rot90", "p": 1.0}]})
    for epoch in range(4):
        assert ds[(epoch, 0)]["A"].shape == (3, 8, 12)


def epoch_batches(loader, epoch, skip=0):
    loader.sampler.set_epoch(epoch)
    loader.sampler.skip(skip)
    return [(b["index"].tolist(), b["A"], b["B"]) for b in loader]


def test_batches_are_independent_of_worker_count_and_resume(tmp_path):
    root = aligned_dataset(tmp_path, {"train": 8}, size=36)
    base = {"root": str(root), **SIZES, "batch_size": 3,
            "augment": [*GEOMETRIC, *({"name": n, "p": 0.5} for n in PHOTOMETRIC)]}
    inline = build_dataloader(PairedDataset({**base, "num_workers": 0}, seed=11))
    workers = build_dataloader(PairedDataset({**base, "num_workers": 2, "persistent_workers": True}, seed=11))
    assert isinstance(workers.sampler, EpochSampler) and workers.persistent_workers
    by_index = []
    for epoch in (0, 1):
        ours, theirs = epoch_batches(inline, epoch), epoch_batches(workers, epoch)
        assert [b[0] for b in ours] == [b[0] for b in theirs]
        for (_, a1, b1), (_, a2, b2) in zip(ours, theirs):
            assert torch.equal(a1, a2) and torch.equal(b1, b2)
        by_index.append({i: a[k] for indices, a, _ in theirs for k, i in enumerate(indices)})
    # the persistent workers saw the new epoch: every sample was drawn afresh
    assert all(not torch.equal(by_index[0][i], by_index[1][i]) for i in range(8))
    orders = [sum((b[0] for b in epoch_batches(inline, e)), []) for e in (0, 1)]
    assert sorted(orders[0]) == list(range(8)) and orders[0] != orders[1]  # shuffled per epoch
    resumed = epoch_batches(inline, 1, skip=3)  # a checkpoint after the first batch of epoch 1
    full = epoch_batches(inline, 1)
    assert [b[0] for b in resumed] == [b[0] for b in full[1:]]
    assert all(torch.equal(r[1], f[1]) for r, f in zip(resumed, full[1:]))


def test_eval_loaders_are_sequential_with_their_own_batch_size(twin_root):
    opts = {"root": str(twin_root), **SIZES, "val": {"folder": "val", "batch_size": 2}, "drop_last": True}
    loader = build_dataloader(PairedDataset(opts, "val"))
    assert [b["index"].tolist() for b in loader] == [[0, 1], [2]]
    batch = next(iter(loader))
    assert batch["A"].shape == (2, 3, 32, 32) and batch["path"] == [str(twin_root / "val" / "000.png"),
                                                                    str(twin_root / "val" / "001.png")]


def test_loader_settings_follow_the_options(twin_root):
    opts = {"root": str(twin_root), **SIZES, "batch_size": 4, "drop_last": True, "shuffle": False, "cache": "off"}
    loader = build_dataloader(PairedDataset(opts))
    assert loader.batch_size == 4 and loader.drop_last and not loader.pin_memory
    assert not loader.persistent_workers and loader.num_workers == 0
    assert [indices for indices, _, _ in epoch_batches(loader, 0)] == [[0, 1, 2, 3]]
    assert build_dataloader(PairedDataset(opts), device="cuda").pin_memory
    assert not build_dataloader(PairedDataset({**opts, "pin_memory": False}), device="cuda").pin_memory
    threaded = build_dataloader(PairedDataset({**opts, "num_workers": 2, "prefetch_factor": 4,
                                               "persistent_workers": False}))
    assert threaded.prefetch_factor == 4 and not threaded.persistent_workers
