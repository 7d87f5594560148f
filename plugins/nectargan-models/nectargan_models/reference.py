"""State dicts in the layout of the pix2pix/CycleGAN reference, to and from this plugin's networks.

The reference (junyanz/pytorch-CycleGAN-and-pix2pix) saves each network as a
bare ``state_dict`` (``latest_net_G.pth``). Its networks and ours have the
same layers, parameters and shapes; only the module paths differ: the
reference nests a UNet's levels inside each other (``model.model.1.model.3``)
and keeps a ResNet in one ``nn.Sequential`` (``model.10.conv_block.1``), where
we keep flat ``down``/``up`` lists and named parts. This module knows both
layouts and maps every tensor, checking its shape, for

========================= =============================== ======================
our model                 reference (``--netG``/``--netD``) reference class
========================= =============================== ======================
``unet_128``, ``unet_256`` ``unet_128``, ``unet_256``       ``UnetGenerator``
``unet`` (depth >= 5)     ``UnetGenerator(num_downs=depth)``
``resnet_6blocks``,       ``resnet_6blocks``,              ``ResnetGenerator``
``resnet_9blocks``,       ``resnet_9blocks``
``resnet`` (depth 2)
``patchgan_70``,          ``basic``, ``n_layers``          ``NLayerDiscriminator``
``patchgan``
``pixelgan``              ``pixel``                        ``PixelDiscriminator``
========================= =============================== ======================

:func:`from_reference` and :func:`to_reference` are the two directions; both
take our model's name and options (what a run's config stores), so exporting
a trained network is one call::

    to_reference(model.state_dict(), choice.name, choice.options)

Files from older or wrapped reference runs load too: ``module.`` prefixes
(``DataParallel``), BatchNorm without ``num_batches_tracked`` (PyTorch < 0.4.1;
filled with 0) and InstanceNorm running statistics (saved by PyTorch < 0.4,
and unused by the reference's own loader, which drops them; so do we).

The reference's ``norm='none'`` networks have no bias in the convs that ours
keep one in (see the model docs): importing gives those biases 0, which
computes the same; exporting requires them to be 0.

A state dict that does not fit the options is a :class:`ReferenceMismatch`
whose one line says which option is probably wrong, read from the tensors
(the norm from the BatchNorm tensors, ``ngf`` and channels from the first
conv, depth and blocks from how many there are). Torch is imported here:
import this module lazily from commands.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import torch
from torch import nn

from nectargan_core import ConfigError

#: Our model name -> the reference network family it corresponds to.
MODEL_FAMILY = {
    "unet": "unet", "unet_128": "unet", "unet_256": "unet",
    "resnet": "resnet", "resnet_6blocks": "resnet", "resnet_9blocks": "resnet",
    "patchgan": "nlayer", "patchgan_70": "nlayer",
    "pixelgan": "pixel",
}

#: The reference's ``--netG``/``--netD`` names -> our model name.
REFERENCE_ARCHS = {
    "unet_128": "unet_128", "unet_256": "unet_256",
    "resnet_6blocks": "resnet_6blocks", "resnet_9blocks": "resnet_9blocks",
    "basic": "patchgan_70", "n_layers": "patchgan", "pixel": "pixelgan",
}

FAMILY_NAMES = {
    "unet": "UNet generator (UnetGenerator)",
    "resnet": "ResNet generator (ResnetGenerator)",
    "nlayer": "PatchGAN discriminator (NLayerDiscriminator)",
    "pixel": "PixelGAN discriminator (PixelDiscriminator)",
}

#: The reference's own values of options it does not let one change.
REFERENCE_SLOPE = 0.2
REFERENCE_DROPOUT = 0.5

#: Prefixes that wrappers add to every key: DataParallel/DDP and torch.compile.
WRAPPER_PREFIXES = ("module.", "_orig_mod.")

NORM_TYPES = (nn.BatchNorm2d, nn.InstanceNorm2d)
CONV_TYPES = (nn.Conv2d, nn.ConvTranspose2d)
LEGACY_INSTANCE_NORM = ("running_mean", "running_var", "num_batches_tracked")


class ReferenceMismatch(ConfigError):
    """A state dict does not fit the network the options describe, or the options have no reference equivalent.

    A :class:`ConfigError` (exit status 2): the fix is another option value.
    """


@dataclass(frozen=True)
class Pair:
    """One module with tensors, by its path in our network and in the reference's."""

    ours: str
    reference: str
    #: For convs: whether the reference's conv has a bias (ours may have one where it does not).
    reference_bias: bool = True


