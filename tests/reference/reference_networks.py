"""The test oracle: the pix2pix/CycleGAN reference networks, with the reference's module layout.

A minimal re-statement of junyanz/pytorch-CycleGAN-and-pix2pix ``models/networks.py``
(``define_G``/``define_D`` and the four network classes), written for these tests
from the papers and the reference's description. What matters here is that it
is built like the reference: the same nesting and ``nn.Sequential`` positions
(so its ``state_dict`` keys are the reference's keys, e.g.
``model.model.1.model.3.weight`` for a UNet, ``model.10.conv_block.1.weight``
for a ResNet), the same biases, norms, in-place activations and init. State
dicts saved by the reference load into these classes with ``strict=True`` and
the other way round.

Never imported by the product: the mapping in ``nectargan_models.reference``
computes the reference's key names on its own, and these classes check it.
"""

from __future__ import annotations

import functools

import torch
from torch import nn


class Identity(nn.Module):
    """What the reference puts where a norm would be with ``norm='none'`` (keeps the indices)."""

    def forward(self, x):
        return x


def get_norm_layer(norm_type: str = "instance"):
    """The reference's norm factories: BN with affine and running stats; IN with neither."""
    if norm_type == "batch":
        return functools.partial(nn.BatchNorm2d, affine=True, track_running_stats=True)
    if norm_type == "instance":
        return functools.partial(nn.InstanceNorm2d, affine=False, track_running_stats=False)
    if norm_type == "none":
        def norm_layer(channels):
            return Identity()
        return norm_layer
    raise NotImplementedError(norm_type)


def uses_bias(norm_layer) -> bool:
    """The reference's rule: convs followed by a norm have a bias only with instance norm."""
    if isinstance(norm_layer, functools.partial):
        return norm_layer.func == nn.InstanceNorm2d
    return norm_layer == nn.InstanceNorm2d


def init_weights(net: nn.Module, init_type: str = "normal", init_gain: float = 0.02) -> nn.Module:
    """Conv/Linear weights by ``init_type``, biases 0; BatchNorm2d weight N(1, gain), bias 0."""
    def init_func(m):
        classname = m.__class__.__name__
        if hasattr(m, "weight") and ("Conv" in classname or "Linear" in classname):
            if init_type == "normal":
                nn.init.normal_(m.weight.data, 0.0, init_gain)
            elif init_type == "xavier":
                nn.init.xavier_normal_(m.weight.data, gain=init_gain)
            elif init_type == "kaiming":
                nn.init.kaiming_normal_(m.weight.data, a=0, mode="fan_in")
            elif init_type == "orthogonal":
                nn.init.orthogonal_(m.weight.data, gain=init_gain)
            if getattr(m, "bias", None) is not None:
                nn.init.constant_(m.bias.data, 0.0)
        elif "BatchNorm2d" in classname:
            nn.init.normal_(m.weight.data, 1.0, init_gain)
            nn.init.constant_(m.bias.data, 0.0)

    net.apply(init_func)
    return net


class ResnetBlock(nn.Module):
    """``x + conv_block(x)``; ``conv_block`` is pad, conv, norm, ReLU, [dropout], pad, conv, norm."""

    def __init__(self, dim, padding_type, norm_layer, use_dropout, use_bias):
        super().__init__()
        layers = []
        for second in (False, True):
            p = 0
            if padding_type == "reflect":
                layers.append(nn.ReflectionPad2d(1))
            elif padding_type == "replicate":
                layers.append(nn.ReplicationPad2d(1))
            elif padding_type == "zero":
                p = 1
            else:
                raise NotImplementedError(padding_type)
            layers += [nn.Conv2d(dim, dim, kernel_size=3, padding=p, bias=use_bias), norm_layer(dim)]
            if not second:
                layers.append(nn.ReLU(True))
                if use_dropout:
                    layers.append(nn.Dropout(0.5))
        self.conv_block = nn.Sequential(*layers)

    def forward(self, x):
        return x + self.conv_block(x)


