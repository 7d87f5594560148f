"""``nectargan models import`` and ``predict``/``test --arch``: reference files in, same images out.

The reference state dicts are saved by the oracle (reference_networks.py) with
``torch.save(net.state_dict())``, as the reference does; the outputs are
compared with the oracle's on the same input.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from nectargan_core import Run, load_checkpoint
from nectargan_core.checkpoint import save_checkpoint, sha256_of
from nectargan_core.errors import CheckpointError, ConfigError, NectarGANError
from nectargan_core.init_from import InitFromError
from nectargan_models.cli import models_group
from nectargan_models.importing import import_reference, read_state_dict
from nectargan_models.reference import from_reference
from nectargan_translate.data.augment import normalise
from nectargan_translate.data.errors import DatasetError
from nectargan_translate.data.decode import read_image
from nectargan_translate.evaluation import to_unit
from nectargan_translate.export import export_generator
from nectargan_translate.images import to_uint8
from nectargan_translate.inference import load_generator
from nectargan_translate.predictor import predict
from nectargan_translate.tester import run_test
from reference_networks import UnetGenerator, define_D, define_G, get_norm_layer
from support import cli_runner, run_cli
from test_reference_mapping import randomised

#: A reference UnetGenerator with 5 levels and ngf 4: our ``unet`` with these options.
SMALL_UNET = ("--arch", "unet", "--set", "depth=5", "--set", "ngf=4", "--set", "max_width=32")


def small_reference_unet() -> torch.nn.Module:
    torch.manual_seed(0)
    return randomised(UnetGenerator(3, 3, 5, 4, get_norm_layer("batch"), use_dropout=False)).eval()


def invoke(*args: str):
    """``nectargan models ARGS`` in-process; a user error stays in ``result.exception`` (the console
    script turns it into one ``error:`` line with its exit code, checked through run_cli below)."""
    result = cli_runner().invoke(models_group, list(args))
    if result.exception is not None and not isinstance(result.exception, (SystemExit, NectarGANError)):
        raise result.exception
    return result


def user_error(result, kind: type[NectarGANError], message: str) -> None:
    assert isinstance(result.exception, kind), result.output
    assert message in str(result.exception) and "\n" not in str(result.exception)


def oracle_png(reference: torch.nn.Module, image_path: Path) -> np.ndarray:
    """The reference network's output for an image file, as predict writes it (8-bit, rounded)."""
    with torch.no_grad():
        output = reference(normalise(read_image(image_path)[None]))
    return to_uint8(to_unit(output[0])).permute(1, 2, 0).numpy()


def random_png(path: Path, height: int, width: int, seed: int = 0) -> Path:
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)
    return path


@pytest.fixture
def small_file(tmp_path) -> tuple[torch.nn.Module, Path]:
    reference = small_reference_unet()
    path = tmp_path / "latest_net_G.pth"
    torch.save(reference.state_dict(), path)
    return reference, path


@pytest.mark.slow  # three console-script subprocesses
def test_import_then_predict_through_the_cli_gives_the_reference_images(tmp_path):
    torch.manual_seed(0)
    reference = randomised(define_G(3, 3, 8, "unet_256", norm="batch", use_dropout=True)).eval()
    source = tmp_path / "latest_net_G.pth"
    torch.save(reference.state_dict(), source)
    image = random_png(tmp_path / "photo.png", 256, 256)

    imported = run_cli("models", "import", str(source), "--arch", "unet_256", "--set", "ngf=8",
                       "--set", "max_width=64", "-o", str(tmp_path / "facades.pt"))
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.splitlines() == [
        f"imported {source} as unet_256 (depth=8, norm=batch, ngf=8): 82 tensors, 852,307 parameters",
        f"wrote {tmp_path / 'facades.pt'} (generator); use it with nectargan predict, test, export or "
        "train --init-from --init-from-partial (it holds no discriminator)"]

    predicted = run_cli("predict", str(tmp_path / "facades.pt"), str(image), "-o", str(tmp_path / "out"))
    assert predicted.returncode == 0, predicted.stderr
    expected = oracle_png(reference, image)
    assert np.array_equal(np.asarray(Image.open(tmp_path / "out" / "photo.png")), expected)

    direct = run_cli("predict", str(source), str(image), "-o", str(tmp_path / "direct"), "--arch", "unet_256",
                     "--set", "ngf=8", "--set", "max_width=64")
    assert direct.returncode == 0, direct.stderr
    assert np.array_equal(np.asarray(Image.open(tmp_path / "direct" / "photo.png")), expected)


