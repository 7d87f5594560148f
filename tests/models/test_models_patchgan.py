"""The PatchGAN discriminator: reference parity, patch geometry, norms and conditioning."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nectargan_core.errors import ConfigError
from nectargan_models.errors import InputSizeError
from nectargan_models.patchgan import PatchGAN, build_patchgan, output_size, receptive_field

#: n_layers -> (receptive field, output side at 256): the table in the docs.
TABLE = {1: (16, 126), 2: (34, 62), 3: (70, 30), 4: (142, 14), 5: (286, 6)}


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_reference_basic_discriminator():
    torch.manual_seed(0)
    d = build_patchgan()
    assert n_params(d) == 2_768_705
    layers = list(d.model)
    assert [type(m).__name__ for m in layers] == [
        "Conv2d", "LeakyReLU",
        "Conv2d", "BatchNorm2d", "LeakyReLU",
        "Conv2d", "BatchNorm2d", "LeakyReLU",
        "Conv2d", "BatchNorm2d", "LeakyReLU",
        "Conv2d",
    ]  # no sigmoid: losses take logits
    conv_layers = [m for m in layers if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in conv_layers] == [64, 128, 256, 512, 1]
    assert [c.stride[0] for c in conv_layers] == [2, 2, 2, 1, 1]
    assert [c.bias is not None for c in conv_layers] == [True, False, False, False, True]
    assert conv_layers[0].in_channels == 6
    assert all(m.negative_slope == 0.2 for m in layers if isinstance(m, nn.LeakyReLU))
    weights = torch.cat([c.weight.detach().flatten() for c in conv_layers])
    assert weights.std().item() == pytest.approx(0.02, rel=0.02)


def test_70x70_patches_and_30x30_logits_at_256():
    d = build_patchgan()
    assert d.receptive_field == 70 and d.output_size(256) == 30
    with torch.no_grad():
        assert d(torch.randn(1, 3, 256, 256), torch.randn(1, 3, 256, 256)).shape == (1, 1, 30, 30)


@pytest.mark.parametrize("n_layers", sorted(TABLE))
def test_geometry_table(n_layers):
    field, out_at_256 = TABLE[n_layers]
    assert receptive_field(n_layers) == field
    assert output_size(256, n_layers) == out_at_256
    d = PatchGAN(n_layers=n_layers, ndf=2, norm="none")
    for size in (d.min_input_size, d.min_input_size + 13, 2 * d.min_input_size + 5):
        with torch.no_grad():
            out = d(torch.zeros(1, 6, size, size + 3))
        assert out.shape[-2:] == (d.output_size(size), d.output_size(size + 3))
    assert d.output_size(d.min_input_size) == 1
    with pytest.raises(InputSizeError, match=f"needs at least {d.min_input_size}"):
        d.output_size(d.min_input_size - 1)


def test_receptive_field_is_what_one_logit_sees():
    torch.manual_seed(0)
    d = PatchGAN(ndf=4, norm="none")
    x = torch.randn(1, 6, 128, 128, requires_grad=True)
    d(x)[0, 0, 7, 7].backward()
    rows = x.grad.abs().sum(dim=(0, 1, 3)).nonzero().flatten()
    cols = x.grad.abs().sum(dim=(0, 1, 2)).nonzero().flatten()
    assert rows.max() - rows.min() + 1 == 70 and cols.max() - cols.min() + 1 == 70


def test_conditional_input():
    torch.manual_seed(0)
    d = PatchGAN(ndf=4, input_channels=1, target_channels=3).eval()
    a, b = torch.randn(2, 1, 64, 64), torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(d(a, b), d(torch.cat([a, b], 1)))
    with pytest.raises(ValueError, match="expects 4 input channels in total, got 3"):
        d(b)
    unconditional = PatchGAN(ndf=4, conditional=False)
    assert unconditional.in_channels == 3 and unconditional(b).shape == (2, 1, 6, 6)


@pytest.mark.parametrize("norm", ["batch", "instance", "none", "spectral"])
def test_norms(norm):
    torch.manual_seed(0)
    d = build_patchgan(ndf=8, norm=norm)
    out = d(torch.randn(2, 3, 64, 64), torch.randn(2, 3, 64, 64))
    assert out.shape == (2, 1, 6, 6) and torch.isfinite(out).all()
    has_batch = any(isinstance(m, nn.BatchNorm2d) for m in d.modules())
    has_instance = any(isinstance(m, nn.InstanceNorm2d) for m in d.modules())
    assert (has_batch, has_instance) == (norm == "batch", norm == "instance")
    conv_layers = [m for m in d.modules() if isinstance(m, nn.Conv2d)]
    assert all(hasattr(c, "parametrizations") for c in conv_layers) == (norm == "spectral")
    if norm != "batch":
        assert all(c.bias is not None for c in conv_layers)


def test_spectral_norm_bounds_each_layer():
    torch.manual_seed(0)
    d = build_patchgan(ndf=8, norm="spectral", init_gain=1.0)
    d.train()
    for _ in range(20):  # each training forward runs one power iteration
        d(torch.randn(1, 6, 32, 32))
    for conv in (m for m in d.modules() if isinstance(m, nn.Conv2d)):
        sigma = torch.linalg.matrix_norm(conv.weight.detach().flatten(1), ord=2)
        assert sigma.item() == pytest.approx(1.0, rel=0.05)


def test_width_cap_and_options():
    d = build_patchgan(n_layers=5, ndf=32, max_width=128)
    assert [m.out_channels for m in d.modules() if isinstance(m, nn.Conv2d)] == [32, 64, 128, 128, 128, 128, 1]
    with pytest.raises(ConfigError, match="n_layers: Input should be greater than or equal to 1"):
        build_patchgan(n_layers=0)
    with pytest.raises(ConfigError, match="max_width: must be at least ndf"):
        build_patchgan(ndf=64, max_width=32)


def test_too_small_input_is_a_clear_error():
    d = build_patchgan(ndf=4)
    message = "input size 16 is too small for patchgan with n_layers=3: it needs at least 24"
    with pytest.raises(InputSizeError, match=message):
        d(torch.zeros(1, 6, 16, 64))


def test_features_are_every_activation_then_the_logits():
    torch.manual_seed(0)
    d = PatchGAN(n_layers=3, ndf=8)
    a, b = torch.randn(2, 3, 64, 64), torch.randn(2, 3, 64, 64)
    features = d.features(a, b)
    assert len(features) == 3 + 2  # after the first conv, after each of the n_layers inner convs, then the logits
    assert [f.shape[1] for f in features] == [8, 16, 32, 64, 1]
    assert torch.equal(features[-1], d(a, b))
    with pytest.raises(ValueError, match="expects 6 input channels"):
        d.features(b)


def test_a_multiscale_patchgan_judges_the_image_at_each_scale():
    from nectargan_models.patchgan import MultiScalePatchGAN

    torch.manual_seed(0)
    d = MultiScalePatchGAN(num_scales=3, n_layers=2, ndf=8)
    a, b = torch.randn(2, 3, 64, 64), torch.randn(2, 3, 64, 64)
    logits = d(a, b)
    # 64, then 32 and 16 after average pooling; a 2-layer PatchGAN maps side s to s // 4 - 2
    assert [tuple(x.shape) for x in logits] == [(2, 1, 14, 14), (2, 1, 6, 6), (2, 1, 2, 2)]
    x = torch.cat([a, b], 1)
    pooled = nn.AvgPool2d(3, 2, 1, count_include_pad=False)(x)
    assert torch.equal(logits[0], d.scales[0](x)) and torch.equal(logits[1], d.scales[1](pooled))
    assert not torch.equal(d.scales[0].model[0].weight, d.scales[1].model[0].weight)  # own weights per scale
    features = d.features(a, b)
    assert len(features) == 3 and all(torch.equal(f[-1], x) for f, x in zip(features, logits))
    assert d.conditional and d.receptive_field == receptive_field(2) == 34
    # a 2-layer PatchGAN needs 12 at the coarsest scale; each pooling halves a side, rounding up
    assert d.scales[-1].min_input_size == 12 and d.min_input_size == 2 * (2 * 12 - 1) - 1 == 45
    assert d.output_size(64) == 14
    with pytest.raises(InputSizeError, match="input size 44 is too small for a 3-scale patchgan with n_layers=2"):
        d(a[..., :44, :44], b[..., :44, :44])
    assert [x.shape[-1] for x in d(a[..., :45, :45], b[..., :45, :45])] == [9, 3, 1]


def test_the_multiscale_patchgan_is_registered_with_its_options():
    from nectargan_core.plugins import get_plugins

    component = get_plugins().registry.get("model", "patchgan_multiscale")
    d = component.load()(num_scales=2, n_layers=1, ndf=4, conditional=False, target_channels=1)
    assert d.num_scales == 2 and not d.conditional and d.in_channels == 1
    assert component.meta["role"] == "discriminator"
    with pytest.raises(ConfigError, match="num_scales"):
        component.load()(num_scales=0)
