"""The unpaired dataset: A[i mod |A|] with a random B, reproducible per (seed, epoch, index), resumable mid-epoch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from nectargan_core.errors import ConfigError
from nectargan_translate.data.unpaired import UnpairedDataset, build_unpaired_dataset
from nectargan_translate.data import DatasetError
from nectargan_translate.data.loader import build_dataloader


def unpaired(root: Path, counts: dict[str, tuple[int, int]], size: int = 20) -> Path:
    """root/<split>A and <split>B of noise images; counts: split -> (|A|, |B|). A names a*, B names b*."""
    for split, (a, b) in counts.items():
        for domain, n in (("A", a), ("B", b)):
            folder = root / f"{split}{domain}"
            folder.mkdir(parents=True)
            for i in range(n):
                pixels = np.random.default_rng(hash((split, domain, i)) % 2**32).integers(0, 256, (size, size, 3))
                Image.fromarray(pixels.astype(np.uint8)).save(folder / f"{domain.lower()}{i}.png")
    return root


@pytest.fixture
def root(tmp_path):
    return unpaired(tmp_path / "data", {"train": (3, 5), "val": (2, 1)})


def options(root, **more):
    return {"root": str(root), "load_size": 20, "crop_size": 16, "num_workers": 0, **more}


def names(paths):
    return [Path(p).name for p in paths]


def test_length_is_the_larger_domain_and_a_cycles(root):
    dataset = UnpairedDataset(options(root), "train", seed=1)
    assert len(dataset) == 5
    assert names(dataset.paths["A"]) == ["a0.png", "a1.png", "a2.png"]
    assert [Path(dataset[(0, i)]["A_path"]).name for i in range(5)] == ["a0.png", "a1.png", "a2.png", "a0.png",
                                                                         "a1.png"]
    item = dataset[(0, 4)]
    assert item["A"].shape == item["B"].shape == (3, 16, 16) and item["index"] == 4
    assert -1.0 <= float(item["A"].min()) and float(item["A"].max()) <= 1.0


def test_b_is_drawn_per_seed_epoch_and_index_or_in_order_with_serial(root):
    dataset = UnpairedDataset(options(root), "train", seed=1)
    picks = {epoch: [Path(dataset[(epoch, i)]["B_path"]).name for i in range(5)] for epoch in range(8)}
    for epoch in range(8):  # the same key gives the same item, pixels included
        first, again = dataset[(epoch, 2)], dataset[(epoch, 2)]
        assert first["B_path"] == again["B_path"] and torch.equal(first["B"], again["B"])
        assert torch.equal(first["A"], again["A"])
    assert len({tuple(p) for p in picks.values()}) > 1  # B changes with the epoch
    assert {name for p in picks.values() for name in p} == {f"b{i}.png" for i in range(5)}  # and reaches every B
    other = UnpairedDataset(options(root), "train", seed=2)
    assert [[Path(other[(e, i)]["B_path"]).name for i in range(5)] for e in range(8)] != list(picks.values())
    serial = UnpairedDataset(options(root, serial=True), "train", seed=1)
    for epoch in range(3):
        assert [Path(serial[(epoch, i)]["B_path"]).name for i in range(5)] == [f"b{i}.png" for i in range(5)]


def test_val_pairs_in_order_without_randomness(root):
    dataset = UnpairedDataset(options(root), "val", seed=1)
    assert len(dataset) == 2
    assert [(Path(dataset[i]["A_path"]).name, Path(dataset[i]["B_path"]).name) for i in range(2)] == \
        [("a0.png", "b0.png"), ("a1.png", "b0.png")]
    assert torch.equal(dataset[(0, 1)]["A"], dataset[(7, 1)]["A"])  # no epoch-dependent augmentation
    domain = dataset.domain("A")
    assert len(domain) == 2 and names(domain.paths) == ["a0.png", "a1.png"]
    assert torch.equal(domain[1]["image"], dataset[1]["A"])


def test_batches_are_the_same_with_workers_and_after_a_mid_epoch_resume(root):
    dataset = UnpairedDataset(options(root, batch_size=2), "train", seed=3)

    def epoch_batches(loader, epoch, skip=0):
        loader.sampler.set_epoch(epoch)
        if skip:
            loader.sampler.skip(skip * loader.batch_size)
        return [(batch["A_path"], batch["B_path"], batch["A"], batch["B"]) for batch in loader]

    straight = epoch_batches(build_dataloader(dataset), 1)
    assert len(straight) == 3
    resumed = epoch_batches(build_dataloader(dataset), 1, skip=1)  # the engine skips the batches done
    assert len(resumed) == 2
    for a, b in zip(straight[1:], resumed, strict=True):
        assert a[0] == b[0] and a[1] == b[1]
        assert torch.equal(a[2], b[2]) and torch.equal(a[3], b[3])
    workers = UnpairedDataset(options(root, batch_size=2, num_workers=2, persistent_workers=False), "train", seed=3)
    for a, b in zip(straight, epoch_batches(build_dataloader(workers), 1), strict=True):
        assert a[1] == b[1] and torch.equal(a[3], b[3])
    assert [batch[1] for batch in epoch_batches(build_dataloader(dataset), 2)] != [batch[1] for batch in straight]


def test_direction_swaps_the_domains_and_channels_follow_each_domain(root):
    swapped = UnpairedDataset(options(root, direction="BtoA"), "train", seed=0)
    assert names(swapped.paths["A"]) == [f"b{i}.png" for i in range(5)]
    assert names(swapped.paths["B"]) == [f"a{i}.png" for i in range(3)]
    # a photometric augmentation that makes colour images grey keeps a 1-channel domain at 1 channel
    grey_b = UnpairedDataset(options(root, out_channels=1, augment=[{"name": "grayscale", "p": 1.0}]), "train")
    item = grey_b[(0, 0)]
    assert item["A"].shape == (3, 16, 16) and item["B"].shape == (1, 16, 16)
    assert torch.equal(item["A"][0], item["A"][1])  # A turned grey, kept 3 channels


def test_missing_domains_and_bad_options_are_one_line(root, tmp_path):
    only_a = unpaired(tmp_path / "only_a", {"train": (1, 1), "test": (2, 0)})
    with pytest.raises(DatasetError, match=r"only_a/testB: no images \(looked for .bmp, "):
        UnpairedDataset(options(only_a), "test")
    (only_a / "testB").rmdir()
    with pytest.raises(DatasetError, match=r"only_a/testB: folder does not exist; the unpaired layout needs testA/ "
                                           r"and testB/ side by side \(found testA/\)$"):
        UnpairedDataset(options(only_a), "test")
    with pytest.raises(DatasetError, match="data.root is not set"):
        build_unpaired_dataset("train")
    with pytest.raises(ConfigError, match="data.serial"):
        UnpairedDataset(options(root, serial="sometimes"), "train")
    limited = UnpairedDataset(options(root, max_images=2), "train")
    assert names(limited.paths["B"]) == ["b0.png", "b1.png"] and len(limited) == 2
