"""The UNet generator: reference parity, variants, dropout, init and input sizes."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from nectargan_core.errors import ConfigError, NectarGANError
from nectargan_models.errors import InputSizeError
from nectargan_models.unet import UNet, build_unet, build_unet_128, build_unet_256, check_multiple


def n_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def on_meta(factory, **options) -> nn.Module:
    with torch.device("meta"):
        return factory(**options)


def convs(module: nn.Module) -> list[nn.Module]:
    return [m for m in module.modules() if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d))]


# -- the reference, re-stated from its description (ANCHORS.md section 1) ------
class ReferenceBlock(nn.Module):
    """pix2pix's recursive UnetSkipConnectionBlock with batch norm, in-place activations included."""

    def __init__(self, outer, inner, input_nc=None, sub=None, outermost=False, innermost=False, dropout=False):
        super().__init__()
        self.outermost = outermost
        self.downconv = nn.Conv2d(input_nc or outer, inner, 4, 2, 1, bias=False)
        if outermost:
            self.upconv = nn.ConvTranspose2d(inner * 2, outer, 4, 2, 1)
            layers = [self.downconv, sub, nn.ReLU(True), self.upconv, nn.Tanh()]
        elif innermost:
            self.upconv = nn.ConvTranspose2d(inner, outer, 4, 2, 1, bias=False)
            self.upnorm = nn.BatchNorm2d(outer)
            layers = [nn.LeakyReLU(0.2, True), self.downconv, nn.ReLU(True), self.upconv, self.upnorm]
        else:
            self.upconv = nn.ConvTranspose2d(inner * 2, outer, 4, 2, 1, bias=False)
            self.downnorm, self.upnorm = nn.BatchNorm2d(inner), nn.BatchNorm2d(outer)
            layers = [nn.LeakyReLU(0.2, True), self.downconv, self.downnorm, sub,
                      nn.ReLU(True), self.upconv, self.upnorm] + ([nn.Dropout(0.5)] if dropout else [])
        self.model = nn.Sequential(*layers)

    def forward(self, x):
        return self.model(x) if self.outermost else torch.cat([x, self.model(x)], 1)


def reference_unet(in_nc: int, out_nc: int, num_downs: int, ngf: int) -> tuple[nn.Module, list[ReferenceBlock]]:
    """The reference generator and its blocks listed from the outermost level inwards."""
    blocks = [ReferenceBlock(ngf * 8, ngf * 8, innermost=True)]
    for _ in range(num_downs - 5):
        blocks.append(ReferenceBlock(ngf * 8, ngf * 8, sub=blocks[-1], dropout=True))
    for mult in (4, 2, 1):
        blocks.append(ReferenceBlock(ngf * mult, ngf * mult * 2, sub=blocks[-1]))
    blocks.append(ReferenceBlock(out_nc, ngf, input_nc=in_nc, sub=blocks[-1], outermost=True))
    return blocks[-1], blocks[::-1]


def copy_reference_weights(ours: UNet, blocks: list[ReferenceBlock]) -> None:
    for level, block in enumerate(blocks):
        pairs = [(convs(ours.down[level])[0], block.downconv), (convs(ours.up[level])[0], block.upconv)]
        down_norms = [m for m in ours.down[level] if isinstance(m, nn.BatchNorm2d)]
        up_norms = [m for m in ours.up[level] if isinstance(m, nn.BatchNorm2d)]
        assert len(down_norms) == hasattr(block, "downnorm") and len(up_norms) == hasattr(block, "upnorm")
        pairs += [(down_norms[0], block.downnorm)] if down_norms else []
        pairs += [(up_norms[0], block.upnorm)] if up_norms else []
        for mine, theirs in pairs:
            mine.load_state_dict(theirs.state_dict())


@pytest.mark.parametrize("train", [False, True])
def test_forward_matches_the_reference(train):
    torch.manual_seed(0)
    reference, blocks = reference_unet(3, 3, num_downs=6, ngf=8)
    ours = UNet(depth=6, ngf=8, max_width=64)
    assert n_params(ours) == n_params(reference)
    copy_reference_weights(ours, blocks)
    ours.train(train), reference.train(train)
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        torch.manual_seed(1)
        expected = reference(x.clone())
        torch.manual_seed(1)
        actual = ours(x)
    torch.testing.assert_close(actual, expected)


# -- presets ------------------------------------------------------------------
def test_reference_parameter_counts():
    assert n_params(on_meta(build_unet_256)) == 54_413_955
    assert n_params(on_meta(build_unet_128)) == 41_828_995
    assert n_params(on_meta(build_unet)) == 54_413_955  # the generic default is unet_256