@dataclass
class Layout:
    """Our network (on the meta device) and its modules paired with the reference's, in reference order."""

    model_name: str
    options: dict[str, Any]
    model: nn.Module
    pairs: list[Pair]

    def tensor_names(self, pair: Pair) -> list[str]:
        """The tensor names (``weight``, ``running_mean``, ...) of our module of ``pair``."""
        return list(self.model.get_submodule(pair.ours).state_dict())


# -- the two directions ------------------------------------------------------------------------------------
def from_reference(state: Mapping[str, Any], model_name: str, options: Mapping[str, Any], *,
                   source: str = "state dict") -> dict[str, torch.Tensor]:
    """``state`` (reference layout) as a state dict of our ``model_name`` built with ``options``.

    Every tensor of the file is used and every tensor of our network is set
    (in our network's key order, cast to its dtypes); anything else raises
    :class:`ReferenceMismatch` naming the option that is probably wrong.
    ``source`` names the state dict in messages (a file path).
    """
    state = strip_wrappers(state, source)
    layout = reference_layout(model_name, options)
    expected = layout.model.state_dict()
    result: dict[str, torch.Tensor] = {}
    used: set[str] = set()
    missing: list[str] = []
    mismatched: list[str] = []
    for pair in layout.pairs:
        module = layout.model.get_submodule(pair.ours)
        for name in layout.tensor_names(pair):
            ours, theirs = f"{pair.ours}.{name}", f"{pair.reference}.{name}"
            want = expected[ours]
            if theirs in state:
                used.add(theirs)
                tensor = state[theirs]
                if tuple(tensor.shape) != tuple(want.shape):
                    mismatched.append(f"'{theirs}' {list(tensor.shape)} vs {list(want.shape)}")
                    continue
                result[ours] = tensor.detach().to(want.dtype)
            elif name == "num_batches_tracked":
                result[ours] = torch.zeros((), dtype=want.dtype)  # BatchNorm saved before PyTorch 0.4.1
            elif name == "bias" and not pair.reference_bias:
                result[ours] = torch.zeros(want.shape, dtype=want.dtype)  # the reference's norm='none' convs
            else:
                missing.append(theirs)
        if isinstance(module, nn.InstanceNorm2d):  # running statistics of PyTorch < 0.4: unused, dropped
            used.update(k for k in (f"{pair.reference}.{s}" for s in LEGACY_INSTANCE_NORM) if k in state)
    unexpected = [key for key in state if key not in used]
    if missing or mismatched or unexpected:
        raise ReferenceMismatch(mismatch_message(state, layout, source, missing, unexpected, mismatched))
    if set(result) != set(expected):  # every pair covers its module; anything left is a layout bug
        raise AssertionError(f"layout of {model_name} leaves {sorted(set(expected) - set(result))[:3]} unmapped")
    return {key: result[key] for key in expected}


def to_reference(state: Mapping[str, Any], model_name: str, options: Mapping[str, Any], *,
                 source: str = "state dict") -> OrderedDict[str, torch.Tensor]:
    """``state`` of our ``model_name`` (built with ``options``) in the reference's layout and key order.

    The result loads into the reference's network (``define_G``/``define_D``
    with the matching options) with ``strict=True``. Raises
    :class:`ReferenceMismatch` when the options have no reference equivalent
    or ``state`` does not fit them.
    """
    state = strip_wrappers(state, source)
    layout = reference_layout(model_name, options)
    expected = layout.model.state_dict()
    if set(state) != set(expected) or any(tuple(state[k].shape) != tuple(v.shape) for k, v in expected.items()):
        extra = sorted(set(state) - set(expected))
        absent = sorted(set(expected) - set(state))
        shapes = [f"'{k}' {list(state[k].shape)} vs {list(v.shape)}" for k, v in expected.items()
                  if k in state and tuple(state[k].shape) != tuple(v.shape)]
        raise ReferenceMismatch(f"{source} is not a state dict of {model_name} with {describe_options(layout)}: "
                                + _problems(absent, extra, shapes))
    result: OrderedDict[str, torch.Tensor] = OrderedDict()
    for pair in layout.pairs:
        for name in layout.tensor_names(pair):
            tensor = state[f"{pair.ours}.{name}"]
            if name == "bias" and not pair.reference_bias:
                if torch.count_nonzero(tensor):
                    raise ReferenceMismatch(
                        f"{source}: '{pair.ours}.bias' is not zero, and the reference's norm='none' network has no "
                        "bias there; this network cannot be written in the reference layout")
                continue
            result[f"{pair.reference}.{name}"] = tensor.detach()
    return result