def test_imported_checkpoint_holds_the_architecture_and_the_reference_outputs(small_file, tmp_path):
    reference, source = small_file
    result = invoke("import", str(source), *SMALL_UNET, "-o", str(tmp_path / "g.pt"))
    assert result.exit_code == 0, result.output
    checkpoint = load_checkpoint(tmp_path / "g.pt")  # verified against its checksum sidecar
    assert checkpoint["trainer"] == "pix2pix" and set(checkpoint["state"]) == {"generator"}
    generator = checkpoint["config"]["models"]["generator"]
    assert (generator["name"], generator["depth"], generator["ngf"], generator["norm"]) == ("unet", 5, 4, "batch")
    record = checkpoint["imported"]["generator"]
    assert (record["arch"], record["tensors"], record["source"]) == ("unet", 46, str(source.resolve()))
    assert record["sha256"] == sha256_of(source)

    loaded = load_generator(tmp_path / "g.pt")
    x = torch.randn(2, 3, 64, 96)
    with torch.no_grad():
        assert torch.equal(loaded.model(x), reference(x))
    assert loaded.size_multiple == 32 and not loaded.model.training


@pytest.mark.slow  # test runs twice over a 256x256 split
def test_predict_and_test_take_the_reference_file_with_arch(small_file, tmp_path):
    reference, source = small_file
    image = random_png(tmp_path / "a.png", 40, 70)  # padded to 64x96 by predict, cropped back
    report = predict(source, [image], tmp_path / "out", arch="unet", arch_options=("depth=5", "ngf=4",
                                                                                    "max_width=32"))
    assert report.written == [tmp_path / "out" / "a.png"] and report.generator.epoch == 0
    invoke("import", str(source), *SMALL_UNET, "-o", str(tmp_path / "g.pt"))
    predict(tmp_path / "g.pt", [image], tmp_path / "out2")
    assert np.array_equal(np.asarray(Image.open(tmp_path / "out" / "a.png")),
                          np.asarray(Image.open(tmp_path / "out2" / "a.png")))

    from nectargan_translate.data_cli import data_group

    data = tmp_path / "data"
    made = cli_runner().invoke(data_group, ["synth", str(data), "--count", "6", "--size", "32", "--test", "0.5"])
    assert made.exit_code == 0, made.output
    direct = run_test(source, data_root=data, out_dir=tmp_path / "t1", arch="unet",
                      arch_options=("depth=5", "ngf=4", "max_width=32"))
    converted = run_test(tmp_path / "g.pt", data_root=data, out_dir=tmp_path / "t2")
    assert direct.mean == converted.mean and len(direct.names) == 3
    assert json.loads((tmp_path / "t1" / "metrics.json").read_text())["images"] == 3
    with pytest.raises(DatasetError, match="its config names no dataset folder \\(data.root\\), as for imported "
                                        "weights; pass --data-root DIR"):
        run_test(tmp_path / "g.pt", out_dir=tmp_path / "t3")


@pytest.mark.filterwarnings("ignore:`torch.jit.load` is deprecated:FutureWarning")  # our own check below
def test_export_of_an_imported_generator_reproduces_the_reference(small_file, tmp_path):
    reference, source = small_file
    invoke("import", str(source), *SMALL_UNET, "-o", str(tmp_path / "g.pt"))
    report = export_generator(tmp_path / "g.pt", fmt="torchscript", output=tmp_path / "g.ts", size=(64, 64))
    assert report.parity.passed
    traced = torch.jit.load(str(tmp_path / "g.ts"))
    x = torch.rand(2, 3, 64, 64) * 2 - 1
    with torch.no_grad():
        assert float((traced(x) - reference(x)).abs().max()) <= 1e-6
    assert json.loads((tmp_path / "g.ts.json").read_text())["generator"]["name"] == "unet"


