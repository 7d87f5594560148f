"""nectargan_models.reference against the reference's own networks (the oracle in reference_networks.py).

Reference state dicts come from the oracle with random init plus noise on every
tensor (BN running statistics included), so a tensor mapped to the wrong place
changes the output. Outputs are compared for exact equality.
"""

from __future__ import annotations

from collections import OrderedDict

import pytest
import torch
from torch import nn

from nectargan_models.reference import ReferenceMismatch, from_reference, strip_wrappers, to_reference
from nectargan_models.patchgan import build_patchgan
from nectargan_models.pixelgan import build_pixelgan
from nectargan_models.resnet import build_resnet, build_resnet_6blocks, build_resnet_9blocks
from nectargan_models.unet import build_unet, build_unet_128, build_unet_256
from reference_networks import PixelDiscriminator, UnetGenerator, define_D, define_G, get_norm_layer

FACTORIES = {"unet": build_unet, "unet_128": build_unet_128, "unet_256": build_unet_256,
             "resnet": build_resnet, "resnet_6blocks": build_resnet_6blocks, "resnet_9blocks": build_resnet_9blocks,
             "patchgan": build_patchgan, "patchgan_70": build_patchgan, "pixelgan": build_pixelgan}


def randomised(net: nn.Module, seed: int = 0) -> nn.Module:
    """``net`` with noise on every parameter and BN statistics: no two tensors alike, none at its init value."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for tensor in net.parameters():
            tensor.add_(torch.randn(tensor.shape, generator=generator) * 0.05)
        for module in net.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.copy_(torch.randn(module.running_mean.shape, generator=generator) * 0.1)
                module.running_var.copy_(torch.rand(module.running_var.shape, generator=generator) + 0.5)
                module.num_batches_tracked.fill_(7)
    return net


def same_output(reference: nn.Module, ours: nn.Module, x: torch.Tensor, train: bool) -> float:
    """Max |reference - ours| on ``x`` (dropout drawn from the same seed in train mode)."""
    reference.train(train)
    ours.train(train)
    with torch.no_grad():
        torch.manual_seed(5)
        expected = reference(x.clone())  # the reference's in-place activations may write to their input
        torch.manual_seed(5)
        actual = ours(x.clone())
    assert expected.shape == actual.shape
    return float((expected - actual).abs().max())


# (id, reference network factory, our model, our options, input channels, input size)
CASES = [
    ("unet_128-batch", lambda: define_G(3, 3, 8, "unet_128", norm="batch", use_dropout=True),
     "unet_128", {"ngf": 8, "max_width": 64}, 3, 128),
    ("unet_256-batch", lambda: define_G(3, 3, 8, "unet_256", norm="batch", use_dropout=True),
     "unet_256", {"ngf": 8, "max_width": 64}, 3, 256),
    ("unet_256-instance", lambda: define_G(3, 3, 8, "unet_256", norm="instance", use_dropout=True),
     "unet_256", {"ngf": 8, "max_width": 64, "norm": "instance"}, 3, 256),
    ("unet_128-instance-1to3", lambda: define_G(1, 3, 8, "unet_128", norm="instance", use_dropout=False),
     "unet_128", {"ngf": 8, "max_width": 64, "norm": "instance", "in_channels": 1, "dropout_layers": 0}, 1, 128),
    ("unet-depth6-batch", lambda: UnetGenerator(3, 3, 6, 4, get_norm_layer("batch"), use_dropout=True),
     "unet", {"depth": 6, "ngf": 4, "max_width": 32}, 3, 64),
    ("unet_256-none", lambda: define_G(3, 3, 8, "unet_256", norm="none", use_dropout=True),
     "unet_256", {"ngf": 8, "max_width": 64, "norm": "none"}, 3, 256),
    ("resnet_9blocks-instance", lambda: define_G(3, 3, 16, "resnet_9blocks", norm="instance"),
     "resnet_9blocks", {"ngf": 16}, 3, 32),
    ("resnet_9blocks-batch", lambda: define_G(3, 3, 16, "resnet_9blocks", norm="batch"),
     "resnet_9blocks", {"ngf": 16, "norm": "batch"}, 3, 32),
    ("resnet_6blocks-instance", lambda: define_G(3, 3, 16, "resnet_6blocks", norm="instance"),
     "resnet_6blocks", {"ngf": 16}, 3, 32),
    ("resnet_6blocks-batch-dropout", lambda: define_G(3, 1, 16, "resnet_6blocks", norm="batch", use_dropout=True),
     "resnet_6blocks", {"ngf": 16, "norm": "batch", "dropout": 0.5, "out_channels": 1}, 3, 32),
    ("resnet_6blocks-none", lambda: define_G(3, 3, 16, "resnet_6blocks", norm="none"),
     "resnet_6blocks", {"ngf": 16, "norm": "none"}, 3, 32),
    ("basic-batch", lambda: define_D(6, 64, "basic", norm="batch"), "patchgan_70", {}, 6, 70),
    ("basic-instance-unconditional", lambda: define_D(3, 64, "basic", norm="instance"),
     "patchgan_70", {"norm": "instance", "conditional": False}, 3, 70),
    ("n_layers5-batch", lambda: define_D(6, 8, "n_layers", n_layers_D=5, norm="batch"),
     "patchgan", {"n_layers": 5, "ndf": 8, "max_width": 64}, 6, 96),
    ("n_layers1-instance", lambda: define_D(4, 8, "n_layers", n_layers_D=1, norm="instance"),
     "patchgan", {"n_layers": 1, "ndf": 8, "norm": "instance", "input_channels": 1}, 4, 24),
    ("basic-none", lambda: define_D(6, 16, "basic", norm="none"), "patchgan_70", {"ndf": 16, "norm": "none"}, 6, 70),
    ("pixel-batch", lambda: define_D(6, 64, "pixel", norm="batch"), "pixelgan", {}, 6, 16),
    ("pixel-instance", lambda: define_D(3, 16, "pixel", norm="instance"),
     "pixelgan", {"ndf": 16, "norm": "instance", "conditional": False}, 3, 16),
    ("pixel-none", lambda: define_D(6, 16, "pixel", norm="none"), "pixelgan", {"ndf": 16, "norm": "none"}, 6, 16),
]


@pytest.mark.parametrize("make,model_name,options,channels,size", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_reference_weights_import_and_export_exactly(make, model_name, options, channels, size):
    torch.manual_seed(0)
    reference = randomised(make())
    state = reference.state_dict()
    ours_state = from_reference(state, model_name, options)

    ours = FACTORIES[model_name](**options)
    ours.load_state_dict(ours_state, strict=True)
    extra = 0 if options.get("norm") != "none" else sum(  # the reference's norm='none' convs have no bias
        t.numel() for k, t in ours_state.items() if k.endswith(".bias") and not torch.count_nonzero(t))
    assert sum(p.numel() for p in ours.parameters()) == sum(p.numel() for p in reference.parameters()) + extra
    x = torch.randn(2, channels, size, size)
    assert same_output(reference, ours, x, train=False) == 0
    assert same_output(reference, ours, x, train=True) == 0  # batch statistics, dropout with the same draws

    back = to_reference(ours.state_dict(), model_name, options)
    assert list(back) == list(reference.state_dict())  # the reference's own key order
    fresh = make()
    fresh.load_state_dict(back, strict=True)
    assert same_output(fresh, ours, x, train=False) == 0
    for key, tensor in reference.state_dict().items():
        assert torch.equal(back[key], tensor), key


def test_reference_keys_are_the_reference_layout():
    """Spot checks of the nesting the issue quotes, so the oracle itself stays honest."""
    unet = define_G(3, 3, 64, "unet_256").state_dict()
    assert "model.model.1.model.3.model.1.weight" in unet and "model.model.3.bias" in unet and len(unet) == 82
    resnet = define_G(3, 3, 64, "resnet_9blocks", norm="instance").state_dict()
    assert "model.10.conv_block.1.weight" in resnet and "model.26.weight" in resnet and len(resnet) == 48
    assert list(define_D(6, 64, "pixel").state_dict())[:3] == ["net.0.weight", "net.0.bias", "net.2.weight"]


def test_imported_tensors_are_ours_and_complete():
    state = randomised(define_G(3, 3, 8, "unet_128")).state_dict()
    ours = from_reference(state, "unet_128", {"ngf": 8, "max_width": 64})
    expected = build_unet_128(ngf=8, max_width=64).state_dict()
    assert list(ours) == list(expected)
    assert torch.equal(ours["down.0.0.weight"], state["model.model.0.weight"])
    assert torch.equal(ours["up.0.1.bias"], state["model.model.3.bias"])
    innermost = "model.model.1" + ".model.3" * 5 + ".model"
    assert torch.equal(ours["down.6.1.weight"], state[f"{innermost}.1.weight"])
    assert torch.equal(ours["up.6.2.running_var"], state[f"{innermost}.4.running_var"])


def test_dataparallel_prefix_and_old_layouts():
    reference = randomised(define_G(3, 3, 8, "unet_128", norm="batch"))
    state = reference.state_dict()
    expected = from_reference(state, "unet_128", {"ngf": 8, "max_width": 64})

    wrapped = OrderedDict((f"module.{k}", v) for k, v in state.items())
    assert all(torch.equal(a, b) for a, b in zip(from_reference(wrapped, "unet_128", {"ngf": 8, "max_width": 64})
                                                     .values(), expected.values()))
    assert list(strip_wrappers({"module._orig_mod.a": torch.zeros(1)})) == ["a"]
    assert list(strip_wrappers({"module.a": torch.zeros(1), "b": torch.zeros(1)})) == ["module.a", "b"]

    # BatchNorm saved by PyTorch < 0.4.1: no num_batches_tracked; the counters start at 0
    old_bn = {k: v for k, v in state.items() if not k.endswith("num_batches_tracked")}
    assert len(old_bn) < len(state)
    imported = from_reference(old_bn, "unet_128", {"ngf": 8, "max_width": 64})
    assert all(int(v) == 0 for k, v in imported.items() if k.endswith("num_batches_tracked"))
    assert all(torch.equal(imported[k], v) for k, v in expected.items() if not k.endswith("num_batches_tracked"))

    # InstanceNorm running statistics saved by PyTorch < 0.4 are dropped, as the reference's loader does
    instance = randomised(define_G(3, 3, 8, "unet_128", norm="instance"))
    legacy = dict(instance.state_dict())
    for name, module in instance.named_modules():
        if isinstance(module, nn.InstanceNorm2d):
            legacy[f"{name}.running_mean"] = torch.zeros(module.num_features)
            legacy[f"{name}.running_var"] = torch.ones(module.num_features)
    assert len(legacy) > len(instance.state_dict())
    ours = build_unet_128(ngf=8, max_width=64, norm="instance")
    ours.load_state_dict(from_reference(legacy, "unet_128", {"ngf": 8, "max_width": 64, "norm": "instance"}))
    assert same_output(instance, ours, torch.randn(1, 3, 128, 128), train=False) == 0


def test_reference_none_norm_biases_are_zero_on_import_and_required_zero_on_export():
    reference = randomised(define_D(6, 16, "basic", norm="none"))
    options = {"ndf": 16, "norm": "none"}
    ours_state = from_reference(reference.state_dict(), "patchgan_70", options)
    assert "model.2.bias" not in reference.state_dict() and torch.count_nonzero(ours_state["model.2.bias"]) == 0
    ours_state["model.2.bias"] = ours_state["model.2.bias"] + 0.1
    with pytest.raises(ReferenceMismatch, match="'model.2.bias' is not zero, and the reference's norm='none' network "
                                                "has no bias there"):
        to_reference(ours_state, "patchgan_70", options)


def test_from_reference_casts_to_our_dtypes():
    state = {k: v.half() if v.is_floating_point() else v
             for k, v in define_D(3, 8, "pixel", norm="batch").state_dict().items()}
    ours = from_reference(state, "pixelgan", {"ndf": 8, "conditional": False})
    assert {v.dtype for k, v in ours.items() if not k.endswith("num_batches_tracked")} == {torch.float32}


# -- one line naming the option that is probably wrong ----------------------------------------------------
def unet256_batch():
    return define_G(3, 3, 8, "unet_256", norm="batch").state_dict()


MISMATCHES = [
    ("wrong norm: instance file as batch", lambda: define_G(3, 3, 8, "unet_256", norm="instance").state_dict(),
     "unet_256", {"ngf": 8, "max_width": 64},
     "G.pth does not fit unet_256 (depth=8, norm=batch, ngf=8): it has no BatchNorm tensors and a bias in "
     "'model.model.1.model.1', so it was saved with norm=instance; try --set norm=instance"),
    ("wrong norm: batch file as instance", unet256_batch, "unet_256", {"ngf": 8, "max_width": 64, "norm": "instance"},
     "G.pth does not fit unet_256 (depth=8, norm=instance, ngf=8): it has BatchNorm tensors such as "
     "'model.model.1.model.2.weight', so it was saved with norm=batch; try --set norm=batch"),
    ("wrong ngf", unet256_batch, "unet_256", {},
     "G.pth does not fit unet_256 (depth=8, norm=batch, ngf=64): its first conv 'model.model.0.weight' "
     "[8, 3, 4, 4] has 8 filters; the reference caps widths at 8 * ngf; try --set ngf=8 --set max_width=64"),
    ("wrong depth", lambda: define_G(3, 3, 8, "unet_128").state_dict(), "unet_256", {"ngf": 8, "max_width": 64},
     "G.pth does not fit unet_256 (depth=8, norm=batch, ngf=8): it has 7 nested levels, depth=7; "
     "try --arch unet_128"),
    ("wrong arch: resnet as unet", lambda: define_G(3, 3, 8, "resnet_9blocks", norm="instance").state_dict(),
     "unet_256", {},
     "G.pth does not fit unet_256 (depth=8, norm=batch, ngf=64): it holds a ResNet generator (ResnetGenerator), "
     "not a UNet generator (UnetGenerator); try --arch resnet_9blocks"),
    ("wrong block count", lambda: define_G(3, 3, 8, "resnet_9blocks", norm="instance").state_dict(),
     "resnet_6blocks", {"ngf": 8},
     "G.pth does not fit resnet_6blocks (n_blocks=6, norm=instance, ngf=8, dropout=0.0): it has 9 residual blocks "
     "(model.10 to model.18), n_blocks=9; try --arch resnet_9blocks"),
    ("wrong arch: a UNet of a depth define_G never builds, as resnet",
     lambda: UnetGenerator(3, 3, 5, 8, norm_layer=get_norm_layer("batch")).state_dict(), "resnet_9blocks", {},
     "G.pth does not fit resnet_9blocks (n_blocks=9, norm=instance, ngf=64, dropout=0.0): it holds a UNet generator "
     "(UnetGenerator), not a ResNet generator (ResnetGenerator); try --arch unet --set depth=5"),
    ("resnet dropout", lambda: define_G(3, 3, 8, "resnet_6blocks", norm="instance", use_dropout=True).state_dict(),
     "resnet_6blocks", {"ngf": 8},
     "G.pth does not fit resnet_6blocks (n_blocks=6, norm=instance, ngf=8, dropout=0.0): the second conv of each "
     "block at conv_block.6 means dropout=0.5; try --set dropout=0.5"),
    ("grey input", lambda: define_G(1, 3, 8, "resnet_6blocks", norm="instance").state_dict(),
     "resnet_6blocks", {"ngf": 8},
     "G.pth does not fit resnet_6blocks (n_blocks=6, norm=instance, ngf=8, dropout=0.0): 'model.1.weight' "
     "[8, 1, 7, 7] gives in_channels=1; try --set in_channels=1"),
    ("unconditional CycleGAN D as pix2pix D", lambda: define_D(3, 64, "basic", norm="instance").state_dict(),
     "patchgan_70", {},
     "G.pth does not fit patchgan_70 (n_layers=3, norm=batch, ndf=64): it has no BatchNorm tensors and a bias in "
     "'model.2', so it was saved with norm=instance; its first conv 'model.0.weight' [64, 3, 4, 4] takes 3 "
     "channels, not 6; try --set norm=instance --set conditional=false"),
    ("n_layers", lambda: define_D(6, 8, "n_layers", n_layers_D=4).state_dict(), "patchgan_70", {"ndf": 8},
     "G.pth does not fit patchgan_70 (n_layers=3, norm=batch, ndf=8): it has 6 convs, n_layers=4; "
     "try --set n_layers=4"),
    ("pixel as basic", lambda: PixelDiscriminator(6, 64).state_dict(), "patchgan_70", {},
     "it holds a PixelGAN discriminator (PixelDiscriminator), not a PatchGAN discriminator (NLayerDiscriminator); "
     "try --arch pixel"),
    ("D as G", lambda: define_D(6, 64, "basic").state_dict(), "unet_256", {},
     "it holds a PatchGAN discriminator (NLayerDiscriminator), not a UNet generator (UnetGenerator); try --arch basic"),
    ("not a reference network", lambda: {"fc.weight": torch.zeros(2, 2)}, "unet_256", {},
     "it is not a state dict of a reference network (keys such as 'fc.weight')"),
    ("one tensor missing", lambda: {k: v for k, v in unet256_batch().items() if k != "model.model.3.bias"},
     "unet_256", {"ngf": 8, "max_width": 64},
     "G.pth does not fit unet_256 (depth=8, norm=batch, ngf=8): 1 tensor missing (e.g. 'model.model.3.bias')"),
    ("one tensor too many", lambda: {**unet256_batch(), "model.extra": torch.zeros(1)},
     "unet_256", {"ngf": 8, "max_width": 64},
     "G.pth does not fit unet_256 (depth=8, norm=batch, ngf=8): 1 tensor unexpected (e.g. 'model.extra')"),
]


@pytest.mark.parametrize("state,model_name,options,message", [m[1:] for m in MISMATCHES], ids=[m[0] for m in MISMATCHES])
def test_a_file_that_does_not_fit_names_the_option(state, model_name, options, message):
    with pytest.raises(ReferenceMismatch) as raised:
        from_reference(state(), model_name, options, source="G.pth")
    text = str(raised.value)
    assert message in text and "\n" not in text
    assert raised.value.exit_code == 2


@pytest.mark.parametrize("depth", [4, 5, 6])
def test_the_export_refuses_every_unet_depth_but_7_and_8_in_the_same_words(depth):
    from nectargan_models.reference import reference_build

    with pytest.raises(ReferenceMismatch) as raised:
        reference_build("unet", {"depth": depth, "ngf": 8, "dropout_layers": 0})
    assert str(raised.value) == (f"unet with depth={depth}: the reference's define_G builds UNets of depth 7 "
                                 "(unet_128) and 8 (unet_256) only")


@pytest.mark.parametrize("model_name,options,message", [
    ("unet_256", {"block": "residual"}, "unet_256 with block=residual: the reference has no such network"),
    ("unet_256", {"upsample": "resize_conv"}, "unet_256 with upsample=resize_conv"),
    ("unet", {"depth": 4, "dropout_layers": 0}, "depth=4 (the reference's UNets have at least 5 levels)"),
    ("unet_256", {"ngf": 32}, "max_width=512 (the reference: 8 * ngf = 256)"),
    ("unet_256", {"dropout_layers": 1}, "dropout_layers=1 (the reference: 3 with dropout, 0 without)"),
    ("unet_256", {"dropout": 0.3}, "dropout=0.3 (the reference: 0.5)"),
    ("resnet_9blocks", {"upsample": "resize_conv"}, "resnet_9blocks with upsample=resize_conv"),
    ("resnet", {"depth": 3}, "depth=3 (the reference downsamples twice)"),
    ("resnet_6blocks", {"dropout": 0.2}, "dropout=0.2 (the reference: 0.5 or 0)"),
    ("patchgan", {"norm": "spectral"}, "patchgan with norm=spectral"),
    ("patchgan", {"n_layers": 4, "max_width": 1024}, "max_width=1024 (the reference: 8 * ndf = 512)"),
    ("pixelgan", {"negative_slope": 0.1}, "negative_slope=0.1 (the reference: 0.2)"),
    ("toy_linear", {}, "model 'toy_linear' has no counterpart in the pix2pix/CycleGAN reference"),
])
def test_options_the_reference_cannot_express_are_refused(model_name, options, message):
    state = {"x": torch.zeros(1)}
    for direction in (from_reference, to_reference):
        with pytest.raises(ReferenceMismatch, match=None) as raised:
            direction(state, model_name, options)
        assert message in str(raised.value)


def test_patchgan_width_cap_only_matters_where_it_bites():
    """The reference caps at 8 * ndf; with n_layers=3 the widths never reach a larger cap, so it fits."""
    reference = randomised(define_D(6, 8, "basic"))
    ours = build_patchgan(ndf=8, max_width=4096)
    ours.load_state_dict(from_reference(reference.state_dict(), "patchgan_70", {"ndf": 8, "max_width": 4096}))
    assert same_output(reference, ours, torch.randn(1, 6, 70, 70), train=False) == 0


def test_to_reference_checks_the_state_against_the_options():
    state = build_unet_128(ngf=8, max_width=64).state_dict()
    with pytest.raises(ReferenceMismatch, match=r"not a state dict of unet_128 with depth=7, norm=instance, ngf=8: "
                                                r"13 tensors missing \(e.g. 'down.0.0.bias'\), 55 tensors unexpected "
                                                r"\(e.g. 'down.1.2.bias'\)"):
        to_reference(state, "unet_128", {"ngf": 8, "max_width": 64, "norm": "instance"})
    with pytest.raises(ReferenceMismatch, match=r"of another shape \(e.g. 'down.0.0.weight' \[8, 3, 4, 4\] vs "
                                                r"\[16, 3, 4, 4\]\)"):
        to_reference(state, "unet_128", {"ngf": 16, "max_width": 128})


@pytest.mark.parametrize("bad,message", [
    ([1, 2], "G.pth: not a state dict (a list, not a mapping of tensors)"),
    ({"epoch": 3, "weights": torch.zeros(1)}, "G.pth: not a state dict of tensors ('epoch' holds a int)"),
    ({}, "G.pth: the state dict is empty"),
])
def test_not_a_state_dict(bad, message):
    with pytest.raises(ReferenceMismatch, match=None) as raised:
        from_reference(bad, "unet_256", {}, source="G.pth")
    assert str(raised.value).startswith(message)