def test_reference_layer_structure():
    net = on_meta(build_unet_256)
    first, innermost = net.down[0], net.down[-1]
    assert [type(m) for m in first] == [nn.Conv2d]  # no activation before, no norm after
    assert [type(m) for m in innermost] == [nn.LeakyReLU, nn.Conv2d]  # no norm
    for layer in list(net.down[1:-1]):
        assert [type(m) for m in layer] == [nn.LeakyReLU, nn.Conv2d, nn.BatchNorm2d]
        assert layer[0].negative_slope == 0.2
    for layer in list(net.up[1:]):
        assert [type(m) for m in layer][:3] == [nn.ReLU, nn.ConvTranspose2d, nn.BatchNorm2d]
    assert [type(m) for m in net.up[0]] == [nn.ReLU, nn.ConvTranspose2d] and isinstance(net.out, nn.Tanh)
    for conv in convs(net):
        assert conv.kernel_size == (4, 4) and conv.stride == (2, 2) and conv.padding == (1, 1)
        assert (conv.bias is not None) == (conv is net.up[0][1])  # only the outermost convT has a bias
    widths = [convs(layer)[0].out_channels for layer in net.down]
    assert widths == [64, 128, 256, 512, 512, 512, 512, 512]


@pytest.mark.parametrize(
    "factory, size, expected",
    [(build_unet_256, 256, [4, 8, 16]), (build_unet_128, 128, [4, 8])],
)
def test_dropout_follows_the_norm_of_the_middle_512_decoder_layers(factory, size, expected):
    torch.manual_seed(0)
    net = factory(ngf=4, max_width=32)  # the reference's layout at a fraction of the cost
    with_dropout = [layer for layer in net.up if any(isinstance(m, nn.Dropout) for m in layer)]
    for layer in with_dropout:
        assert [type(m) for m in layer][-2:] == [nn.BatchNorm2d, nn.Dropout] and layer[-1].p == 0.5
    sizes = []
    hooks = [layer.register_forward_hook(lambda m, i, out: sizes.append(out.shape[-1])) for layer in with_dropout]
    net.eval()
    with torch.no_grad():
        net(torch.zeros(1, 3, size, size))
    for hook in hooks:
        hook.remove()
    assert sorted(sizes) == expected
    assert sum(isinstance(m, nn.Dropout) for m in build_unet_256(ngf=4, max_width=32).modules()) == 3


def test_dropout_layer_count_is_configurable_and_checked():
    net = UNet(depth=5, ngf=4, dropout_layers=3, dropout=0.2)
    drops = [i for i, layer in enumerate(net.up) if any(isinstance(m, nn.Dropout) for m in layer)]
    assert drops == [1, 2, 3]  # never the innermost (4) nor the outermost (0)
    assert not any(isinstance(m, nn.Dropout) for m in UNet(depth=4, ngf=4).modules())  # reference rule: depth - 5
    with pytest.raises(ConfigError, match="dropout_layers: 4 is too many for depth 5"):
        build_unet(depth=5, dropout_layers=4)


# -- variants -----------------------------------------------------------------
@pytest.mark.parametrize(
    "block, upsample, norm",
    list(itertools.product(["unet", "residual"], ["transposed", "resize_conv"], ["batch", "instance", "none"])),
)
def test_every_variant_keeps_shape_and_range(block, upsample, norm):
    torch.manual_seed(0)
    net = build_unet(depth=4, ngf=8, block=block, upsample=upsample, norm=norm, init_gain=1.0)
    out = net(torch.randn(2, 3, 32, 32) * 10)  # large weights and inputs push towards saturation
    assert out.shape == (2, 3, 32, 32)
    assert torch.isfinite(out).all() and out.abs().max() <= 1.0
    out.mean().backward()
    assert all(p.grad is not None for p in net.parameters())


@pytest.mark.parametrize("activation", ["leaky_relu", "relu", "gelu", "silu"])
@pytest.mark.parametrize("resize_mode", ["bilinear", "nearest"])
def test_activations_and_resize_modes(activation, resize_mode):
    net = build_unet(depth=3, ngf=4, upsample="resize_conv", resize_mode=resize_mode,
                     down_activation=activation, up_activation=activation)
    assert net(torch.randn(1, 3, 16, 16)).shape == (1, 3, 16, 16)