def test_init_from_an_imported_generator_starts_from_the_reference_weights(small_file, tmp_path, capsys):
    _, source = small_file
    invoke("import", str(source), *SMALL_UNET, "-o", str(tmp_path / "g.pt"))
    imported = load_checkpoint(tmp_path / "g.pt")
    config = {**imported["config"]}
    config["run"] = {**config["run"], "init_from": str(tmp_path / "g.pt"), "output_dir": str(tmp_path / "runs"),
                     "device": "cpu"}
    from nectargan_translate.data_cli import data_group

    made = cli_runner().invoke(data_group, ["synth", str(tmp_path / "data"), "--count", "8", "--size", "32",
                                           "--val", "0.25", "--test", "0.25"])
    assert made.exit_code == 0, made.output
    config["data"] = {**config["data"], "root": str(tmp_path / "data")}
    config["visualizers"] = {}
    # the file holds no discriminator: starting it from its initialisation must be asked for
    with pytest.raises(InitFromError, match=r"'discriminator' matched 0/\d+ tensors: not in the checkpoint"):
        Run.create(config)
    config["run"]["init_from_strict"] = False
    capsys.readouterr()
    run = Run.create(config)
    report = run.init_report
    assert len(report["generator"]["loaded"]) == 46 and not report["generator"]["missing"]
    assert report["discriminator"]["loaded"] == []
    for key, tensor in imported["state"]["generator"].items():
        assert torch.equal(run.trainer.generator.state_dict()[key], tensor), key
    err = capsys.readouterr().err
    assert f"init_from: 'generator' loaded 46/46 tensors from {tmp_path / 'g.pt'}\n" in err
    assert f"init_from: {tmp_path / 'g.pt'} has no weights for 'discriminator'; all " in err


def test_discriminator_import(tmp_path):
    torch.manual_seed(0)
    reference = randomised(define_D(3, 8, "basic", norm="instance")).eval()
    torch.save(reference.state_dict(), tmp_path / "latest_net_D_A.pth")
    result = invoke("import", str(tmp_path / "latest_net_D_A.pth"), "--arch", "basic", "--set", "norm=instance",
                    "--set", "ndf=8", "--set", "conditional=false", "-o", str(tmp_path / "d.pt"))
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output
    assert ("(discriminator); use it with nectargan train --init-from --init-from-partial (it holds no generator)"
            in result.output)
    checkpoint = load_checkpoint(tmp_path / "d.pt")
    assert set(checkpoint["state"]) == {"discriminator"}
    assert checkpoint["config"]["models"]["discriminator"]["conditional"] is False
    from nectargan_models.patchgan import build_patchgan

    ours = build_patchgan(ndf=8, norm="instance", conditional=False)
    ours.load_state_dict(checkpoint["state"]["discriminator"])
    x = torch.randn(1, 3, 70, 70)
    with torch.no_grad():
        assert torch.equal(ours(x), reference(x))
    with pytest.raises(CheckpointError, match="not a pix2pix checkpoint with a generator \\(trainer 'pix2pix', "
                                              "networks: discriminator\\)"):
        load_generator(tmp_path / "d.pt")


