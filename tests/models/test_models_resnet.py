"""The ResNet generator (CycleGAN's), the PixelGAN, and instance norm: counts, layers, options, sizes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nectargan_core.errors import ConfigError
from nectargan_models.errors import InputSizeError
from nectargan_models.patchgan import build_patchgan
from nectargan_models.pixelgan import PixelGAN, build_pixelgan
from nectargan_models.resnet import (
    ResidualBlock,
    ResNetGenerator,
    build_resnet,
    build_resnet_6blocks,
    build_resnet_9blocks,
)
from nectargan_models.unet import build_unet_128, build_unet_256


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def on_meta(factory, **options) -> nn.Module:
    with torch.device("meta"):
        return factory(**options)


# -- the reference's parameter counts (ANCHORS.md sections 1 and 7) -----------------------------
@pytest.mark.parametrize("factory,options,count", [
    (build_resnet_9blocks, {}, 11_378_179),
    (build_resnet_9blocks, {"norm": "batch"}, 11_383_427),
    (build_resnet_6blocks, {}, 7_837_699),
    (build_resnet_6blocks, {"norm": "batch"}, 7_841_411),
    (build_resnet, {}, 11_378_179),
    (build_patchgan, {"conditional": False, "norm": "instance"}, 2_764_737),
    (build_patchgan, {"conditional": False, "norm": "batch"}, 2_765_633),
    (build_unet_256, {"norm": "instance"}, 54_409_603),
    (build_unet_128, {"norm": "instance"}, 41_825_667),
    (build_patchgan, {"norm": "instance"}, 2_767_809),
    (build_pixelgan, {}, 9_024),
], ids=lambda v: v.__name__ if callable(v) else None)
def test_reference_parameter_counts(factory, options, count):
    assert n_params(on_meta(factory, **options)) == count


def test_reference_layers_of_resnet_9blocks():
    g = on_meta(build_resnet_9blocks)
    convs = [m for m in g.modules() if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d))]
    # c7s1-64, d128, d256, 9 x (2 x R256), u128, u64, c7s1-3
    assert [(c.in_channels, c.out_channels, c.kernel_size[0], c.stride[0]) for c in convs] == (
        [(3, 64, 7, 1), (64, 128, 3, 2), (128, 256, 3, 2)] + [(256, 256, 3, 1)] * 18
        + [(256, 128, 3, 2), (128, 64, 3, 2), (64, 3, 7, 1)])
    assert [type(c) for c in convs[-3:-1]] == [nn.ConvTranspose2d] * 2
    assert all(c.output_padding == (1, 1) for c in convs[-3:-1])
    assert all(c.bias is not None for c in convs)  # instance norm: every conv has a bias
    norms = [m for m in g.modules() if isinstance(m, nn.InstanceNorm2d)]
    assert len(norms) == 2 + 1 + 18 + 2 and not any(n.affine or n.track_running_stats for n in norms)
    pads = [m for m in g.modules() if isinstance(m, nn.ReflectionPad2d)]
    assert [p.padding for p in pads] == [(3, 3, 3, 3)] + [(1, 1, 1, 1)] * 18 + [(3, 3, 3, 3)]
    assert isinstance(list(g.modules())[-1], nn.Tanh)
    batch = on_meta(build_resnet_9blocks, norm="batch")
    convs = [m for m in batch.modules() if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d))]
    assert [c.bias is not None for c in convs] == [False] * (len(convs) - 1) + [True]


def test_residual_block_adds_its_input():
    torch.manual_seed(0)
    block = ResidualBlock(8, norm="instance")
    x = torch.randn(2, 8, 12, 12)
    with torch.no_grad():
        torch.testing.assert_close(block(x), x + block.body(x), rtol=0, atol=0)
        for conv in (m for m in block.modules() if isinstance(m, nn.Conv2d)):
            conv.weight.zero_()
            conv.bias.zero_()
        torch.testing.assert_close(block(x), x, rtol=0, atol=0)


@pytest.mark.parametrize("padding", ["reflect", "replicate", "zero"])
@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_padding_and_dropout_of_the_blocks(padding, dropout):
    block = ResidualBlock(4, padding=padding, dropout=dropout)
    kinds = [type(m).__name__ for m in block.body]
    pad = {"reflect": ["ReflectionPad2d"], "replicate": ["ReplicationPad2d"], "zero": []}[padding]
    middle = ["Dropout"] if dropout else []
    assert kinds == pad + ["Conv2d", "InstanceNorm2d", "ReLU"] + middle + pad + ["Conv2d", "InstanceNorm2d"]
    x = torch.randn(1, 4, 9, 9)
    assert block(x).shape == x.shape


@pytest.mark.parametrize("upsample", ["transposed", "resize_conv"])
@pytest.mark.parametrize("norm", ["batch", "instance", "none"])
def test_shape_and_range(upsample, norm):
    torch.manual_seed(0)
    g = build_resnet(ngf=8, n_blocks=2, norm=norm, upsample=upsample, in_channels=1, out_channels=3)
    out = g(torch.randn(2, 1, 24, 40) * 5)
    assert out.shape == (2, 3, 24, 40) and out.abs().max() <= 1
    ups = [m for up in g.up for m in up.modules() if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d))]
    assert [type(m) for m in ups] == [nn.ConvTranspose2d if upsample == "transposed" else nn.Conv2d] * 2
    assert any(isinstance(m, nn.Upsample) for m in g.up.modules()) == (upsample == "resize_conv")


def test_depth_sets_the_size_multiple():
    g = build_resnet(ngf=4, n_blocks=1, depth=3)
    assert g.size_multiple == 8 and g.output_size(64) == 64
    assert g(torch.randn(1, 3, 24, 16)).shape == (1, 3, 24, 16)
    with pytest.raises(InputSizeError, match="input 16x8 is too small for this resnet generator: height and width "
                                             "must be at least 16"):
        g(torch.randn(1, 3, 16, 8))  # the bottleneck would be 2x1: too small to reflect-pad by 1
    assert build_resnet(ngf=4, n_blocks=1, depth=3, padding="zero")(torch.randn(1, 3, 16, 8)).shape == (1, 3, 16, 8)
    assert build_resnet(ngf=4, n_blocks=1, depth=0).min_input_size == 4
    with pytest.raises(InputSizeError, match=r"input 20x20 is not a multiple of 2\*\*3=8; nearest valid sizes: 16, 24"):
        g(torch.randn(1, 3, 20, 20))
    assert build_resnet_9blocks().size_multiple == 4


def test_reference_init():
    torch.manual_seed(0)
    g = build_resnet_9blocks(norm="batch")
    weights = torch.cat([m.weight.flatten() for m in g.modules() if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d))])
    assert weights.std().item() == pytest.approx(0.02, rel=0.02) and abs(weights.mean().item()) < 1e-4
    bn = torch.cat([m.weight for m in g.modules() if isinstance(m, nn.BatchNorm2d)])
    assert bn.mean().item() == pytest.approx(1.0, abs=0.01)


def test_factories_validate_their_options():
    with pytest.raises(ConfigError, match="resnet_9blocks: padding: Input should be 'reflect', 'replicate' or 'zero'"):
        build_resnet_9blocks(padding="circular")
    with pytest.raises(ConfigError, match="resnet: n_block: unknown key; did you mean 'n_blocks'"):
        build_resnet(n_block=3)
    assert len(build_resnet_6blocks(ngf=4).blocks) == 6 and len(build_resnet_6blocks(ngf=4, n_blocks=2).blocks) == 2
    with pytest.raises(ConfigError, match="pixelgan: norm: Input should be 'batch', 'instance' or 'none'"):
        build_pixelgan(norm="spectral")


def test_pixelgan_layers_and_logits():
    torch.manual_seed(0)
    d = PixelGAN(ndf=8)
    assert [(m.in_channels, m.out_channels, m.kernel_size, m.bias is not None)
            for m in d.modules() if isinstance(m, nn.Conv2d)] == [
        (6, 8, (1, 1), True), (8, 16, (1, 1), False), (16, 1, (1, 1), False)]
    a, b = torch.randn(2, 3, 10, 14), torch.randn(2, 3, 10, 14)
    assert d(a, b).shape == (2, 1, 10, 14) and d.receptive_field == 1 and d.output_size(7) == 7
    torch.testing.assert_close(d(a, b), d(torch.cat([a, b], 1)))
    # one logit per pixel: changing one pixel changes exactly that logit (eval: fixed BN statistics)
    d.eval()
    changed = b.clone()
    changed[0, :, 4, 5] += 1
    diff = (d(a, changed) - d(a, b)).abs()[0, 0]
    assert diff[4, 5] > 0 and diff.sum() == diff[4, 5]
    assert PixelGAN(conditional=False, norm="instance").in_channels == 3
    with pytest.raises(ValueError, match="expects 6 input channels in total, got 3"):
        d(b)