@pytest.mark.parametrize("depth", range(1, 7))
def test_residual_shortcuts_fit_at_every_depth(depth):
    net = build_unet(depth=depth, ngf=4, max_width=16, block="residual", in_channels=1, out_channels=2)
    for layer in [*net.down, *net.up]:
        x_channels = convs(layer.body)[0].in_channels
        size = 8
        x = torch.randn(1, x_channels, size, size)
        assert layer.shortcut(x).shape == layer.body(x).shape
    for size in (2**depth, 2 ** (depth + 1)):
        assert net(torch.randn(2, 1, size, size)).shape == (2, 2, size, size)


def test_width_cap_and_non_square_input():
    net = build_unet(depth=5, ngf=8, max_width=32)
    assert [convs(layer)[0].out_channels for layer in net.down] == [8, 16, 32, 32, 32]
    assert net(torch.randn(1, 3, 32, 64)).shape == (1, 3, 32, 64)


# -- init -----------------------------------------------------------------------
def test_reference_init_statistics():
    torch.manual_seed(0)
    net = build_unet_256()
    with torch.no_grad():
        count = sum(c.weight.numel() for c in convs(net))
        mean = sum(c.weight.sum() for c in convs(net)) / count
        std = (sum(c.weight.square().sum() for c in convs(net)) / count - mean**2).sqrt()
    assert abs(mean.item()) < 1e-4 and std.item() == pytest.approx(0.02, rel=0.01)
    norms = [m for m in net.modules() if isinstance(m, nn.BatchNorm2d)]
    gammas = torch.cat([m.weight for m in norms]).detach()
    assert gammas.mean().item() == pytest.approx(1.0, abs=0.005)
    assert gammas.std().item() == pytest.approx(0.02, rel=0.15)
    assert all((m.bias == 0).all() for m in norms)
    assert all((c.bias == 0).all() for c in convs(net) if c.bias is not None)


@pytest.mark.parametrize("init", ["normal", "xavier", "kaiming", "orthogonal"])
def test_init_schemes_and_gain(init):
    torch.manual_seed(0)
    net = build_unet(depth=4, ngf=16, init=init, init_gain=0.5)
    conv = net.down[2][1]  # 32 -> 64 channels, 4x4
    weight = conv.weight.detach()
    fan_in, fan_out = weight[0].numel(), weight.shape[0] * 16
    expected_std = {
        "normal": 0.5,
        "xavier": 0.5 * (2 / (fan_in + fan_out)) ** 0.5,
        "kaiming": 0.5 * (2 / fan_in) ** 0.5,
        "orthogonal": 0.5 / fan_in**0.5,  # rows of an orthogonal (64 x 512) matrix have norm 1
    }[init]
    assert weight.std().item() == pytest.approx(expected_std, rel=0.1)
    if init == "orthogonal":
        rows = weight.flatten(1)
        torch.testing.assert_close(rows @ rows.T, 0.25 * torch.eye(64), atol=1e-5, rtol=0)


# -- input sizes and options -------------------------------------------------------
def test_bad_input_size_names_the_nearest_valid_sizes():
    net = build_unet(depth=8, ngf=2, max_width=4)
    with pytest.raises(InputSizeError) as info:
        net(torch.zeros(1, 3, 250, 250))
    assert str(info.value) == "input 250x250 is not a multiple of 2**8=256; nearest valid sizes: 256"
    assert isinstance(info.value, NectarGANError) and isinstance(info.value, ValueError)
    assert net.output_size(512) == 512 and net.size_multiple == 256


@pytest.mark.parametrize(
    "height, width, depth, sizes",
    [
        (300, 300, 8, "256, 512"),
        (250, 256, 8, "256x256"),
        (300, 250, 8, "256x256, 512x256"),
        (100, 96, 5, "96x96, 128x96"),
        (0, 0, 3, "8"),
    ],
)
def test_size_error_message(height, width, depth, sizes):
    with pytest.raises(InputSizeError, match=f"nearest valid sizes: {sizes}$"):
        check_multiple(height, width, depth)
    check_multiple(2**depth, 3 * 2**depth, depth)


def test_factories_validate_their_options():
    assert on_meta(build_unet_128).depth == 7
    with pytest.raises(ConfigError, match=r"^unet_256: nrom: unknown key; did you mean 'norm'\?"):
        build_unet_256(nrom="instance")
    with pytest.raises(ConfigError, match="max_width: must be at least ngf"):
        build_unet(ngf=64, max_width=32)
    with pytest.raises(ConfigError, match="norm: Input should be 'batch', 'instance' or 'none'"):
        build_unet(norm="spectral")