class ResnetGenerator(nn.Module):
    """c7s1-ngf, two stride-2 convs, ``n_blocks`` ResnetBlocks, two transposed convs, c7s1-out, Tanh."""

    def __init__(self, input_nc, output_nc, ngf=64, norm_layer=nn.BatchNorm2d, use_dropout=False, n_blocks=6,
                 padding_type="reflect"):
        assert n_blocks >= 0
        super().__init__()
        use_bias = uses_bias(norm_layer)
        model = [nn.ReflectionPad2d(3), nn.Conv2d(input_nc, ngf, kernel_size=7, padding=0, bias=use_bias),
                 norm_layer(ngf), nn.ReLU(True)]
        n_downsampling = 2
        for i in range(n_downsampling):
            mult = 2**i
            model += [nn.Conv2d(ngf * mult, ngf * mult * 2, kernel_size=3, stride=2, padding=1, bias=use_bias),
                      norm_layer(ngf * mult * 2), nn.ReLU(True)]
        mult = 2**n_downsampling
        for _ in range(n_blocks):
            model.append(ResnetBlock(ngf * mult, padding_type, norm_layer, use_dropout, use_bias))
        for i in range(n_downsampling):
            mult = 2 ** (n_downsampling - i)
            model += [nn.ConvTranspose2d(ngf * mult, ngf * mult // 2, kernel_size=3, stride=2, padding=1,
                                         output_padding=1, bias=use_bias),
                      norm_layer(ngf * mult // 2), nn.ReLU(True)]
        model += [nn.ReflectionPad2d(3), nn.Conv2d(ngf, output_nc, kernel_size=7, padding=0), nn.Tanh()]
        self.model = nn.Sequential(*model)

    def forward(self, x):
        return self.model(x)


class UnetSkipConnectionBlock(nn.Module):
    """One UNet level: down, the inner levels (``submodule``), up; ``cat([x, f(x)])`` except outermost."""

    def __init__(self, outer_nc, inner_nc, input_nc=None, submodule=None, outermost=False, innermost=False,
                 norm_layer=nn.BatchNorm2d, use_dropout=False):
        super().__init__()
        self.outermost = outermost
        use_bias = uses_bias(norm_layer)
        if input_nc is None:
            input_nc = outer_nc
        downconv = nn.Conv2d(input_nc, inner_nc, kernel_size=4, stride=2, padding=1, bias=use_bias)
        downrelu = nn.LeakyReLU(0.2, True)
        downnorm = norm_layer(inner_nc)
        uprelu = nn.ReLU(True)
        upnorm = norm_layer(outer_nc)
        if outermost:
            upconv = nn.ConvTranspose2d(inner_nc * 2, outer_nc, kernel_size=4, stride=2, padding=1)
            model = [downconv, submodule, uprelu, upconv, nn.Tanh()]
        elif innermost:
            upconv = nn.ConvTranspose2d(inner_nc, outer_nc, kernel_size=4, stride=2, padding=1, bias=use_bias)
            model = [downrelu, downconv, uprelu, upconv, upnorm]
        else:
            upconv = nn.ConvTranspose2d(inner_nc * 2, outer_nc, kernel_size=4, stride=2, padding=1, bias=use_bias)
            model = [downrelu, downconv, downnorm, submodule, uprelu, upconv, upnorm]
            if use_dropout:
                model.append(nn.Dropout(0.5))
        self.model = nn.Sequential(*model)

    def forward(self, x):
        if self.outermost:
            return self.model(x)
        return torch.cat([x, self.model(x)], 1)


class UnetGenerator(nn.Module):
    """``num_downs`` nested levels, built from the innermost out; widths ngf, 2, 4, 8 ngf, then 8 ngf."""

    def __init__(self, input_nc, output_nc, num_downs, ngf=64, norm_layer=nn.BatchNorm2d, use_dropout=False):
        super().__init__()
        block = UnetSkipConnectionBlock(ngf * 8, ngf * 8, norm_layer=norm_layer, innermost=True)
        for _ in range(num_downs - 5):
            block = UnetSkipConnectionBlock(ngf * 8, ngf * 8, submodule=block, norm_layer=norm_layer,
                                            use_dropout=use_dropout)
        block = UnetSkipConnectionBlock(ngf * 4, ngf * 8, submodule=block, norm_layer=norm_layer)
        block = UnetSkipConnectionBlock(ngf * 2, ngf * 4, submodule=block, norm_layer=norm_layer)
        block = UnetSkipConnectionBlock(ngf, ngf * 2, submodule=block, norm_layer=norm_layer)
        self.model = UnetSkipConnectionBlock(output_nc, ngf, input_nc=input_nc, submodule=block, outermost=True,
                                             norm_layer=norm_layer)

    def forward(self, x):
        return self.model(x)


class NLayerDiscriminator(nn.Module):
    """PatchGAN: C(ndf) s2, (n_layers - 1) x [C s2, norm], C s1, norm, C(1) s1; all 4x4 pad 1."""

    def __init__(self, input_nc, ndf=64, n_layers=3, norm_layer=nn.BatchNorm2d):
        super().__init__()
        use_bias = uses_bias(norm_layer)
        sequence = [nn.Conv2d(input_nc, ndf, kernel_size=4, stride=2, padding=1), nn.LeakyReLU(0.2, True)]
        mult = 1
        for n in range(1, n_layers + 1):
            previous, mult = mult, min(2**n, 8)
            stride = 2 if n < n_layers else 1
            sequence += [nn.Conv2d(ndf * previous, ndf * mult, kernel_size=4, stride=stride, padding=1,
                                   bias=use_bias),
                         norm_layer(ndf * mult), nn.LeakyReLU(0.2, True)]
        sequence.append(nn.Conv2d(ndf * mult, 1, kernel_size=4, stride=1, padding=1))
        self.model = nn.Sequential(*sequence)

    def forward(self, x):
        return self.model(x)


class PixelDiscriminator(nn.Module):
    """1x1 PatchGAN: C(ndf), LeakyReLU, C(2 ndf), norm, LeakyReLU, C(1)."""

    def __init__(self, input_nc, ndf=64, norm_layer=nn.BatchNorm2d):
        super().__init__()
        use_bias = uses_bias(norm_layer)
        self.net = nn.Sequential(
            nn.Conv2d(input_nc, ndf, kernel_size=1, stride=1, padding=0),
            nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf, ndf * 2, kernel_size=1, stride=1, padding=0, bias=use_bias),
            norm_layer(ndf * 2),
            nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf * 2, 1, kernel_size=1, stride=1, padding=0, bias=use_bias),
        )

    def forward(self, x):
        return self.net(x)