def test_a_discriminator_joins_its_generator_with_into(small_file, tmp_path, capsys):
    reference_g, source = small_file
    torch.manual_seed(1)
    reference_d = randomised(define_D(6, 8, "basic", norm="batch"))
    torch.save(reference_d.state_dict(), tmp_path / "latest_net_D.pth")
    out = tmp_path / "g.pt"
    assert invoke("import", str(source), *SMALL_UNET, "-o", str(out)).exit_code == 0
    joined = invoke("import", str(tmp_path / "latest_net_D.pth"), "--arch", "basic", "--set", "ndf=8",
                    "--into", str(out))
    assert joined.exit_code == 0, joined.output
    assert joined.output.splitlines()[-1] == (f"wrote {out} (generator and discriminator); use it with nectargan "
                                              "predict, test, export or train --init-from")
    checkpoint = load_checkpoint(out)
    assert list(checkpoint["state"]) == ["generator", "discriminator"] == list(checkpoint["imported"])
    assert checkpoint["config"]["models"]["generator"]["depth"] == 5
    assert checkpoint["config"]["models"]["discriminator"]["ndf"] == 8
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(load_generator(out).model(x), reference_g(x))

    from nectargan_translate.data_cli import data_group

    made = cli_runner().invoke(data_group, ["synth", str(tmp_path / "data"), "--count", "8", "--size", "32",
                                           "--val", "0.25", "--test", "0.25"])
    assert made.exit_code == 0, made.output
    config = {**checkpoint["config"], "visualizers": {}}
    config["run"] = {**config["run"], "init_from": str(out), "output_dir": str(tmp_path / "runs"), "device": "cpu"}
    config["data"] = {**config["data"], "root": str(tmp_path / "data")}
    run = Run.create(config)
    assert len(run.init_report["discriminator"]["loaded"]) == 22 and not run.init_report["discriminator"]["missing"]
    for key, tensor in from_reference(reference_d.state_dict(), "patchgan_70", {"ndf": 8}).items():
        assert torch.equal(run.trainer.discriminator.state_dict()[key], tensor), key
    assert "init_from: 'discriminator' loaded 22/22 tensors" in capsys.readouterr().err

    grey = tmp_path / "grey_G.pth"
    torch.save(UnetGenerator(1, 3, 5, 4, get_norm_layer("batch")).state_dict(), grey)
    before = out.read_bytes()
    user_error(invoke("import", str(grey), *SMALL_UNET, "--set", "in_channels=1", "--into", str(out)), ConfigError,
               f"the generator needs data.in_channels = 1, the discriminator in {out} 3; both networks must see "
               "the same images")
    assert out.read_bytes() == before
    trained = tmp_path / "trained.pt"
    save_checkpoint({**checkpoint, "imported": None}, trained)
    user_error(invoke("import", str(source), *SMALL_UNET, "--into", str(trained)), ConfigError,
               f"{trained}: not a checkpoint written by nectargan models import; --into adds networks to those only")
    both = invoke("import", str(source), *SMALL_UNET, "--into", str(out), "-o", str(tmp_path / "x.pt"))
    assert both.exit_code == 2 and "give either -o OUTPUT (a new checkpoint) or --into CHECKPOINT" in both.output


def test_resnet_generator_import_for_cyclegan_weights(tmp_path):
    torch.manual_seed(0)
    reference = randomised(define_G(3, 3, 8, "resnet_9blocks", norm="instance")).eval()
    torch.save(reference.state_dict(), tmp_path / "latest_net_G_A.pth")
    result = invoke("import", str(tmp_path / "latest_net_G_A.pth"), "--arch", "resnet_9blocks", "--set", "ngf=8",
                    "-o", str(tmp_path / "g_a.pt"))
    assert result.exit_code == 0, result.output
    loaded = load_generator(tmp_path / "g_a.pt")
    assert loaded.size_multiple == 4
    x = torch.randn(1, 3, 36, 44)
    with torch.no_grad():
        assert torch.equal(loaded.model(x), reference(x))


# -- what goes wrong, in one line ----------------------------------------------------------------------------
def one_line(result, exit_code: int, message: str) -> None:
    """A console-script result: ``error: ...`` on one stderr line, no traceback, the given exit code."""
    assert result.returncode == exit_code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.stderr, result.stderr
    assert message in lines[0], lines[0]