@dataclass(frozen=True)
class ReferenceBuild:
    """How the reference builds a network: its factory call and the ``train.py``/``test.py`` flags behind it."""

    #: ``define_G`` or ``define_D`` (the reference's ``models/networks.py``).
    factory: str
    #: Its keyword arguments, e.g. ``{"input_nc": 3, "output_nc": 3, "ngf": 64, "netG": "unet_256", ...}``.
    arguments: dict[str, Any]
    #: The command-line options that make ``train.py``/``test.py`` call it so, e.g. ``{"netG": "unet_256", ...}``;
    #: a True value is a bare flag (``--no_dropout``).
    flags: dict[str, Any]

    def command_line(self) -> str:
        """``--netG unet_256 --ngf 64 --norm batch ...`` (flags that are False are left out)."""
        return " ".join(f"--{name}" if value is True else f"--{name} {value}"
                        for name, value in self.flags.items() if value is not False)


#: UNet depth -> the ``--netG`` of the reference's ``define_G`` that builds it (no other depth).
UNET_ARCHS = {7: "unet_128", 8: "unet_256"}


def unet_depth_refusal(depth: int) -> str:
    return f"depth={depth}: the reference's define_G builds UNets of depth 7 (unet_128) and 8 (unet_256) only"


def reference_build(model_name: str, options: Mapping[str, Any]) -> ReferenceBuild:
    """The reference's ``define_G``/``define_D`` call (and flags) that builds our ``model_name`` with ``options``.

    Stricter than the mapping itself: the reference's classes can take what
    its factories never pass (a UNet of any depth, zero padding), but a user
    loads a file with ``test.py`` flags, so only ``--netG unet_128|unet_256|
    resnet_6blocks|resnet_9blocks`` and ``--netD basic|n_layers|pixel`` with
    reflection padding are offered. Anything else is a one-line
    :class:`ReferenceMismatch` naming the option.
    """
    if MODEL_FAMILY.get(model_name) == "unet":  # before the layout: its own limit (5 levels) is not define_G's
        depth = _resolved_options(model_name, options)["depth"]
        if depth not in UNET_ARCHS:
            raise ReferenceMismatch(f"{model_name} with {unet_depth_refusal(depth)}")
    layout = reference_layout(model_name, options)
    o = layout.options
    family = MODEL_FAMILY[model_name]
    if family in ("unet", "resnet"):
        if family == "unet":
            arch = UNET_ARCHS.get(o["depth"])
            refused = None if arch else unet_depth_refusal(o["depth"])
            dropout = o["dropout_layers"] > 0
        else:
            arch = {6: "resnet_6blocks", 9: "resnet_9blocks"}.get(o["n_blocks"])
            refused = None if arch else (f"n_blocks={o['n_blocks']}: the reference's define_G builds 6 "
                                         "(resnet_6blocks) or 9 (resnet_9blocks) residual blocks only")
            if arch and o["padding"] != "reflect":
                refused = f"padding={o['padding']}: the reference's define_G always pads the blocks by reflection"
            dropout = o["dropout"] > 0
        if refused:
            raise ReferenceMismatch(f"{model_name} with {refused}")
        arguments = {"input_nc": o["in_channels"], "output_nc": o["out_channels"], "ngf": o["ngf"], "netG": arch,
                     "norm": o["norm"], "use_dropout": dropout}
        flags = {"netG": arch, "ngf": o["ngf"], "norm": o["norm"], "input_nc": o["in_channels"],
                 "output_nc": o["out_channels"], "no_dropout": not dropout}
        return ReferenceBuild("define_G", arguments, flags)
    channels = o["input_channels"] + o["target_channels"] if o["conditional"] else o["target_channels"]
    if family == "pixel":
        arguments = {"input_nc": channels, "ndf": o["ndf"], "netD": "pixel", "norm": o["norm"]}
        return ReferenceBuild("define_D", arguments, {"netD": "pixel", "ndf": o["ndf"], "norm": o["norm"]})
    net = "basic" if o["n_layers"] == 3 else "n_layers"
    arguments = {"input_nc": channels, "ndf": o["ndf"], "netD": net, "n_layers_D": o["n_layers"], "norm": o["norm"]}
    flags = {"netD": net, **({"n_layers_D": o["n_layers"]} if net == "n_layers" else {}), "ndf": o["ndf"],
             "norm": o["norm"]}
    return ReferenceBuild("define_D", arguments, flags)


