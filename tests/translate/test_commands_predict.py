"""``nectargan predict``: any size, any channel count, batched, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from nectargan_core.checkpoint import save_checkpoint
from nectargan_core.errors import NectarGANError
from nectargan_translate.files import output_names
from nectargan_translate.images import Fit
from nectargan_translate.inference import size_multiple
from nectargan_translate.predictor import predict
from support import run_cli

SIZES = {"square.png": (32, 32), "wide.jpg": (40, 36), "sub/grey.png": (40, 36), "sub/grey16.png": (24, 20)}


def pixels(path):
    return np.array(Image.open(path))


@pytest.fixture
def inputs(tmp_path):
    """A folder of mixed sizes (W x H), channels and bit depths, with a sub-folder."""
    root = tmp_path / "inputs"
    (root / "sub").mkdir(parents=True)
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8)).save(root / "square.png")
    Image.fromarray(rng.integers(0, 256, (36, 40, 3), dtype=np.uint8)).save(root / "wide.jpg")
    grey = rng.integers(0, 256, (36, 40), dtype=np.uint8)
    Image.fromarray(grey).save(root / "sub" / "grey.png")
    Image.fromarray(np.stack([grey] * 3, axis=-1)).save(tmp_path / "grey_as_rgb.png")
    small = rng.integers(0, 256, (20, 24), dtype=np.uint8)
    Image.fromarray(small.astype(np.uint16) * 257).save(root / "sub" / "grey16.png")  # 16 bit, same values
    Image.fromarray(small).save(tmp_path / "grey8.png")
    (root / "notes.txt").write_text("not an image")
    return root


def test_mixed_sizes_keep_their_size_and_batching_does_not_change_pixels(trained_run, inputs, tmp_path):
    assert Image.open(inputs / "sub" / "grey16.png").mode in ("I;16", "I")  # a 16-bit grey PNG (Pillow < 10: I)
    result = run_cli("predict", str(trained_run.path), str(inputs), "-o", str(tmp_path / "batch4"), "-r",
                     "--batch-size", "4", "--device", "cpu")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (f"wrote 4 images to {tmp_path / 'batch4'} (epoch0002-step00000020.pt (epoch 2, "
                                     "step 20); reflect-padded to multiples of 16, outputs cropped back) and "
                                     "predict.json")
    single = predict(trained_run.path, [inputs], tmp_path / "batch1", recursive=True)
    assert len(single.written) == 4
    for name, size in SIZES.items():
        output = (tmp_path / "batch1" / name).with_suffix(".png")
        assert Image.open(output).size == size
        assert Image.open(output).mode == "RGB"
        np.testing.assert_array_equal(pixels(output), pixels((tmp_path / "batch4" / name).with_suffix(".png")))


def test_png_compression_changes_file_size_not_pixels(trained_run, inputs, tmp_path):
    for level in (0, 9):
        result = run_cli("predict", str(trained_run.path), str(inputs / "square.png"), "-o", str(tmp_path / f"z{level}"),
                         "--png-compression", str(level), "--device", "cpu")
        assert result.returncode == 0, result.stderr
    default = predict(trained_run.path, [inputs / "square.png"], tmp_path / "z1").written[0]
    stored, smallest = tmp_path / "z0" / "square.png", tmp_path / "z9" / "square.png"
    assert stored.stat().st_size > default.stat().st_size >= smallest.stat().st_size
    assert stored.stat().st_size >= 32 * 32 * 3  # level 0 stores the pixels uncompressed
    for other in (stored, smallest):
        np.testing.assert_array_equal(pixels(other), pixels(default))
    bad = run_cli("predict", str(trained_run.path), str(inputs), "-o", str(tmp_path / "bad"), "--png-compression", "10")
    assert bad.returncode == 2 and "--png-compression" in bad.stderr


def test_grey_and_16_bit_inputs_are_converted_like_their_8_bit_rgb_twins(trained_run, inputs, tmp_path):
    predict(trained_run.path, [inputs / "sub", tmp_path / "grey_as_rgb.png", tmp_path / "grey8.png"],
            tmp_path / "out")
    np.testing.assert_array_equal(pixels(tmp_path / "out" / "grey.png"), pixels(tmp_path / "out" / "grey_as_rgb.png"))
    np.testing.assert_array_equal(pixels(tmp_path / "out" / "grey16.png"), pixels(tmp_path / "out" / "grey8.png"))


def test_a_multiple_sized_image_is_exactly_the_model_output(trained_run, inputs, tmp_path):
    report = predict(trained_run.path, [inputs / "square.png"], tmp_path)
    image = torch.from_numpy(pixels(inputs / "square.png")).permute(2, 0, 1).float() / 255
    with torch.no_grad():
        expected = report.generator.model(image[None] * 2 - 1)[0]
    expected = ((expected + 1) / 2).clamp(0, 1).mul(255).round().to(torch.uint8).permute(1, 2, 0).numpy()
    np.testing.assert_array_equal(pixels(tmp_path / "square.png"), expected)


def test_resize_returns_the_original_size_and_crop_the_crop(trained_run, inputs, tmp_path):
    predict(trained_run.path, [inputs / "wide.jpg"], tmp_path / "resized", fit="resize")
    predict(trained_run.path, [inputs / "wide.jpg"], tmp_path / "cropped", fit="crop")
    predict(trained_run.path, [inputs / "wide.jpg"], tmp_path / "cropped16", fit="crop", size=(16, 32))
    assert Image.open(tmp_path / "resized" / "wide.png").size == (40, 36)
    assert Image.open(tmp_path / "cropped" / "wide.png").size == (32, 32)
    assert Image.open(tmp_path / "cropped16" / "wide.png").size == (32, 16)
    with pytest.raises(NectarGANError, match="multiples of 16"):
        predict(trained_run.path, [inputs / "wide.jpg"], tmp_path / "bad", fit="crop", size=(20, 20))


def test_fit_pads_by_reflection_and_crops_back():
    image = torch.arange(2 * 36 * 40, dtype=torch.float32).reshape(1, 2, 36, 40)
    fit = Fit("pad", 16)
    padded = fit.prepare(image)
    assert padded.shape[-2:] == (48, 48)
    assert torch.equal(padded[..., 6, 4:44], image[..., 0, :]) and torch.equal(padded[..., 5, 4:44], image[..., 1, :])
    assert torch.equal(fit.restore(padded, 36, 40), image)
    tiny = torch.rand(1, 3, 5, 5)
    assert Fit("pad", 16).prepare(tiny).shape[-2:] == (16, 16)  # too small to mirror: edges replicated
    assert Fit("crop", 16).input_shape(36, 40) == (32, 32)
    assert Fit("resize", 16, (32, 64)).restore(torch.rand(1, 3, 32, 64), 36, 40).shape[-2:] == (36, 40)


def test_size_multiple_from_the_model_or_by_trying_never_from_option_names():
    class Declared(torch.nn.Identity):
        size_multiple = 8

    strided = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 4, 2, 1), torch.nn.Conv2d(4, 4, 4, 2, 1),
                                  torch.nn.Conv2d(4, 4, 4, 2, 1))
    assert size_multiple(Declared(), {"depth": 2}, 3) == 8
    assert size_multiple(strided, {"depth": 5}, 3) == 8  # another plugin's "depth" may mean anything
    assert size_multiple(strided, {}, 3) == 8


def test_output_names_keep_extensions_only_to_tell_inputs_apart():
    names = output_names([Path("a.jpg"), Path("a.png"), Path("b.tif"), Path("sub/a.png")])
    assert names == [Path("a_jpg.png"), Path("a_png.png"), Path("b.png"), Path("sub/a.png")]


def test_outputs_that_would_collide_or_overwrite_an_input_are_refused(trained_run, inputs, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    Image.open(inputs / "square.png").save(other / "square.png")
    with pytest.raises(NectarGANError, match="would both be written to"):
        predict(trained_run.path, [inputs, other], tmp_path / "out")
    with pytest.raises(NectarGANError, match="would overwrite its input"):
        predict(trained_run.path, [other], other)


def one_line_error(result, *fragments):
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_missing_input(trained_run, tmp_path):
    missing = tmp_path / "missing.png"
    one_line_error(run_cli("predict", str(trained_run.path), str(missing), "-o", str(tmp_path / "out")),
                   f"{missing}: input not found")


def test_unreadable_image(trained_run, tmp_path):
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n not really")
    one_line_error(run_cli("predict", str(trained_run.path), str(broken), "-o", str(tmp_path / "out")),
                   f"{broken}: cannot read image")
    assert not (tmp_path / "out").exists()


def test_folder_without_images(trained_run, inputs, tmp_path):
    folder = tmp_path / "only_a_subfolder"
    (folder / "sub").mkdir(parents=True)
    (folder / "notes.txt").write_text("")
    one_line_error(run_cli("predict", str(trained_run.path), str(folder), "-o", str(tmp_path / "out")),
                   f"{folder}: no images found", "add --recursive")


def test_not_a_pix2pix_checkpoint(inputs, tmp_path):
    other = save_checkpoint({"trainer": "toy", "epoch": 1, "global_step": 1, "config": {}, "state": {}},
                            tmp_path / "toy.pt")
    one_line_error(run_cli("predict", str(other), str(inputs / "square.png"), "-o", str(tmp_path / "out")),
                   f"{other}: not a checkpoint with a generator: its trainer 'toy' declares none")


def test_output_path_is_a_file(trained_run, inputs, tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("")
    one_line_error(run_cli("predict", str(trained_run.path), str(inputs / "square.png"), "-o", str(taken)),
                   f"{taken}: output path exists and is not a folder")


def test_generators_load_without_initialising_twice_and_keep_unsaved_buffers():
    from nectargan_translate.inference import _with_weights

    calls = []

    class Net(torch.nn.Module):
        def __init__(self, extra: bool) -> None:
            super().__init__()
            calls.append(torch.empty(0).device.type)
            self.conv = torch.nn.Conv2d(2, 3, 3)
            self.norm = torch.nn.BatchNorm2d(3)
            if extra:
                self.register_buffer("scale", torch.full((1,), 2.0), persistent=False)

    source = Net(True)
    torch.nn.init.normal_(source.conv.weight)
    state = source.state_dict()
    for extra, built_on in ((False, ["meta"]), (True, ["meta", "cpu"])):
        calls.clear()
        model = _with_weights(lambda: Net(extra), state)
        assert calls == built_on  # the fallback builds normally when state is missing from the checkpoint
        assert not any(t.is_meta for t in (*model.parameters(), *model.buffers()))
        torch.testing.assert_close(model.conv.weight, state["conv.weight"])
        torch.testing.assert_close(model.norm.running_var, state["norm.running_var"])
    assert float(model.scale) == 2.0