@pytest.mark.slow  # console-script subprocesses
def test_mistakes_are_one_line_through_the_console_script(small_file, tmp_path):
    _, source = small_file
    one_line(run_cli("models", "import", str(source), "--arch", "unet_256", "-o", str(tmp_path / "x.pt")), 2,
             f"{source} does not fit unet_256 (depth=8, norm=batch, ngf=64): it has 5 nested levels, depth=5; "
             "its first conv 'model.model.0.weight' [4, 3, 4, 4] has 4 filters; the reference caps widths at 8 * ngf; "
             "try --set depth=5 --set ngf=4 --set max_width=32")
    assert not (tmp_path / "x.pt").exists()

    truncated = tmp_path / "truncated.pth"
    truncated.write_bytes(source.read_bytes()[:5000])
    one_line(run_cli("models", "import", str(truncated), *SMALL_UNET, "-o", str(tmp_path / "x.pt")), 1,
             f"{truncated}: truncated or not a PyTorch file")

    one_line(run_cli("predict", str(source), str(random_png(tmp_path / "a.png", 32, 32)), "-o", str(tmp_path / "o")),
             1, f"{source}: not a NectarGAN checkpoint (no 'nectargan-checkpoint' marker); weights saved by "
                "pytorch-CycleGAN-and-pix2pix convert with nectargan models import FILE --arch NAME")


@pytest.mark.filterwarnings("ignore:Detected pickle protocol:UserWarning")  # the plain pickle, refused anyway
def test_non_state_dict_pickles_are_refused_by_weights_only(small_file, tmp_path):
    reference, _ = small_file
    whole_model = tmp_path / "model.pth"
    torch.save(reference, whole_model)  # the module object itself: loading it would run pickled code
    with pytest.raises(CheckpointError, match="refused to load: the file holds pickled Python objects, not only "
                                              "tensors"):
        read_state_dict(whole_model)
    plain = tmp_path / "plain.pkl"
    plain.write_bytes(pickle.dumps({"weights": [1, 2, 3]}))
    with pytest.raises(CheckpointError, match="plain.pkl: refused to load"):
        read_state_dict(plain)
    listed = tmp_path / "list.pth"
    torch.save([torch.zeros(1)], listed)
    with pytest.raises(CheckpointError, match="holds a list, not a state dict"):
        read_state_dict(listed)
    wrapped = tmp_path / "training_state.pth"
    torch.save({"epoch": 3, "net": reference.state_dict()}, wrapped)
    with pytest.raises(ConfigError, match="not a state dict of tensors \\('epoch' holds a int\\)"):
        import_reference(wrapped, "unet", ["depth=5"])


def test_a_nectargan_checkpoint_is_not_imported_again(small_file, tmp_path):
    _, source = small_file
    invoke("import", str(source), *SMALL_UNET, "-o", str(tmp_path / "g.pt"))
    with pytest.raises(CheckpointError, match="g.pt: already a NectarGAN checkpoint; use it as it is"):
        read_state_dict(tmp_path / "g.pt")


def test_dataparallel_files_import(small_file, tmp_path):
    reference, source = small_file
    wrapped = tmp_path / "dp.pth"
    torch.save(torch.nn.DataParallel(reference).state_dict(), wrapped)
    assert all(key.startswith("module.") for key in torch.load(wrapped, weights_only=True))
    result = invoke("import", str(wrapped), *SMALL_UNET, "-o", str(tmp_path / "g.pt"))
    assert result.exit_code == 0, result.output
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(load_generator(tmp_path / "g.pt").model(x), reference(x))


