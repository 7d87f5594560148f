"""data.cache: the decoded-once training split gives the worker path's batches, bit for bit."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from nectargan_core import Run, load_checkpoint
from nectargan_core.errors import ConfigError
from nectargan_translate.data import DatasetError, PairedDataset, build_dataloader
from nectargan_translate.data.cache import (DEVICE_SHARE, HOST_SHARE, CacheChoice, CachedLoader, PairedCache,
                                            cache_summary, choose_cache, estimate_bytes, unit_table)
from nectargan_translate.data.unpaired_options import parse_unpaired
from data_helpers import aligned_dataset, folders_dataset, noise, save, save_png16_rgb

FLIPS = [{"name": "hflip", "p": 0.5}, {"name": "vflip", "p": 0.5}, {"name": "rot90", "p": 0.5}]

#: Every way the training split is sized: (options, layout). Images are 40x40 (aligned: per side).
MODES = {
    "resize then crop": ({"load_size": 48, "crop_size": 32}, "aligned"),
    "resize through uint8": ({"load_size": 48, "crop_size": 32, "resize_rounding": "uint8"}, "aligned"),
    "crop only": ({"load_size": None, "crop_size": 32}, "aligned"),
    "resize only": ({"load_size": 36, "crop_size": None, "interpolation": "bilinear"}, "aligned"),
    "original sizes": ({"load_size": None, "crop_size": None}, "aligned"),
    "grey target, no resize": ({"load_size": None, "crop_size": 32, "out_channels": 1}, "aligned"),  # uint8 A
    "grey input, BtoA": ({"load_size": 48, "crop_size": 40, "in_channels": 1, "direction": "BtoA"}, "aligned"),
    "folders, nearest": ({"load_size": 44, "crop_size": 32, "interpolation": "nearest", "out_channels": 4},
                         "folders"),
}


def dataset_for(tmp_path, layout):
    if layout == "aligned":
        return aligned_dataset(tmp_path, {"train": 8}, size=40)
    return folders_dataset(tmp_path, {"train": 8}, size=40)


def loaders(root, seed=7, **options):
    base = {"root": str(root), "batch_size": 3, "num_workers": 0, "augment": FLIPS, **options}
    off = build_dataloader(PairedDataset({**base, "cache": "off"}, seed=seed))
    cached = build_dataloader(PairedDataset({**base, "cache": "memory"}, seed=seed))
    assert isinstance(cached, CachedLoader) and not isinstance(off, CachedLoader)
    return off, cached


def epoch(loader, number, skip=0):
    loader.sampler.set_epoch(number)
    loader.sampler.skip(skip)
    return list(loader)


def assert_same_batches(ours, theirs):
    assert len(ours) == len(theirs) > 0
    for mine, want in zip(ours, theirs):
        assert mine.keys() == want.keys() == {"A", "B", "path", "index"}
        assert mine["A"].dtype == want["A"].dtype == torch.float32
        assert torch.equal(mine["A"], want["A"]) and torch.equal(mine["B"], want["B"])
        assert mine["path"] == want["path"]
        assert mine["index"].dtype == want["index"].dtype and torch.equal(mine["index"], want["index"])


@pytest.mark.parametrize("mode", list(MODES))
def test_cached_batches_equal_the_workers_batches_over_epochs_and_a_resume(tmp_path, mode):
    options, layout = MODES[mode]
    off, cached = loaders(dataset_for(tmp_path, layout), **options)
    assert len(cached) == len(off) == 3
    firsts = []
    for number in (0, 1):
        theirs = epoch(off, number)
        assert_same_batches(epoch(cached, number), theirs)
        firsts.append(theirs[0]["A"])
    assert not torch.equal(firsts[0], firsts[1])  # the epochs drew afresh: the comparison is not of constants
    # a mid-epoch resume: the engine skips the samples of the batches done
    assert_same_batches(epoch(cached, 1, skip=3), epoch(off, 1, skip=3))


def test_non_square_images_keep_their_size_and_rot90_turns_them_half(tmp_path):
    for i in range(5):
        save(tmp_path / "train" / "A" / f"{i}.png", noise(12, seed=i, width=20))
        save(tmp_path / "train" / "B" / f"{i}.png", noise(12, seed=i + 50, width=20))
    off, cached = loaders(tmp_path, load_size=None, crop_size=None, batch_size=2,
                          augment=[{"name": "rot90", "p": 0.9}, {"name": "hflip", "p": 0.5}])
    ours = epoch(cached, 0)
    assert ours[0]["A"].shape == (2, 3, 12, 20)
    assert_same_batches(ours, epoch(off, 0))


def test_drop_last_length_and_shards_follow_the_dataloader(tmp_path):
    root = aligned_dataset(tmp_path, {"train": 8}, size=40)
    off, cached = loaders(root, load_size=40, crop_size=32, drop_last=True)
    assert (cached.batch_size, cached.drop_last, len(cached)) == (3, True, len(off)) == (3, True, 2)
    assert [len(b["path"]) for b in epoch(cached, 0)] == [3, 3]
    off.sampler.skip(3)
    cached.sampler.skip(3)
    assert len(cached) == len(off) == 1
    for loader in (off, cached):
        loader.sampler.shard(2, 1)
    assert_same_batches(epoch(cached, 2), epoch(off, 2))
    assert len(cached) == len(off) == 1  # 4 samples of this rank, batches of 3, the last dropped


def test_the_split_is_kept_as_uint8_where_that_is_exact_and_the_estimate_is_what_it_takes(tmp_path):
    root = aligned_dataset(tmp_path / "8", {"train": 4}, size=40)
    deep = tmp_path / "16"
    for i in range(4):
        save_png16_rgb(deep / "train" / f"{i}.png", np.random.default_rng(i).integers(0, 65536, (40, 80, 3)))
    expected = {  # (dtype, bytes): 4 pairs of two 3-channel images
        "uint8": ({"load_size": 48, "resize_rounding": "uint8"}, torch.uint8, 4 * 2 * 3 * 48 * 48),
        "float": ({"load_size": 48}, torch.float32, 4 * 2 * 3 * 48 * 48 * 4),
        "files": ({"load_size": None, "crop_size": None}, torch.uint8, 4 * 2 * 3 * 40 * 40),
        "luma": ({"load_size": None, "crop_size": None, "out_channels": 1}, torch.float32, 4 * (3 + 1) * 40 * 40 * 4),
        "16-bit": ({"load_size": None, "crop_size": None, "root": str(deep)}, torch.float32, 4 * 2 * 3 * 40 * 40 * 4),
    }
    for options, dtype, size in expected.values():
        dataset = PairedDataset({"root": str(root), "crop_size": None, "num_workers": 0, "cache": "memory",
                                 **options})
        loader = build_dataloader(dataset)
        assert (loader.cache.dtype, loader.cache.nbytes, estimate_bytes(dataset)) == (dtype, size, size)


def test_the_normalising_table_is_the_worker_paths_arithmetic():
    """CUDA normalises uint8 through this table: it must hold what to_unit and normalise compute."""
    from nectargan_translate.data.augment import normalise
    from nectargan_translate.data.decode import to_unit

    values = torch.arange(256, dtype=torch.uint8)
    assert torch.equal(unit_table(), to_unit(values))
    assert torch.equal(unit_table().clamp(0, 1).mul(2).sub(1), normalise(to_unit(values).clamp(0, 1)))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_batches_equal_the_workers_batches(tmp_path):
    root = aligned_dataset(tmp_path, {"train": 8}, size=40)
    for options in ({"load_size": 48, "crop_size": 32}, {"load_size": 48, "crop_size": 32, "resize_rounding": "uint8"}):
        base = {"root": str(root), "batch_size": 3, "num_workers": 0, "augment": FLIPS, **options}
        off = build_dataloader(PairedDataset({**base, "cache": "off"}, seed=3), device="cuda")
        for cache in ("memory", "device"):
            cached = build_dataloader(PairedDataset({**base, "cache": cache}, seed=3), device="cuda")
            assert cached.cache.mode == cache
            for number in (0, 1):
                ours, theirs = epoch(cached, number), epoch(off, number)
                assert all(b["A"].device.type == "cuda" for b in ours)
                assert_same_batches([{**b, "A": b["A"].cpu(), "B": b["B"].cpu()} for b in ours], theirs)


# -- the choice ---------------------------------------------------------------------------
GIB = 1 << 30


@pytest.mark.parametrize("need, cuda, device, host, mode", [
    (DEVICE_SHARE * 8 * GIB, True, 8 * GIB, 64 * GIB, "device"),  # at the bound of the GPU's share
    (DEVICE_SHARE * 8 * GIB + 1, True, 8 * GIB, 64 * GIB, "memory"),  # just over it: host memory
    (HOST_SHARE * 8 * GIB, False, None, 8 * GIB, "memory"),  # a CPU run: host memory, at its bound
    (HOST_SHARE * 8 * GIB + 1, False, None, 8 * GIB, "off"),
    (3 * GIB, True, 8 * GIB, 4 * GIB, "off"),  # fits neither share
    (1, False, None, None, "off"),  # host memory of unknown size
])
def test_auto_keeps_the_cache_where_it_fits_comfortably(need, cuda, device, host, mode):
    choice = choose_cache("auto", int(need), cuda=cuda, free_device=device, free_host=host)
    assert choice.mode == mode
    assert (choice.reason is None) == (mode != "off")


def test_an_explicit_cache_that_does_not_fit_is_one_line_naming_the_option_and_sizes():
    with pytest.raises(DatasetError) as error:
        choose_cache("memory", 3 * GIB, cuda=False, free_device=None, free_host=2 * GIB)
    assert str(error.value).startswith("data.cache: memory needs 3,072 MiB for the decoded training split but "
                                       "there is 2,048 MiB of available host memory; ")
    with pytest.raises(DatasetError, match=r"^data.cache: device needs 3,072 MiB .* 1,024 MiB of free GPU memory"):
        choose_cache("device", 3 * GIB, cuda=True, free_device=GIB, free_host=64 * GIB)
    # an explicit choice that fits is kept even beyond auto's shares; device means memory on a CPU run
    assert choose_cache("device", 3 * GIB, cuda=True, free_device=4 * GIB, free_host=None) == CacheChoice("device")
    assert choose_cache("device", GIB, cuda=False, free_device=None, free_host=2 * GIB) == CacheChoice("memory")
    assert choose_cache("off", 1, cuda=True, free_device=GIB, free_host=GIB) == CacheChoice("off")
    assert choose_cache("auto", 1, cuda=True, free_device=GIB, free_host=GIB,
                        unsupported="augment.1 (affine)").mode == "off"


def test_every_process_of_a_run_on_a_host_holds_its_own_copy():
    """Each rank caches the whole split (its share changes every epoch): host memory is judged for all."""
    assert choose_cache("auto", GIB, cuda=False, free_device=None, free_host=4 * GIB, host_copies=2).mode == "memory"
    assert choose_cache("auto", GIB, cuda=False, free_device=None, free_host=4 * GIB, host_copies=3) == CacheChoice(
        "off", "the decoded split (1,024 MiB) is more than 50% of available host memory (4,096 MiB, for 3 processes)")
    with pytest.raises(DatasetError, match=r"^data.cache: memory needs 4,096 MiB \(2 processes x 2,048 MiB\) for"):
        choose_cache("memory", 2 * GIB, cuda=False, free_device=None, free_host=3 * GIB, host_copies=2)
    # one GPU per process: device memory is not shared
    choice = choose_cache("device", 2 * GIB, cuda=True, free_device=3 * GIB, free_host=GIB, host_copies=2)
    assert choice.mode == "device"


def test_auto_falls_back_to_the_workers_with_one_line_saying_why(tmp_path, capsys, monkeypatch):
    root = aligned_dataset(tmp_path, {"train": 4}, size=40)
    base = {"root": str(root), "load_size": 40, "crop_size": 32, "num_workers": 0}
    loader = build_dataloader(PairedDataset({**base, "augment": ["hflip", "affine"]}))
    assert not isinstance(loader, CachedLoader)
    assert capsys.readouterr().err == ("data cache: off, training data is decoded by the loader every epoch: "
                                       "augment.1 (affine) is applied per sample, in the workers\n")
    assert cache_summary(loader) == "off (augment.1 (affine) is applied per sample, in the workers)"
    monkeypatch.setattr("nectargan_translate.data.cache.available_host_memory", lambda: 200_000)
    loader = build_dataloader(PairedDataset(base))
    assert not isinstance(loader, CachedLoader)
    assert capsys.readouterr().err == ("data cache: off, training data is decoded by the loader every epoch: the "
                                       "decoded split (150 KiB) is more than 50% of available host memory (195 KiB)\n")
    monkeypatch.setenv("RANK", "1")  # the other processes of a run decide alike and say nothing
    build_dataloader(PairedDataset(base))
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("RANK", "0")
    build_dataloader(PairedDataset({**base, "num_workers": 2}))
    assert "decoded in the loader's workers every epoch" in capsys.readouterr().err
    monkeypatch.undo()
    cached = build_dataloader(PairedDataset(base))  # auto on a CPU run, room enough: memory
    # (estimated as float32, but resizing 40 to 40 changes nothing: exact 8-bit values, kept as uint8)
    assert cache_summary(cached) == "memory, 38 KiB, 4 pairs" and capsys.readouterr().err == ""
    assert cache_summary(build_dataloader(PairedDataset({**base, "cache": "off"}))) == "off"


def test_an_explicit_cache_refuses_augmentations_it_cannot_apply():
    with pytest.raises(ConfigError, match=r"^data.cache: memory applies only crops and hflip, rot90, vflip to "
                                          r"batches, not augment.1 \(color_jitter\); set data.cache: off"):
        PairedDataset({"root": "x", "cache": "memory", "augment": ["hflip", "color_jitter"]})
    with pytest.raises(ConfigError, match=r"^data.cache: device applies only .* not augment.0 \(blur\)"):
        parse_unpaired({"cache": "device", "augment": ["blur"]})
    assert parse_unpaired({"cache": "memory"}).cache == "memory"


# -- unpaired data ------------------------------------------------------------------------
def unpaired_root(tmp_path):
    """5 A images of 40x40 and 7 B images of 36x48 (so B is drawn from, and rot90 meets both shapes)."""
    for i in range(5):
        save(tmp_path / "trainA" / f"{i}.png", noise(40, seed=i))
    for i in range(7):
        save(tmp_path / "trainB" / f"{i}.jpg", noise(36, seed=i + 70, width=48))
    return tmp_path


@pytest.mark.parametrize("options", [
    {"load_size": None, "crop_size": 32},
    {"load_size": None, "crop_size": None, "batch_size": 1, "serial": True},
    {"load_size": 44, "crop_size": 40, "resize_rounding": "uint8", "out_channels": 1},
], ids=["crop", "original sizes, serial", "resize, grey B"])
def test_unpaired_cached_batches_equal_the_workers_batches(tmp_path, options):
    from nectargan_translate.data.unpaired import UnpairedDataset

    base = {"root": str(unpaired_root(tmp_path)), "batch_size": 3, "num_workers": 0, "augment": FLIPS, **options}
    off = build_dataloader(UnpairedDataset({**base, "cache": "off"}, seed=4))
    cached = build_dataloader(UnpairedDataset({**base, "cache": "memory"}, seed=4))
    assert isinstance(cached, CachedLoader) and len(cached) == len(off)
    assert cache_summary(cached).endswith(", 5 A + 7 B images")
    for number, skip in ((0, 0), (1, 0), (1, base["batch_size"])):
        ours, theirs = epoch(cached, number, skip), epoch(off, number, skip)
        assert len(ours) == len(theirs) > 0
        for mine, want in zip(ours, theirs):
            assert mine.keys() == want.keys() == {"A", "B", "A_path", "B_path", "index"}
            assert torch.equal(mine["A"], want["A"]) and torch.equal(mine["B"], want["B"])
            assert (mine["A_path"], mine["B_path"]) == (want["A_path"], want["B_path"])
            assert torch.equal(mine["index"], want["index"])
    drawn = {path for batch in epoch(off, 0) for path in batch["B_path"]}
    assert len(drawn) > 1  # B images were drawn (or taken in turn), not one repeated


def test_images_of_different_sizes_in_a_batch_are_the_workers_one_line(tmp_path):
    save(tmp_path / "train" / "A" / "0.png", noise(16))
    save(tmp_path / "train" / "B" / "0.png", noise(16))
    save(tmp_path / "train" / "A" / "1.png", noise(20))
    save(tmp_path / "train" / "B" / "1.png", noise(20))
    options = {"root": str(tmp_path), "load_size": None, "crop_size": None, "batch_size": 2, "verify": "none",
               "shuffle": False, "num_workers": 0, "augment": []}
    messages = []
    for cache in ("off", "memory"):
        with pytest.raises(DatasetError) as error:
            next(iter(build_dataloader(PairedDataset({**options, "cache": cache}))))
        messages.append(str(error.value))
    assert messages[0] == messages[1]
    assert messages[1].startswith(f"{tmp_path / 'train' / 'A' / '1.png'} gives A of shape (3, 20, 20) but ")


def test_a_damaged_image_stops_the_cache_with_one_line_naming_it(tmp_path):
    root = aligned_dataset(tmp_path, {"train": 4}, size=40)
    broken = root / "train" / "002.png"
    broken.write_bytes(broken.read_bytes()[:200])
    dataset = PairedDataset({"root": str(root), "verify": "none", "num_workers": 2, "cache": "memory"})
    with pytest.raises(DatasetError) as error:
        build_dataloader(dataset)
    assert str(error.value).startswith(f"{broken}: ") and "\n" not in str(error.value)


# -- training ---------------------------------------------------------------------------
def run_config(tmp_path, root, cache, **loop):
    return {
        "trainer": "pix2pix",
        "run": {"output_dir": str(tmp_path / cache / "runs"), "device": "cpu", "seed": 3, "deterministic": True},
        "loop": {"epochs": 2, "log_every_steps": 1, **loop},
        "checkpoint": {"every_steps": 2},
        "data": {"root": str(root), "load_size": 36, "crop_size": 32, "num_workers": 0, "batch_size": 3,
                 "augment": FLIPS, "cache": cache},
        "models": {"generator": {"name": "unet", "depth": 5, "ngf": 8},
                   "discriminator": {"name": "patchgan", "ndf": 8, "n_layers": 2}},
        "optim": {"implementation": "single"},
        "examples": {"every_epochs": None},
        "visualizers": [],
    }


def weights(run):
    return load_checkpoint(run.trainer.last_checkpoint)["state"]["generator"]


@pytest.mark.slow  # three short CPU runs, about 20 s on 2 cores
def test_training_from_the_cache_gives_the_same_weights_also_after_a_mid_epoch_resume(tmp_path, make_synth):
    root = make_synth(16, 32)
    off = Run.create(run_config(tmp_path, root, "off")).fit()
    cached = Run.create(run_config(tmp_path, root, "memory")).fit()
    rows = dict(json.loads((cached.dir / "summary.json").read_text())["rows"])
    assert rows["data cache"].startswith("memory, ") and rows["data cache"].endswith(", 12 pairs")
    assert dict(json.loads((off.dir / "summary.json").read_text())["rows"])["data cache"] == "off"
    a, b = weights(off), weights(cached)
    assert all(torch.equal(a[k], b[k]) for k in a)
    first = Run.create(run_config(tmp_path / "resumed", root, "memory", max_steps=6)).fit()  # 4 batches an epoch
    resumed = Run.resume(first.dir, overrides=["loop.max_steps=null"]).fit()
    c = weights(resumed)
    assert resumed.trainer.global_step == 8 and all(torch.equal(a[k], c[k]) for k in a)


def test_a_stop_signal_while_the_split_is_decoded_ends_it_at_once(tmp_path, monkeypatch):
    """Before the first step there is no step to finish: Ctrl-C or SIGTERM stop the decoding at once."""
    root = aligned_dataset(tmp_path, {"train": 6}, size=40)
    decoded = []
    monkeypatch.setattr("nectargan_translate.data.cache.stop_signalled", lambda: len(decoded) >= 1)
    real = PairedCache._decode_stored

    def counting(self, index):
        decoded.append(index)
        return real(self, index)

    monkeypatch.setattr(PairedCache, "_decode_stored", counting)
    with pytest.raises(KeyboardInterrupt):
        build_dataloader(PairedDataset({"root": str(root), "load_size": 40, "crop_size": 32, "num_workers": 0,
                                        "cache": "memory"}))
    assert len(decoded) < 6


def test_what_the_cache_cannot_do_is_refused_before_the_run_directory(tmp_path, monkeypatch):
    root = aligned_dataset(tmp_path, {"train": 4, "val": 1}, size=40)
    monkeypatch.setattr("nectargan_translate.data.cache.available_host_memory", lambda: 50_000)
    config = run_config(tmp_path, root, "memory")
    with pytest.raises(DatasetError, match=r"^data.cache: memory needs [0-9.,]+ KiB for the decoded training split "
                                           r"but there is 49 KiB of available host memory; "):
        Run.create(config)
    config = run_config(tmp_path, root, "device")
    with pytest.raises(DatasetError, match=r"^data.cache: device \(host memory on a run without CUDA\) needs "):
        Run.create(config)
    monkeypatch.undo()
    config = run_config(tmp_path, root, "off")
    config["data"].update(batch_size=5, drop_last=True)
    with pytest.raises(ConfigError, match=r"^data.batch_size: 5 is more than the 4 training pairs of .* and "
                                          r"data.drop_last is true, so an epoch would have no batch; "):
        Run.create(config)
    assert not any((tmp_path / cache / "runs").exists() for cache in ("memory", "device", "off"))