def define_G(input_nc, output_nc, ngf, netG, norm="batch", use_dropout=False, init_type="normal",
             init_gain=0.02):
    """The reference's generator factory (CPU only, no DataParallel wrapping)."""
    norm_layer = get_norm_layer(norm)
    if netG.startswith("resnet_") and netG.endswith("blocks"):
        net = ResnetGenerator(input_nc, output_nc, ngf, norm_layer=norm_layer, use_dropout=use_dropout,
                              n_blocks=int(netG[len("resnet_"):-len("blocks")]))
    elif netG in ("unet_128", "unet_256"):
        net = UnetGenerator(input_nc, output_nc, 7 if netG == "unet_128" else 8, ngf, norm_layer=norm_layer,
                            use_dropout=use_dropout)
    else:
        raise NotImplementedError(netG)
    return init_weights(net, init_type, init_gain)


def define_D(input_nc, ndf, netD, n_layers_D=3, norm="batch", init_type="normal", init_gain=0.02):
    """The reference's discriminator factory: ``basic`` (3 layers), ``n_layers`` or ``pixel``."""
    norm_layer = get_norm_layer(norm)
    if netD == "basic":
        net = NLayerDiscriminator(input_nc, ndf, n_layers=3, norm_layer=norm_layer)
    elif netD == "n_layers":
        net = NLayerDiscriminator(input_nc, ndf, n_layers_D, norm_layer=norm_layer)
    elif netD == "pixel":
        net = PixelDiscriminator(input_nc, ndf, norm_layer=norm_layer)
    else:
        raise NotImplementedError(netD)
    return init_weights(net, init_type, init_gain)