def test_cli_guards(small_file, tmp_path):
    _, source = small_file
    out = tmp_path / "g.pt"
    assert invoke("import", str(source), *SMALL_UNET, "-o", str(out)).exit_code == 0
    before = out.read_bytes()
    again = invoke("import", str(source), *SMALL_UNET, "--set", "norm=batch", "-o", str(out))
    user_error(again, ConfigError, "g.pt: already exists; choose another -o or pass --force to replace it")
    assert out.read_bytes() == before
    assert invoke("import", str(source), *SMALL_UNET, "-o", str(out), "--force").exit_code == 0
    user_error(invoke("import", str(source), *SMALL_UNET, "-o", str(source), "--force"), ConfigError,
               "is the file being imported; choose another -o")
    user_error(invoke("import", str(source), *SMALL_UNET, "-o", str(tmp_path)), ConfigError,
               "is a folder; give -o a file name")
    user_error(invoke("import", str(source), "--arch", "unet_512", "-o", str(tmp_path / "y.pt")), ConfigError,
               "--arch unet_512: not a reference network; choose one of basic, n_layers, patchgan, patchgan_70, "
               "pixel, pixelgan, resnet, resnet_6blocks, resnet_9blocks, unet, unet_128, unet_256")
    user_error(invoke("import", str(source), "--arch", "unet", "--set", "nrom=batch", "-o", str(tmp_path / "y.pt")),
               ConfigError, "model 'unet': nrom: unknown key; did you mean 'norm'?")
    user_error(invoke("import", str(tmp_path / "nope.pth"), *SMALL_UNET, "-o", str(tmp_path / "y.pt")),
               CheckpointError, "nope.pth: file not found")
    assert not (tmp_path / "y.pt").exists()
    with pytest.raises(ConfigError, match="--arch basic is a discriminator; a generator is needed here"):
        load_generator(source, arch="basic")


def test_hand_wrapped_checkpoints_are_one_line_errors(small_file, tmp_path):
    """The issue's report: reference weights wrapped by hand gave KeyError: 'config' in predict."""
    reference, source = small_file
    image = random_png(tmp_path / "a.png", 32, 32)
    no_config = save_checkpoint({"trainer": "pix2pix", "epoch": 0, "global_step": 0,
                                 "state": {"generator": reference.state_dict()}}, tmp_path / "wrapped.pt")
    with pytest.raises(CheckpointError, match="wrapped.pt: the checkpoint has no stored config, so the generator's "
                                              "architecture is unknown; for reference weights use nectargan models "
                                              "import FILE --arch NAME"):
        predict(no_config, [image], tmp_path / "out")
    imported = import_reference(source, "unet", ["depth=5", "ngf=4", "max_width=32"]).payload
    wrong_keys = save_checkpoint({**imported, "state": {"generator": reference.state_dict()}}, tmp_path / "keys.pt")
    with pytest.raises(CheckpointError, match="keys.pt: the generator weights do not fit the architecture in the "
                                              r"stored config \(missing tensor 'down\.0\.0\.weight' \(\+\d+ more\)\)$"):
        predict(wrong_keys, [image], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_set_needs_arch(small_file, tmp_path):
    from nectargan_translate.commands import predict_command, test_command

    _, source = small_file
    image = random_png(tmp_path / "a.png", 32, 32)
    for command, args in ((predict_command, [str(source), str(image), "-o", str(tmp_path / "o")]),
                          (test_command, [str(source)])):
        result = cli_runner().invoke(command, [*args, "--set", "norm=batch"])
        assert result.exit_code == 2 and "--set describes a reference network: use it with --arch" in result.output


def test_predict_arch_works_where_only_cyclegan_is_installed(tmp_path):
    """A CycleGAN-only install reads a reference generator as CycleGAN's G_A (pix2pix's format is not there)."""
    torch.manual_seed(0)
    reference = randomised(define_G(3, 3, 8, "resnet_6blocks", norm="instance", use_dropout=False)).eval()
    source = tmp_path / "latest_net_G_A.pth"
    torch.save(reference.state_dict(), source)
    image = random_png(tmp_path / "photo.png", 64, 64)
    arch = ("--arch", "resnet_6blocks", "--set", "ngf=8")
    alone = run_cli("predict", str(source), str(image), "-o", str(tmp_path / "out"), *arch,
                    env={"NECTARGAN_DISABLE_PLUGINS": "pix2pix"})
    assert alone.returncode == 0, alone.stderr
    assert np.array_equal(np.asarray(Image.open(tmp_path / "out" / "photo.png")), oracle_png(reference, image))
    both = run_cli("models", "import", str(source), *arch, "-o", str(tmp_path / "g.pt"),
                   env={"NECTARGAN_DISABLE_PLUGINS": "pix2pix"})
    assert both.returncode == 0, both.stderr
    assert load_checkpoint(tmp_path / "g.pt")["trainer"] == "cyclegan"