def strip_wrappers(state: Mapping[str, Any], source: str = "state dict") -> dict[str, torch.Tensor]:
    """``state`` without wrapper prefixes shared by every key (``module.``, ``_orig_mod.``) or ``_metadata``.

    Raises :class:`ReferenceMismatch` unless it maps strings to tensors.
    """
    if not isinstance(state, Mapping):
        raise ReferenceMismatch(f"{source}: not a state dict (a {type(state).__name__}, not a mapping of tensors)")
    items = {k: v for k, v in state.items() if k != "_metadata"}
    bad = next((k for k, v in items.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)), None)
    if bad is not None:
        raise ReferenceMismatch(f"{source}: not a state dict of tensors ('{bad}' holds a "
                                f"{type(items[bad]).__name__}); pass the network's own state_dict")
    if not items:
        raise ReferenceMismatch(f"{source}: the state dict is empty")
    stripped = True
    while stripped:
        stripped = False
        for prefix in WRAPPER_PREFIXES:
            if all(key.startswith(prefix) for key in items):
                items = {key[len(prefix):]: value for key, value in items.items()}
                stripped = True
    return items


# -- the layouts -------------------------------------------------------------------------------------------
def reference_layout(model_name: str, options: Mapping[str, Any]) -> Layout:
    """Our ``model_name`` built with ``options`` (meta device) and its modules paired with the reference's.

    Raises :class:`ReferenceMismatch` for a model or options the reference cannot express.
    """
    family = MODEL_FAMILY.get(model_name)
    if family is None:
        raise ReferenceMismatch(f"model '{model_name}' has no counterpart in the pix2pix/CycleGAN reference; "
                                f"choose one of {', '.join(sorted(MODEL_FAMILY))}")
    factory = _factories()[model_name]
    with torch.device("meta"):
        model = factory(**options)
    resolved = _resolved_options(model_name, options)
    problem = _inexpressible(family, resolved)
    if problem:
        raise ReferenceMismatch(f"{model_name} with {problem}: the reference has no such network")
    pairs = _PAIRS[family](model, resolved)
    return Layout(model_name, resolved, model, pairs)


def _factories() -> dict[str, Callable[..., nn.Module]]:
    from .patchgan import build_patchgan
    from .pixelgan import build_pixelgan
    from .resnet import build_resnet, build_resnet_6blocks, build_resnet_9blocks
    from .unet import build_unet, build_unet_128, build_unet_256

    return {"unet": build_unet, "unet_128": build_unet_128, "unet_256": build_unet_256,
            "resnet": build_resnet, "resnet_6blocks": build_resnet_6blocks, "resnet_9blocks": build_resnet_9blocks,
            "patchgan": build_patchgan, "patchgan_70": build_patchgan, "pixelgan": build_pixelgan}


