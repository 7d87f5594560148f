"""``nectargan export --format reference``: files the reference's own ``define_G`` loads strictly, same outputs.

The oracle (reference_networks.py) plays the reference: each exported file is
loaded into ``define_G(**arguments)`` (the arguments the sidecar gives) with
``strict=True`` and must compute what our generator computes, bit for bit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from nectargan_core import Run
from nectargan_core.checkpoint import save_checkpoint
from nectargan_core.config import load_config
from nectargan_core.errors import NectarGANError
from nectargan_core.plugins import get_plugins
from nectargan_core.registry import Component, Registry
from nectargan_models.cli import models_group
from nectargan_translate.commands.export_cmd import export_command
from nectargan_translate.inference import load_generator
from nectargan_translate.reference_export import export_reference
from nectargan_pix2pix.trainer import Pix2pixTrainer
from reference_networks import define_G
from support import cli_runner, run_cli
from test_reference_mapping import randomised, same_output


def export(*args: str):
    """``nectargan export ARGS`` in-process (user errors stay in ``result.exception``)."""
    result = cli_runner().invoke(export_command, list(args))
    if result.exception is not None and not isinstance(result.exception, (SystemExit, NectarGANError)):
        raise result.exception
    return result


def oracle_from(sidecar: Path) -> torch.nn.Module:
    """The reference network the sidecar describes, with the exported file loaded strictly."""
    described = json.loads(sidecar.read_text())
    assert described["reference"]["factory"] == "define_G"
    net = define_G(**described["reference"]["arguments"])
    state = torch.load(sidecar.with_name(described["file"]), map_location="cpu", weights_only=True)
    net.load_state_dict(state, strict=True)
    return net


# (id, the reference network, --arch, --set options, input size, the options the export must print)
CASES = [
    ("unet_256-batch-dropout", lambda: define_G(3, 3, 8, "unet_256", norm="batch", use_dropout=True),
     "unet_256", ["ngf=8", "max_width=64"], 256,
     "--netG unet_256 --ngf 8 --norm batch --input_nc 3 --output_nc 3"),
    ("unet_128-instance-no_dropout", lambda: define_G(3, 1, 8, "unet_128", norm="instance", use_dropout=False),
     "unet_128", ["ngf=8", "max_width=64", "norm=instance", "dropout_layers=0", "out_channels=1"], 128,
     "--netG unet_128 --ngf 8 --norm instance --input_nc 3 --output_nc 1 --no_dropout"),
    ("resnet_9blocks-instance", lambda: define_G(3, 3, 8, "resnet_9blocks", norm="instance", use_dropout=False),
     "resnet_9blocks", ["ngf=8"], 64,
     "--netG resnet_9blocks --ngf 8 --norm instance --input_nc 3 --output_nc 3 --no_dropout"),
    ("resnet_6blocks-batch-dropout", lambda: define_G(3, 3, 8, "resnet_6blocks", norm="batch", use_dropout=True),
     "resnet_6blocks", ["ngf=8", "norm=batch", "dropout=0.5"], 64,
     "--netG resnet_6blocks --ngf 8 --norm batch --input_nc 3 --output_nc 3"),
]


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_imported_weights_export_back_to_the_same_file_and_outputs(tmp_path, case):
    _, factory, arch, options, size, flags = case
    torch.manual_seed(0)
    reference = randomised(factory())
    torch.save(reference.state_dict(), tmp_path / "latest_net_G.pth")
    sets = [arg for option in options for arg in ("--set", option)]
    imported = cli_runner().invoke(models_group, ["import", str(tmp_path / "latest_net_G.pth"), "--arch", arch,
                                                 *sets, "-o", str(tmp_path / "ours.pt")])
    assert imported.exit_code == 0, imported.output

    result = export(str(tmp_path / "ours.pt"), "--format", "reference", "-o", str(tmp_path / "checkpoints" / "x"))
    assert result.exit_code == 0, result.output
    written = tmp_path / "checkpoints" / "x" / "ours_net_G.pth"  # a checkpoint file: its name is the label
    assert f"net_G: load with define_G from the reference's options {flags}\n" in result.output

    exported = torch.load(written, weights_only=True)
    original = reference.state_dict()
    assert list(exported) == list(original)  # the reference's own key order
    assert all(torch.equal(exported[key], original[key]) for key in original)

    loaded = oracle_from(written.with_name(written.name + ".json"))
    ours = load_generator(tmp_path / "ours.pt").model
    x = torch.rand(2, 3, size, size) * 2 - 1
    assert same_output(loaded, ours, x, train=False) == 0.0
    assert same_output(loaded, ours, x, train=True) == 0.0


def small_run(tmp_path, synth) -> Path:
    """One optimisation step of a pix2pix run with a narrow unet_128: weights trained here."""
    config = load_config({"trainer": "pix2pix"}, [
        f"data.root={synth}", "data.load_size=128", "data.crop_size=128", "data.num_workers=0",
        "run.device=cpu", f"run.output_dir={tmp_path / 'runs'}", "loop.max_steps=1", "visualizers=[]",
        "examples.every_epochs=null", "models.generator.name=unet_128", "models.generator.ngf=8",
        "models.generator.max_width=64", "models.discriminator.ndf=8"], get_plugins().registry)
    return Run.create(config).fit().dir


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    from nectargan_translate.data_cli import data_group

    root = tmp_path_factory.mktemp("data") / "synth"
    made = cli_runner().invoke(data_group, ["synth", str(root), "--count", "8", "--size", "32", "--val", "0.25",
                                           "--test", "0.25"])
    assert made.exit_code == 0, made.output
    return root


@pytest.mark.slow  # a training step and a console-script subprocess
def test_a_trained_run_exports_through_the_cli_and_the_reference_reproduces_it(tmp_path, synth):
    run = small_run(tmp_path, synth)
    out = tmp_path / "checkpoints" / "facades_pix2pix"
    result = run_cli("export", str(run), "--format", "reference", "-o", str(out))
    assert result.returncode == 0, result.stderr
    file = out / "latest_net_G.pth"
    assert result.stdout.splitlines() == [
        f"wrote {file} (70 tensors in the reference's layout) and latest_net_G.pth.json",
        "read back and mapped onto the network again: max |difference| = 0",
        "net_G: load with define_G from the reference's options --netG unet_128 --ngf 8 --norm batch --input_nc 3 "
        "--output_nc 3",
        f"test it with the reference: python test.py --dataroot DATAROOT --checkpoints_dir {out.parent} --name "
        "facades_pix2pix --model pix2pix --epoch latest --netG unet_128 --ngf 8 --norm batch --input_nc 3 "
        "--output_nc 3 --direction AtoB --load_size 128 --crop_size 128"]
    sidecar = json.loads((out / "latest_net_G.pth.json").read_text())
    assert sidecar["reference"]["arguments"] == {"input_nc": 3, "output_nc": 3, "ngf": 8, "netG": "unet_128",
                                                 "norm": "batch", "use_dropout": True}
    assert sidecar["round_trip"]["max_abs_diff"] == 0.0 and sidecar["global_step"] == 1

    loaded = oracle_from(out / "latest_net_G.pth.json")
    x = torch.rand(1, 3, 128, 128) * 2 - 1
    assert same_output(loaded, load_generator(run).model, x, train=False) == 0.0
    assert same_output(loaded, load_generator(run).model, x, train=True) == 0.0


@pytest.mark.slow  # a training step
def test_labels_follow_the_reference_epoch_names(tmp_path, synth):
    run = small_run(tmp_path, synth)
    assert export(str(run), "--format", "reference").exit_code == 0
    assert (run / "export" / "reference" / "latest_net_G.pth").is_file()  # the reference's --epoch latest
    periodic = next((run / "checkpoints").glob("epoch*.pt"))
    assert export(str(periodic), "--format", "reference", "-o", str(tmp_path / "o")).exit_code == 0
    assert (tmp_path / "o" / f"{int(periodic.name[5:9])}_net_G.pth").is_file()  # --epoch 0
    refused = export(str(run), "--format", "reference", "-o", str(periodic))
    assert refused.exit_code == 1
    assert str(refused.exception) == (f"{periodic}: is a file; --format reference writes a folder (the reference's "
                                      "checkpoints/<name>), give -o a folder")


@pytest.mark.slow  # a console-script subprocess
def test_a_network_the_reference_cannot_build_is_refused_in_one_line_before_writing(tmp_path):
    from nectargan_models.unet import build_unet

    options = {"name": "unet", "depth": 6, "ngf": 4, "max_width": 32}  # a UNet define_G never builds
    config = load_config({"trainer": "pix2pix", "models": {"generator": options}}, (), get_plugins().registry)
    state = {"generator": build_unet(**config.models.generator.options).state_dict()}
    save_checkpoint({"trainer": "pix2pix", "epoch": 1, "global_step": 1, "config": config.to_dict(), "state": state},
                    tmp_path / "deep6.pt")
    result = run_cli("export", str(tmp_path / "deep6.pt"), "--format", "reference", "-o", str(tmp_path / "out"))
    assert result.returncode == 2
    assert result.stderr == ("error: unet with depth=6: the reference's define_G builds UNets of depth 7 "
                             "(unet_128) and 8 (unet_256) only\n")
    assert not (tmp_path / "out").exists()


class Twins(Pix2pixTrainer):
    """A trainer with two generators, as CycleGAN has: the export writes one reference file per direction."""

    reference_networks = {"G_A": ("G_A", "models.generator"), "G_B": ("G_B", "models.discriminator")}
    reference_model = "cycle_gan"


def test_a_trainer_with_two_generators_gets_one_file_each(tmp_path):
    host = get_plugins().registry
    registry = Registry()
    for component in host:
        registry.add(component)
    registry.add(Component("trainer", "twins", Twins, "test", options_ref=Pix2pixTrainer.options))
    # models.discriminator stands in for G_B's model choice: a second resnet generator
    config = load_config({"trainer": "twins", "models": {
        "generator": {"name": "resnet_9blocks", "ngf": 8},
        "discriminator": {"name": "resnet_6blocks", "ngf": 8}}}, (), registry).to_dict()
    torch.manual_seed(0)
    g_a, g_b = randomised(define_G(3, 3, 8, "resnet_9blocks", "instance")), \
        randomised(define_G(3, 3, 8, "resnet_6blocks", "instance"), seed=1)
    from nectargan_models.reference import from_reference

    state = {"G_A": from_reference(g_a.state_dict(), "resnet_9blocks", {"ngf": 8}),
             "G_B": from_reference(g_b.state_dict(), "resnet_6blocks", {"ngf": 8})}
    save_checkpoint({"trainer": "twins", "epoch": 3, "global_step": 30, "config": config, "state": state},
                    tmp_path / "twins.pt")
    report = export_reference(tmp_path / "twins.pt", output=tmp_path / "horse2zebra", registry=registry)
    assert [f.path.name for f in report.files] == ["twins_net_G_A.pth", "twins_net_G_B.pth"]
    assert "--model cycle_gan --epoch twins --netG resnet_9blocks" in report.test_command
    x = torch.rand(1, 3, 64, 64) * 2 - 1
    for file, reference in zip(report.files, (g_a, g_b)):
        loaded = oracle_from(file.sidecar)
        assert same_output(loaded, reference, x, train=False) == 0.0