def _resolved_options(model_name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    from . import options as models

    model = {"unet": models.UNetOptions, "unet_128": models.UNet128Options, "unet_256": models.UNet256Options,
             "resnet": models.ResNetOptions, "resnet_6blocks": models.ResNet6Options,
             "resnet_9blocks": models.ResNet9Options, "patchgan": models.PatchGANOptions,
             "patchgan_70": models.PatchGANOptions, "pixelgan": models.PixelGANOptions}[model_name]
    values = model.model_validate(dict(options)).model_dump(mode="json")
    if "dropout_layers" in values and values["dropout_layers"] is None:
        values["dropout_layers"] = models.reference_dropout_layers(values["depth"])
    return values


def _inexpressible(family: str, o: Mapping[str, Any]) -> str | None:
    """The first option value the reference's networks cannot have, as ``option=value`` plus why; else None."""
    if family == "unet":
        checks = [
            (o["block"] != "unet", f"block={o['block']}"),
            (o["upsample"] != "transposed", f"upsample={o['upsample']}"),
            (o["down_activation"] != "leaky_relu", f"down_activation={o['down_activation']}"),
            (o["up_activation"] != "relu", f"up_activation={o['up_activation']}"),
            (o["negative_slope"] != REFERENCE_SLOPE, f"negative_slope={o['negative_slope']} (the reference: 0.2)"),
            (o["depth"] < 5, f"depth={o['depth']} (the reference's UNets have at least 5 levels)"),
            (o["max_width"] != 8 * o["ngf"], f"max_width={o['max_width']} (the reference: 8 * ngf = {8 * o['ngf']})"),
            (o["dropout_layers"] not in (0, o["depth"] - 5),
             f"dropout_layers={o['dropout_layers']} (the reference: {o['depth'] - 5} with dropout, 0 without)"),
            (o["dropout_layers"] > 0 and o["dropout"] != REFERENCE_DROPOUT,
             f"dropout={o['dropout']} (the reference: 0.5)"),
        ]
    elif family == "resnet":
        checks = [
            (o["depth"] != 2, f"depth={o['depth']} (the reference downsamples twice)"),
            (o["upsample"] != "transposed", f"upsample={o['upsample']}"),
            (o["dropout"] not in (0, REFERENCE_DROPOUT), f"dropout={o['dropout']} (the reference: 0.5 or 0)"),
        ]
    elif family == "nlayer":
        widths = [min(o["ndf"] * 2**i, o["max_width"]) for i in range(o["n_layers"] + 1)]
        reference = [o["ndf"] * min(2**i, 8) for i in range(o["n_layers"] + 1)]
        checks = [
            (o["norm"] == "spectral", "norm=spectral"),
            (o["negative_slope"] != REFERENCE_SLOPE, f"negative_slope={o['negative_slope']} (the reference: 0.2)"),
            (widths != reference, f"max_width={o['max_width']} (the reference: 8 * ndf = {8 * o['ndf']})"),
        ]
    else:
        checks = [(o["negative_slope"] != REFERENCE_SLOPE,
                   f"negative_slope={o['negative_slope']} (the reference: 0.2)")]
    return next((text for failed, text in checks if failed), None)


def _typed(model: nn.Module, prefix: str) -> list[tuple[str, str]]:
    """(path, ``conv``|``norm``) of the convs and norms under ``prefix``, in registration order."""
    root = model.get_submodule(prefix) if prefix else model
    found = []
    for name, module in root.named_modules():
        path = f"{prefix}.{name}" if prefix and name else (prefix or name)
        if isinstance(module, CONV_TYPES):
            found.append((path, "conv"))
        elif isinstance(module, NORM_TYPES):
            found.append((path, "norm"))
    return found


def _zip(ours: list[tuple[str, str]], reference: list[tuple[str, str, bool]], what: str) -> list[Pair]:
    kinds = [kind for _, kind in ours]
    if kinds != [kind for _, kind, _ in reference]:  # our construction changed without this table: a bug
        raise AssertionError(f"{what}: our layers {kinds} do not line up with the reference's")
    return [Pair(path, ref, bias) for (path, _), (ref, _, bias) in zip(ours, reference)]


def _unet_pairs(model: nn.Module, o: Mapping[str, Any]) -> list[Pair]:
    """Reference order: each level's down conv and norm from the outside in, then the up convs back out."""
    depth, norm = o["depth"], o["norm"]
    use_bias = norm == "instance"
    blocks = ["model"]
    for level in range(1, depth):
        blocks.append(blocks[-1] + (".model.1" if level == 1 else ".model.3"))
    down: list[Pair] = []
    up: list[Pair] = []
    for level in range(depth):
        outermost, innermost = level == 0, level == depth - 1
        block = blocks[level] + ".model"
        reference = [(f"{block}.{0 if outermost else 1}", "conv", use_bias)]
        if not outermost and not innermost and norm != "none":
            reference.append((f"{block}.2", "norm", True))
        down += _zip(_typed(model, f"down.{level}"), reference, f"down.{level}")
        upconv = 3 if outermost or innermost else 5
        reference = [(f"{block}.{upconv}", "conv", outermost or use_bias)]
        if not outermost and norm != "none":
            reference.append((f"{block}.{upconv + 1}", "norm", True))
        up = _zip(_typed(model, f"up.{level}"), reference, f"up.{level}") + up
    return down + up


def _resnet_pairs(model: nn.Module, o: Mapping[str, Any]) -> list[Pair]:
    """The reference's one Sequential: pad, then (conv, norm, ReLU) x 3, the blocks, (convT, norm, ReLU) x 2,
    pad, conv, Tanh. Inside a block: [pad], conv, norm, ReLU, [Dropout], [pad], conv, norm."""
    norm, use_bias = o["norm"], o["norm"] == "instance"
    reference: list[tuple[str, str, bool]] = []

    def conv_norm(conv: str, after: str, bias: bool) -> None:
        reference.append((conv, "conv", bias))
        if norm != "none":  # the reference's Identity keeps the position, without tensors
            reference.append((after, "norm", True))

    for index in (1, 4, 7):  # c7s1-ngf after the ReflectionPad2d(3), then the two stride-2 convs
        conv_norm(f"model.{index}", f"model.{index + 1}", use_bias)
    pad = 0 if o["padding"] == "zero" else 1  # a padding module before each conv of a block
    second = pad + 3 + (1 if o["dropout"] > 0 else 0) + pad  # after conv, norm, ReLU, [Dropout], [pad]
    for block in range(10, 10 + o["n_blocks"]):
        conv_norm(f"model.{block}.conv_block.{pad}", f"model.{block}.conv_block.{pad + 1}", use_bias)
        conv_norm(f"model.{block}.conv_block.{second}", f"model.{block}.conv_block.{second + 1}", use_bias)
    up = 10 + o["n_blocks"]
    for index in (up, up + 3):
        conv_norm(f"model.{index}", f"model.{index + 1}", use_bias)
    reference.append((f"model.{up + 7}", "conv", True))  # after the ReflectionPad2d(3) at up + 6
    return _zip(_typed(model, ""), reference, "resnet")


def _nlayer_pairs(model: nn.Module, o: Mapping[str, Any]) -> list[Pair]:
    """``model.0`` conv; per layer conv, norm, LeakyReLU from ``model.2``; the last conv."""
    use_bias = o["norm"] == "instance"
    reference = [("model.0", "conv", True)]
    for layer in range(o["n_layers"]):
        reference.append((f"model.{2 + 3 * layer}", "conv", use_bias))
        if o["norm"] != "none":
            reference.append((f"model.{3 + 3 * layer}", "norm", True))
    reference.append((f"model.{2 + 3 * o['n_layers']}", "conv", True))
    return _zip(_typed(model, ""), reference, "patchgan")


def _pixel_pairs(model: nn.Module, o: Mapping[str, Any]) -> list[Pair]:
    use_bias = o["norm"] == "instance"
    reference = [("net.0", "conv", True), ("net.2", "conv", use_bias)]
    if o["norm"] != "none":
        reference.append(("net.3", "norm", True))
    reference.append(("net.5", "conv", use_bias))
    return _zip(_typed(model, ""), reference, "pixelgan")


_PAIRS = {"unet": _unet_pairs, "resnet": _resnet_pairs, "nlayer": _nlayer_pairs, "pixel": _pixel_pairs}


# -- reading a reference state dict, for messages ----------------------------------------------------------
@dataclass
class Found:
    """What a reference state dict shows about the network that saved it."""

    family: str | None
    options: dict[str, Any] = field(default_factory=dict)
    #: Option -> the key (or fact) it was read from.
    evidence: dict[str, str] = field(default_factory=dict)

    def arch(self) -> str | None:
        """The reference name that fits (``unet_256``, ``basic``, ...), else None."""
        depth, blocks, layers = (self.options.get(k) for k in ("depth", "n_blocks", "n_layers"))
        return {("unet", 7): "unet_128", ("unet", 8): "unet_256", ("resnet", 6): "resnet_6blocks",
                ("resnet", 9): "resnet_9blocks", ("nlayer", 3): "basic", ("pixel", None): "pixel"}.get(
            (self.family, depth or blocks or layers), {"nlayer": "n_layers"}.get(self.family or ""))


    def import_options(self) -> str | None:
        """The ``--arch`` (and ``--set`` of what the file shows) to import it with, e.g. ``--arch unet --set depth=5``."""
        arch = self.arch()
        if arch is not None:
            return f"--arch {arch}"
        generic = {"unet": ("unet", "depth"), "resnet": ("resnet", "n_blocks")}.get(self.family or "")
        if generic is None or self.options.get(generic[1]) is None:
            return None
        model, option = generic
        return f"--arch {model} --set {option}={self.options[option]}"


def inspect_reference(state: Mapping[str, torch.Tensor]) -> Found:
    """Which reference network ``state`` comes from and, as far as the tensors tell, with which options."""
    keys = set(state)

    def shape(key: str) -> tuple[int, ...]:
        return tuple(state[key].shape)

    def norm_from(bn: str, conv: str) -> tuple[str, str]:
        if f"{bn}.weight" in keys:
            return "batch", f"BatchNorm tensors such as '{bn}.weight'"
        if f"{conv}.bias" in keys:
            return "instance", f"no BatchNorm tensors and a bias in '{conv}'"
        return "none", f"no norm tensors and no bias in '{conv}'"

    if any(".conv_block." in key for key in keys) and "model.1.weight" in keys:
        blocks = sorted({int(m.group(1)) for k in keys if (m := re.match(r"model\.(\d+)\.conv_block\.", k))})
        first = blocks[0]
        convs = sorted(int(m.group(1)) for k in keys
                       if (m := re.match(rf"model\.{first}\.conv_block\.(\d+)\.weight$", k)) and len(shape(k)) == 4)
        last = max(int(m.group(1)) for k in keys if (m := re.match(r"model\.(\d+)\.weight$", k)))
        norm, why = norm_from("model.2", "model.1")
        zero = bool(convs) and convs[0] == 0
        second = convs[1] - convs[0] if len(convs) > 1 else 4
        return Found("resnet", {
            "n_blocks": len(blocks), "ngf": shape("model.1.weight")[0], "in_channels": shape("model.1.weight")[1],
            "out_channels": shape(f"model.{last}.weight")[0], "norm": norm,
            "padding": "zero" if zero else "reflect", "dropout": REFERENCE_DROPOUT if second == (3 if zero else 4) + 1
            else 0.0,
        }, {"n_blocks": f"{len(blocks)} residual blocks (model.{blocks[0]} to model.{blocks[-1]})",
            "ngf": f"'model.1.weight' {list(shape('model.1.weight'))}",
            "in_channels": f"'model.1.weight' {list(shape('model.1.weight'))}",
            "out_channels": f"'model.{last}.weight' {list(shape(f'model.{last}.weight'))}", "norm": why,
            "dropout": f"the second conv of each block at conv_block.{convs[1] if len(convs) > 1 else '?'}",
            "padding": f"the first conv of each block at conv_block.{convs[0] if convs else '?'}"})
    if "model.model.0.weight" in keys:
        depth, block = 1, "model.model.1"
        while f"{block}.model.1.weight" in keys:
            depth += 1
            block += ".model.3"
        first, last = shape("model.model.0.weight"), shape("model.model.3.weight") if "model.model.3.weight" in keys \
            else (0, 0)
        norm, why = norm_from("model.model.1.model.2", "model.model.1.model.1")
        return Found("unet", {"depth": depth, "ngf": first[0], "in_channels": first[1], "out_channels": last[1],
                              "norm": norm},
                     {"depth": f"{depth} nested levels", "ngf": f"'model.model.0.weight' {list(first)}",
                      "in_channels": f"'model.model.0.weight' {list(first)}",
                      "out_channels": f"'model.model.3.weight' {list(last)}", "norm": why})
    if "net.0.weight" in keys:
        first = shape("net.0.weight")
        norm, why = norm_from("net.3", "net.2")
        return Found("pixel", {"ndf": first[0], "channels": first[1], "norm": norm},
                     {"ndf": f"'net.0.weight' {list(first)}", "channels": f"'net.0.weight' {list(first)}",
                      "norm": why})
    if "model.0.weight" in keys and len(shape("model.0.weight")) == 4:
        convs = [k for k in keys if re.match(r"model\.\d+\.weight$", k) and len(shape(k)) == 4]
        first = shape("model.0.weight")
        norm, why = norm_from("model.3", "model.2")
        return Found("nlayer", {"n_layers": len(convs) - 2, "ndf": first[0], "channels": first[1], "norm": norm},
                     {"n_layers": f"{len(convs)} convs", "ndf": f"'model.0.weight' {list(first)}",
                      "channels": f"'model.0.weight' {list(first)}", "norm": why})
    return Found(None)


def describe_options(layout: Layout) -> str:
    """The options that decide the layout, e.g. ``norm=batch, ngf=64``."""
    o = layout.options
    family = MODEL_FAMILY[layout.model_name]
    names = {"unet": ("depth", "norm", "ngf"), "resnet": ("n_blocks", "norm", "ngf", "dropout"),
             "nlayer": ("n_layers", "norm", "ndf"), "pixel": ("norm", "ndf")}[family]
    return ", ".join(f"{name}={o[name]}" for name in names)


def mismatch_message(state: Mapping[str, torch.Tensor], layout: Layout, source: str, missing: list[str],
                     unexpected: list[str], mismatched: list[str]) -> str:
    """One line: what does not fit, and which ``--arch`` or ``--set`` probably fixes it."""
    found = inspect_reference(state)
    family = MODEL_FAMILY[layout.model_name]
    head = f"{source} does not fit {layout.model_name} ({describe_options(layout)})"
    if found.family is None:
        sample = ", ".join(f"'{key}'" for key in list(state)[:2])
        return (f"{head}: it is not a state dict of a reference network (keys such as {sample}); "
                "pass a generator or discriminator state dict saved by pytorch-CycleGAN-and-pix2pix")
    if found.family != family:
        hint = f"; try {found.import_options()}" if found.import_options() else ""
        return f"{head}: it holds a {FAMILY_NAMES[found.family]}, not a {FAMILY_NAMES[family]}{hint}"
    differences = _differences(found, layout)
    if differences:
        reasons = "; ".join(f"{why}" for why, _ in differences)
        fixes = " ".join(fix for _, fix in differences)
        return f"{head}: {reasons}; try {fixes}"
    return f"{head}: " + _problems(missing, unexpected, mismatched)


def _differences(found: Found, layout: Layout) -> list[tuple[str, str]]:
    """(what the file shows, the flag that fixes it) for each option the file contradicts, most telling first."""
    o, f, why = layout.options, found.options, found.evidence
    result: list[tuple[str, str]] = []
    family = found.family
    structure = {"unet": "depth", "resnet": "n_blocks", "nlayer": "n_layers"}.get(family or "")
    if structure and f[structure] != o[structure]:
        arch = found.arch()
        fix = f"--arch {arch}" if arch in REFERENCE_ARCHS and arch not in ("n_layers",) \
            else f"--set {structure}={f[structure]}"
        result.append((f"it has {why[structure]}, {structure}={f[structure]}", fix))
    if f["norm"] != o["norm"]:
        result.append((f"it has {why['norm']}, so it was saved with norm={f['norm']}", f"--set norm={f['norm']}"))
    width = "ndf" if family in ("nlayer", "pixel") else "ngf"
    if f[width] != o[width]:
        result.append((f"its first conv {why[width]} has {f[width]} filters", f"--set {width}={f[width]}"))
        if family == "unet" and o["max_width"] != 8 * f[width]:
            result.append(("the reference caps widths at 8 * ngf", f"--set max_width={8 * f[width]}"))
        if family == "nlayer" and o["max_width"] != 8 * f[width]:
            result.append(("the reference caps widths at 8 * ndf", f"--set max_width={8 * f[width]}"))
    if family in ("unet", "resnet"):
        for name in ("in_channels", "out_channels"):
            if f[name] != o[name]:
                result.append((f"{why[name]} gives {name}={f[name]}", f"--set {name}={f[name]}"))
    if family == "resnet":
        if (f["dropout"] > 0) != (o["dropout"] > 0):  # a Dropout module shifts the second conv's index
            result.append((f"{why['dropout']} means dropout={f['dropout']}", f"--set dropout={f['dropout']}"))
        if (f["padding"] == "zero") != (o["padding"] == "zero"):  # so does a padding module
            result.append((f"{why['padding']} means padding={f['padding']}", f"--set padding={f['padding']}"))
    if family in ("nlayer", "pixel"):
        channels = o["input_channels"] + o["target_channels"] if o["conditional"] else o["target_channels"]
        if f["channels"] != channels:
            result.append((f"its first conv {why['channels']} takes {f['channels']} channels, not {channels}",
                           _channel_fix(f["channels"], o)))
    return result


def _channel_fix(channels: int, o: Mapping[str, Any]) -> str:
    """The flags that give a discriminator ``channels`` input channels.

    Images have 1, 3 or 4 channels: an even count whose half is one of those
    is read as cat(A, B) with equal halves, another image count as B alone,
    anything else as cat(A, B) with B keeping its channels.
    """
    if channels % 2 == 0 and channels // 2 in (1, 3, 4):
        wanted = {"conditional": True, "input_channels": channels // 2, "target_channels": channels // 2}
    elif channels in (1, 3, 4):
        wanted = {"conditional": False, "target_channels": channels}
    else:
        wanted = {"conditional": True, "input_channels": max(channels - o["target_channels"], 1)}
    return " ".join(f"--set {key}={str(value).lower() if isinstance(value, bool) else value}"
                    for key, value in wanted.items() if o[key] != value)


def _problems(missing: list[str], unexpected: list[str], mismatched: list[str]) -> str:
    parts = []
    for label, items in (("missing", missing), ("unexpected", unexpected), ("of another shape", mismatched)):
        if items:
            quoted = items[0] if label == "of another shape" else f"'{items[0]}'"
            parts.append(f"{len(items)} tensor{'s' if len(items) != 1 else ''} {label} (e.g. {quoted})")
    return ", ".join(parts)
